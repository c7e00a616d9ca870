// Opening a profile's remote: the URL parsed into a provider, credentials resolved (from the
// environment and the profile's password_command, never from argv), and the contract's
// availability gate (rule 1) answered: missing credentials make the remote NoAccount.

import BackupEngine
import BackupStorage
import Foundation
import Synchronization

/// A remote, opened: the provider and what the gate should say about it.
public struct OpenedRemote: Sendable {
    public var storage: any RemoteStorage
    /// The remote's URL as the person wrote it (a password, if any, masked).
    public var displayURL: String
    /// `.noAccount` when credentials are missing.
    public var availability: Availability
    /// Why the remote is not available, when it is not.
    public var unavailableBecause: String?
    /// The remote is encrypted (its storage a `CryptStorage`, unless `locked`).
    public var encrypted = false
    /// Encrypted, and opened without its passphrase (the probe): only its plain names are read.
    public var locked = false
}

public enum Remotes {
    /// Opens the remote `url` with a profile's provider settings; `readOnly` (a restore)
    /// makes a folder remote refuse every write, its volume id included.
    /// Whether `url` names a remote whose password a person can type in (WebDAV; S3 keys and
    /// folders are not asked for).
    public static func takesPassword(_ url: String) -> Bool {
        switch try? RemoteURL.parse(url) {
        case .webdav?, .sftp?: true
        default: false
        }
    }

    /// `url` as it may be shown: a password written into it masked.
    public static func shownURL(_ url: String) -> String { RemoteURL.redacted(url) }

    /// `typedPassword` (one typed into the interface for this remote) comes before
    /// BACKUP_PASSWORD and the password_command: it is the person's latest word.
    public static func open(
        _ url: String, settings: [String: String] = [:], environment: [String: String] = ProcessInfo.processInfo.environment,
        readOnly: Bool = false, typedPassword: String? = nil, knownHosts: KnownHosts = KnownHosts()
    ) throws(AppError) -> OpenedRemote {
        let location: RemoteLocation
        do {
            location = try RemoteURL.parse(url)
        } catch {
            throw .usage((error as? RemoteSetupError)?.message ?? "the remote URL \(RemoteURL.redacted(url)) is not valid: \(error)")
        }
        if case .folder(let path) = location {
            guard path.hasPrefix("/") else {
                throw .usage("the remote folder \(url) must be an absolute path (or file:///path, webdav://, webdavs://, s3://)")
            }
            return OpenedRemote(storage: FolderStorage(root: path, readOnly: readOnly), displayURL: path, availability: .available)
        }

        var credentials = ProviderCredentials.fromEnvironment(environment)
        if let user = settings["user"] { credentials.webdavUser = user }
        if let typedPassword, !typedPassword.isEmpty {
            credentials.webdavPassword = typedPassword
        } else if credentials.webdavPassword == nil, let command = settings["password_command"] {
            credentials.webdavPassword = try PasswordCommand.run(command, key: "password_command")
            credentials.reloadWebDAVPassword = { try PasswordCommand.run(command, key: "password_command") }
        }
        var options = ProviderOptions.fromEnvironment(environment)
        if let caFile = settings["ca_file"] { options.caFile = caFile }
        if let transfers = settings["transfers"].flatMap(Int.init) { options.transfers = transfers }
        if let region = settings["region"] { options.s3Region = region }
        if let endpoint = settings["endpoint"] { options.s3Endpoint = endpoint }
        if let identityFile = settings["identity_file"] { options.identityFile = expandedHome(identityFile, environment) }
        if let home = environment["HOME"], !home.isEmpty {
            options.defaultIdentityFiles = ["id_ed25519", "id_ecdsa", "id_rsa"].map { home + "/.ssh/" + $0 }
                .filter { FileManager.default.isReadableFile(atPath: $0) }
        }
        options.knownHosts = knownHosts
        options.localUser = environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["LOGNAME"]
        if let pathStyle = settings["path_style"] { options.s3PathStyle = ["yes", "true", "1", "on"].contains(pathStyle.lowercased()) }
        let display = RemoteURL.redacted(url)
        do {
            return OpenedRemote(storage: try makeStorage(url, credentials: credentials, options: options), displayURL: display, availability: .available)
        } catch let error as RemoteSetupError where error.kind == .missingCredential {
            return OpenedRemote(storage: NoAccountStorage(reason: error.message), displayURL: display, availability: .noAccount, unavailableBecause: error.message)
        } catch {
            throw .usage((error as? RemoteSetupError)?.message ?? "cannot use the remote \(display): \(error)")
        }
    }
}

/// `path` with a leading "~/" made the home folder.
func expandedHome(_ path: String, _ environment: [String: String]) -> String {
    guard path.hasPrefix("~/"), let home = environment["HOME"], !home.isEmpty else { return path }
    return home + path.dropFirst()
}

/// Passwords typed into the interface, by remote: held in this process's memory only, never
/// written to the config, the state, a log or an argument, and gone when the process ends.
public final class TypedPasswords: Sendable {
    private let byRemote = Mutex<[String: String]>([:])

    public init() {}

    /// The key of a remote: its URL as written (a password in it masked) and the profile's user.
    static func key(_ url: String, settings: [String: String]) -> String {
        RemoteURL.redacted(url) + "\u{0}" + (settings["user"] ?? "")
    }

    public func set(_ password: String, for url: String, settings: [String: String]) {
        byRemote.withLock { $0[Self.key(url, settings: settings)] = password }
    }

    public func password(for url: String, settings: [String: String]) -> String? {
        byRemote.withLock { $0[Self.key(url, settings: settings)] }
    }

    /// The passphrase typed for the encrypted remote `url` (it comes before the environment's
    /// and the profile's command: it is the person's latest word).
    public func setPassphrase(_ passphrase: String, for url: String) {
        byRemote.withLock { $0["crypt\u{0}" + RemoteURL.redacted(url)] = passphrase }
    }

    public func passphrase(for url: String) -> String? {
        byRemote.withLock { $0["crypt\u{0}" + RemoteURL.redacted(url)] }
    }

    public func forget(_ url: String, settings: [String: String]) {
        _ = byRemote.withLock { $0.removeValue(forKey: Self.key(url, settings: settings)) }
    }
}

/// Stands in for a remote whose credentials are missing. The gate keeps the engines from
/// calling it; if anything does, it fails rather than guess.
struct NoAccountStorage: RemoteStorage {
    let reason: String
    private var error: CloudError { CloudError(.authRevoked, reason) }
    func identityKey() async throws -> String? { throw error }
    func list() async throws -> RemoteFileList { throw error }
    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile { throw error }
    func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile {
        throw error
    }
    func writeFileHashing(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> SentFile {
        throw error
    }
    func readBytes(_ path: String) async throws -> Data { throw error }
    func downloadFile(_ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void) async throws {
        throw error
    }
    func delete(_ path: String) async throws { throw error }
}

/// A command of the profile (`password_command`, `crypt_password_command`): run by /bin/sh, its
/// first line of output is the secret. The secret goes nowhere else: not into argv, not into
/// messages.
enum PasswordCommand {
    static func run(_ command: String, key: String) throws(AppError) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw .failure("cannot run the profile's \(key): \(error.localizedDescription)")
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw .failure("the profile's \(key) exited with status \(process.terminationStatus); run it yourself to see why")
        }
        let password = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !password.isEmpty else { throw .failure("the profile's \(key) printed nothing") }
        return password
    }
}
