// Turning what a person types as a remote into a provider: parsing the remote URL (a folder
// path or file:// URL, webdav:// and webdavs://, s3://bucket/prefix), the credentials and
// options the app resolved for it, and the one factory the app calls. Credentials arrive as
// values; this file never reads a password from anywhere, and never prints one.

import BackupEngine
import Foundation

/// A WebDAV server and the folder on it that backups go to.
public struct WebDAVEndpoint: Sendable, Equatable {
    /// https (webdavs://) rather than http (webdav://).
    public var secure: Bool
    /// The host as written in the URL (an IPv6 address keeps its brackets).
    public var host: String
    public var port: Int?
    /// The user from the URL (`webdavs://alice@host/…`), if any.
    public var user: String?
    /// The remote folder's path components on the server, decoded; empty for the server root.
    public var folder: [String]

    public init(secure: Bool, host: String, port: Int? = nil, user: String? = nil, folder: [String] = []) {
        self.secure = secure
        self.host = host
        self.port = port
        self.user = user
        self.folder = folder
    }

    /// Scheme, host and port, as messages name the server.
    public var server: String { "\(secure ? "https" : "http")://\(host)\(port.map { ":\($0)" } ?? "")" }

    /// The remote folder's URL with a trailing "/", percent-encoded.
    public var folderURL: String { server + encodedPath(folder) + "/" }

    /// The URL the person gave, without credentials, for messages.
    public var displayURL: String {
        let userPart = user.map { "\(SigV4Signer.uriEncode($0, keepSlash: false))@" } ?? ""
        return "\(secure ? "webdavs" : "webdav")://\(userPart)\(host)\(port.map { ":\($0)" } ?? "")"
            + "/" + folder.joined(separator: "/")
    }

    /// The percent-encoded absolute path of `components` under the server root ("" for none).
    func encodedPath(_ components: [String]) -> String {
        components.map { "/" + SigV4Signer.uriEncode($0, keepSlash: false) }.joined()
    }
}

/// An S3 bucket and the key prefix (a "folder") that backups go to.
public struct S3Location: Sendable, Equatable {
    public var bucket: String
    /// The prefix's components; keys are `prefix/…`, or the path itself when empty.
    public var prefix: [String]

    public init(bucket: String, prefix: [String] = []) {
        self.bucket = bucket
        self.prefix = prefix
    }

    public var displayURL: String { "s3://\(bucket)/" + prefix.joined(separator: "/") }
}

/// Where a remote URL points.
public enum RemoteLocation: Sendable, Equatable {
    /// A folder on a local or mounted filesystem.
    case folder(String)
    case webdav(WebDAVEndpoint)
    case s3(S3Location)
    case sftp(SFTPEndpoint)

    /// A folder on a server, which `backup init` creates when it is missing (WebDAV, SFTP).
    public var isServerFolder: Bool {
        switch self {
        case .webdav, .sftp: true
        case .folder, .s3: false
        }
    }

    public var isSFTP: Bool {
        if case .sftp = self { return true }
        return false
    }
}

/// A remote whose folder `backup init` creates when it is missing (its parent must exist).
public protocol CreatesRemoteFolder: Sendable {
    /// Creates the remote folder when it is missing; whether it did.
    func createRemoteFolder() async throws -> Bool
}

extension WebDAVStorage: CreatesRemoteFolder {}
extension SFTPStorage: CreatesRemoteFolder {}

/// A remote that cannot be set up as given: a malformed URL, a missing credential or a bad
/// option. The message names the URL (without credentials) and says what to change.
public struct RemoteSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case invalidURL
        /// A credential the remote needs is missing: the app's "NoAccount" gate.
        case missingCredential
        case invalidOption
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Credentials the app resolved for a remote: values, never commands or file names.
///
/// `description` never shows a secret, so a credentials value can be logged by mistake
/// without leaking anything.
public struct ProviderCredentials: Sendable, CustomStringConvertible {
    /// The WebDAV user, when the URL has none (from the profile).
    public var webdavUser: String?
    /// The WebDAV password (BACKUP_PASSWORD, or the output of the profile's password_command).
    public var webdavPassword: String?
    /// Called at most once per request after the server refuses the password (HTTP 401), to
    /// read it again (the app re-runs password_command); nil or the same password ends in
    /// AuthRevoked.
    public var reloadWebDAVPassword: (@Sendable () async throws -> String?)?
    public var awsAccessKeyId: String?
    public var awsSecretAccessKey: String?
    public var awsSessionToken: String?
    /// The ssh-agent's socket (SSH_AUTH_SOCK) for SFTP; the SFTP password or key passphrase is
    /// `webdavPassword` (BACKUP_PASSWORD or the password_command, like WebDAV's).
    public var sshAgentSocket: String?

    public init(
        webdavUser: String? = nil, webdavPassword: String? = nil,
        reloadWebDAVPassword: (@Sendable () async throws -> String?)? = nil,
        awsAccessKeyId: String? = nil, awsSecretAccessKey: String? = nil, awsSessionToken: String? = nil
    ) {
        self.webdavUser = webdavUser
        self.webdavPassword = webdavPassword
        self.reloadWebDAVPassword = reloadWebDAVPassword
        self.awsAccessKeyId = awsAccessKeyId
        self.awsSecretAccessKey = awsSecretAccessKey
        self.awsSessionToken = awsSessionToken
    }

    /// The credentials the environment holds: BACKUP_PASSWORD, AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; empty values count as absent.
    public static func fromEnvironment(_ environment: [String: String]) -> ProviderCredentials {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var credentials = ProviderCredentials(
            webdavPassword: value("BACKUP_PASSWORD"), awsAccessKeyId: value("AWS_ACCESS_KEY_ID"),
            awsSecretAccessKey: value("AWS_SECRET_ACCESS_KEY"), awsSessionToken: value("AWS_SESSION_TOKEN"))
        credentials.sshAgentSocket = value("SSH_AUTH_SOCK")
        return credentials
    }

    public var description: String {
        func shown(_ secret: String?) -> String { secret == nil ? "none" : "set" }
        return "ProviderCredentials(webdavUser: \(webdavUser ?? "none"), webdavPassword: \(shown(webdavPassword)), "
            + "awsAccessKeyId: \(awsAccessKeyId ?? "none"), awsSecretAccessKey: \(shown(awsSecretAccessKey)), "
            + "awsSessionToken: \(shown(awsSessionToken)))"
    }

    /// Every secret, to keep out of messages.
    var secrets: [String] {
        [webdavPassword, awsSecretAccessKey, awsSessionToken].compactMap { $0 }.filter { !$0.isEmpty }
    }
}

/// Settings of a remote beyond its URL and credentials.
public struct ProviderOptions: Sendable {
    /// Timeouts, retries and TLS (including `ca_file`) for WebDAV and S3.
    public var http = HTTPSettings()
    /// How many uploads the engine may run at once; the providers accept concurrent calls.
    public var transfers = 4
    /// The S3 endpoint (AWS_ENDPOINT_URL), e.g. "https://s3.eu-central-003.backblazeb2.com"; nil
    /// means AWS itself in `s3Region`.
    public var s3Endpoint: String?
    /// The S3 region (AWS_REGION); us-east-1 when nil.
    public var s3Region: String?
    /// Path-style addressing (endpoint/bucket/key) rather than virtual-hosted (bucket.endpoint/key);
    /// nil chooses: path style for a custom endpoint or a bucket name DNS cannot carry.
    public var s3PathStyle: Bool?
    /// Files larger than this are uploaded to S3 in parts.
    public var multipartThreshold: Int64 = 64 << 20
    /// The size of each part of a multipart upload (S3 needs at least 5 MiB but for the last).
    public var multipartPartSize: Int64 = 16 << 20
    /// The SFTP private key file (`identity_file`).
    public var identityFile: String?
    /// OpenSSH's default keys that exist (`~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`), tried
    /// when no `identity_file` is set, as ssh does.
    public var defaultIdentityFiles: [String] = []
    /// Where SFTP host keys are checked and accepted.
    public var knownHosts = KnownHosts()
    /// The SFTP user when neither the URL nor the profile names one: the local login name.
    public var localUser: String?

    /// The `ca_file` setting.
    public var caFile: String? {
        get { http.caFile }
        set { http.caFile = newValue }
    }

    public init() {}

    /// Options from the environment: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, and AWS_REGION
    /// or AWS_DEFAULT_REGION.
    public static func fromEnvironment(_ environment: [String: String]) -> ProviderOptions {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var options = ProviderOptions()
        options.s3Endpoint = value("AWS_ENDPOINT_URL_S3") ?? value("AWS_ENDPOINT_URL")
        options.s3Region = value("AWS_REGION") ?? value("AWS_DEFAULT_REGION")
        return options
    }
}

/// Parsing remote URLs.
public enum RemoteURL {
    /// Where `text` points: a plain path or `file:///path` (a folder), `webdav://[user@]host[:port]/path`
    /// (http), `webdavs://…` (https) or `s3://bucket[/prefix]`.
    ///
    /// Throws `RemoteSetupError` of kind `.invalidURL` naming the URL and what is wrong. A
    /// password in the URL is refused (it would end up in the shell history and the process
    /// list), and the message shows the URL with the password masked.
    public static func parse(_ text: String) throws -> RemoteLocation {
        guard let schemeEnd = text.range(of: "://") else {
            guard !text.isEmpty else { throw invalid(text, "it is empty") }
            if let colon = text.firstIndex(of: ":"), !text[..<colon].contains("/"),
               text[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." })
            {
                throw invalid(text, "\"\(text[..<colon]):\" is not a known kind of remote; "
                    + "use a folder path, file:///path, webdav://host/path, webdavs://host/path, s3://bucket/prefix or sftp://user@host/path")
            }
            return .folder(text)
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        let rest = String(text[schemeEnd.upperBound...])
        if rest.contains("?") || rest.contains("#") {
            throw invalid(text, "it has a query (\"?\") or fragment (\"#\"), which a remote URL cannot use; "
                + "percent-encode those characters in names (%3F, %23)")
        }
        switch scheme {
        case "file":
            return .folder(try parseFile(text, rest))
        case "webdav", "webdavs":
            return .webdav(try parseWebDAV(text, rest, secure: scheme == "webdavs"))
        case "s3":
            return .s3(try parseS3(text, rest))
        case "sftp":
            return .sftp(try parseSFTP(text, rest))
        default:
            throw invalid(text, "\"\(scheme)://\" is not a known kind of remote; "
                + "use a folder path, file:///path, webdav://host/path, webdavs://host/path, s3://bucket/prefix or sftp://user@host/path")
        }
    }

    /// The URL with any password masked, for messages.
    public static func redacted(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return text }
        let userInfo = authority[..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    // MARK: Private

    private static func invalid(_ text: String, _ why: String) -> RemoteSetupError {
        RemoteSetupError(.invalidURL, "the remote URL \(String(reflecting: redacted(text))) is not valid: \(why)")
    }

    private static func parseFile(_ text: String, _ rest: String) throws -> String {
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let host = rest[..<slash]
        guard host.isEmpty || host == "localhost" else {
            throw invalid(text, "a file:// URL names a folder on this machine, so it takes no host "
                + "(write file:///path, with three slashes)")
        }
        let path = String(rest[slash...])
        guard !path.isEmpty, let decoded = path.removingPercentEncoding else {
            throw invalid(text, "it has no path or a bad percent-encoding")
        }
        return decoded
    }

    private static func parseWebDAV(_ text: String, _ rest: String, secure: Bool) throws -> WebDAVEndpoint {
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = Substring(rest[..<slash])
        var user: String?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            if userInfo.contains(":") {
                throw invalid(text, "it carries a password; remove it from the URL and set BACKUP_PASSWORD "
                    + "or the profile's password_command instead")
            }
            guard let decoded = userInfo.removingPercentEncoding, !decoded.isEmpty else {
                throw invalid(text, "the user name before \"@\" is empty or badly percent-encoded")
            }
            user = decoded
            authority = authority[authority.index(after: at)...]
        }
        var host = authority
        var port: Int?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid(text, "an IPv6 address lacks its \"]\"") }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid(text, "unexpected text after the IPv6 address") }
                port = try parsePort(text, after.dropFirst())
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = try parsePort(text, authority[authority.index(after: colon)...])
        }
        guard !host.isEmpty else { throw invalid(text, "it has no host (write webdav://host/path)") }
        guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._[]:".contains($0)) }) else {
            throw invalid(text, "the host \(String(reflecting: String(host))) has characters a host name cannot have")
        }
        let folder = try pathComponents(text, String(rest[slash...]))
        return WebDAVEndpoint(secure: secure, host: String(host), port: port, user: user, folder: folder)
    }

    private static func parseSFTP(_ text: String, _ rest: String) throws -> SFTPEndpoint {
        // The authority is read as WebDAV's is (user@host:port, IPv6 in brackets).
        let server = try parseWebDAV(text, rest, secure: false)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var folder = server.folder
        let inHome = folder.first == "~"
        if inHome { folder.removeFirst() }
        if folder.contains("~") { throw invalid(text, "\"~\" can only begin the path (sftp://host/~/folder: in the login folder)") }
        if !inHome && folder.isEmpty && rest[slash...].count <= 1 {
            throw invalid(text, "it names no folder on the server; write sftp://user@host/path/to/folder "
                + "(or sftp://user@host/~/folder for one in the login folder)")
        }
        return SFTPEndpoint(host: server.host, port: server.port ?? 22, user: server.user, folder: folder, inHome: inHome)
    }

    private static func parseS3(_ text: String, _ rest: String) throws -> S3Location {
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let bucket = String(rest[..<slash])
        guard !bucket.isEmpty else { throw invalid(text, "it has no bucket (write s3://bucket/prefix)") }
        if bucket.contains("@") {
            throw invalid(text, "credentials do not belong in an s3:// URL; set AWS_ACCESS_KEY_ID and "
                + "AWS_SECRET_ACCESS_KEY (or the profile's keys) instead")
        }
        guard (3...63).contains(bucket.count),
              bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }),
              bucket.first?.isLetter == true || bucket.first?.isNumber == true
        else {
            throw invalid(text, "\(String(reflecting: bucket)) is not a bucket name: 3 to 63 lowercase letters, "
                + "digits, dots, hyphens or underscores, starting with a letter or digit")
        }
        return S3Location(bucket: bucket, prefix: try pathComponents(text, String(rest[slash...])))
    }

    private static func parsePort(_ text: String, _ digits: Substring) throws -> Int {
        guard let port = Int(digits), (1...65535).contains(port), digits.allSatisfy(\.isNumber) else {
            throw invalid(text, "the port \(String(reflecting: String(digits))) is not a number from 1 to 65535")
        }
        return port
    }

    /// The decoded components of a URL path ("/a/b%20c/" → ["a", "b c"]); one trailing "/" is
    /// allowed, empty, "." and ".." components are not.
    private static func pathComponents(_ text: String, _ path: String) throws -> [String] {
        var trimmed = Substring(path)
        if trimmed.hasPrefix("/") { trimmed = trimmed.dropFirst() }
        if trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        if trimmed.isEmpty { return [] }
        var parts: [String] = []
        for raw in trimmed.split(separator: "/", omittingEmptySubsequences: false) {
            guard let part = raw.removingPercentEncoding else {
                throw invalid(text, "the path has a bad percent-encoding in \(String(reflecting: String(raw)))")
            }
            if part.isEmpty || part == "." || part == ".." || part.contains("/") || part.contains("\u{0}") {
                throw invalid(text, "the path has an empty, \".\" or \"..\" component")
            }
            parts.append(part)
        }
        return parts
    }
}

/// The provider for the remote URL `url`, ready to use; nothing is contacted yet.
///
/// Throws `RemoteSetupError`: `.invalidURL` for a URL `RemoteURL.parse` refuses,
/// `.missingCredential` when WebDAV has a user but no password or S3 has no keys,
/// `.invalidOption` for options out of range.
public func makeStorage(
    _ url: String, credentials: ProviderCredentials, options: ProviderOptions
) throws -> any RemoteStorage {
    guard (1...64).contains(options.transfers) else {
        throw RemoteSetupError(.invalidOption, "transfers is \(options.transfers); use a number from 1 to 64")
    }
    switch try RemoteURL.parse(url) {
    case .folder(let path):
        return FolderStorage(root: path)
    case .webdav(var endpoint):
        if endpoint.user == nil { endpoint.user = credentials.webdavUser }
        if endpoint.user != nil && credentials.webdavPassword == nil {
            throw RemoteSetupError(.missingCredential, "no password for \(endpoint.displayURL): set BACKUP_PASSWORD "
                + "or the profile's password_command")
        }
        return WebDAVStorage(
            endpoint: endpoint, password: credentials.webdavPassword,
            reloadPassword: credentials.reloadWebDAVPassword, settings: options.http)
    case .s3(let location):
        guard let keyId = credentials.awsAccessKeyId, let secret = credentials.awsSecretAccessKey else {
            throw RemoteSetupError(.missingCredential, "no S3 keys for \(location.displayURL): set AWS_ACCESS_KEY_ID "
                + "and AWS_SECRET_ACCESS_KEY (or the profile's keys)")
        }
        return try S3Storage(
            location: location, accessKeyId: keyId, secretAccessKey: secret, sessionToken: credentials.awsSessionToken,
            options: options)
    case .sftp(var endpoint):
        guard let user = endpoint.user ?? credentials.webdavUser ?? options.localUser else {
            throw RemoteSetupError(.invalidOption, "no user for \(endpoint.displayURL): write sftp://user@host/path or set user in the profile")
        }
        endpoint.user = user
        if credentials.sshAgentSocket == nil && options.identityFile == nil && options.defaultIdentityFiles.isEmpty
            && credentials.webdavPassword == nil {
            throw RemoteSetupError(.missingCredential, "no way to log in to \(endpoint.displayURL): start an ssh-agent (SSH_AUTH_SOCK), "
                + "set identity_file in the profile (--identity-file), or give a password with BACKUP_PASSWORD or the profile's "
                + "password_command")
        }
        var ssh = SSHCredentials(user: user, agentSocket: credentials.sshAgentSocket, identityFile: options.identityFile,
                                 secret: credentials.webdavPassword)
        if options.identityFile == nil { ssh.defaultIdentityFiles = options.defaultIdentityFiles }
        return SFTPStorage(endpoint: endpoint, credentials: ssh, knownHosts: options.knownHosts, connections: options.transfers,
                           timeoutSeconds: options.http.stallTimeout)
    }
}
