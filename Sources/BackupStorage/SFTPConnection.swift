// One SSH connection with one SFTP channel on it, on libssh2 in blocking mode: TCP connect,
// the handshake, the host key checked (KnownHosts) before any credential is sent,
// authentication (agent, key file, password, keyboard-interactive), then SFTP requests. A
// connection is used by one thread at a time (SFTPPool hands it out); libssh2 sessions are
// not safe to share between threads.

import BackupEngine
import CSSH2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a connection proves who it is. `secret` is the key file's passphrase when there is a
/// key file, else the account's password; it never appears in a message.
public struct SSHCredentials: Sendable, CustomStringConvertible {
    public var user: String
    /// The ssh-agent's socket (SSH_AUTH_SOCK), tried first.
    public var agentSocket: String?
    /// A private key file (`identity_file`).
    public var identityFile: String?
    /// Keys tried after it when they exist (OpenSSH's defaults, when no `identity_file` is set):
    /// without a passphrase, then with `secret`; one that does not open is passed over.
    public var defaultIdentityFiles: [String] = []
    public var secret: String?

    public init(user: String, agentSocket: String? = nil, identityFile: String? = nil, secret: String? = nil) {
        self.user = user
        self.agentSocket = agentSocket
        self.identityFile = identityFile
        self.secret = secret
    }

    public var description: String {
        "SSHCredentials(user: \(user), agent: \(agentSocket == nil ? "none" : "set"), identityFile: \(identityFile ?? "none"), "
            + "secret: \(secret == nil ? "none" : "set"))"
    }
}

/// libssh2 (and OpenSSL under it, without its exit-time cleanup), set up once per process.
private let libssh2Ready: Int32 = backup_ssh2_init()

/// An SSH connection and its SFTP channel. Not thread-safe; owned by one caller at a time.
final class SFTPConnection {
    let server: String
    private let socketFD: Int32
    private let session: OpaquePointer
    private var channel: OpaquePointer?
    /// The host key's SHA-256, as OpenSSH prints it (`SHA256:` and unpadded base64).
    let hostKeyFingerprint: String
    /// The extensions the server named in its VERSION reply.
    private(set) var extensions: Set<String> = []
    /// Whether the connection failed in a way that leaves it unusable (it is then dropped).
    private(set) var broken = false

    private var nextId: UInt32 = 1
    private var inbox = [UInt8](repeating: 0, count: 256 << 10)
    private var inboxStart = 0
    private var inboxEnd = 0
    /// Replies that arrived for another request than the one being waited for.
    private var parked: [UInt32: (type: UInt8, body: [UInt8])] = [:]

    /// Connects, checks the host key against `hostKeys` and authenticates; throws CloudError
    /// (Offline: no connection; AuthRevoked: credentials or host key refused; Transport: the
    /// rest).
    init(host: String, port: Int, credentials: SSHCredentials, hostKeys: KnownHosts, timeoutSeconds: Int) throws {
        server = port == 22 ? host : "\(host):\(port)"
        guard libssh2Ready == 0 else { throw CloudError(.transport, "libssh2 could not be set up (libssh2_init failed)") }
        socketFD = try Self.connect(host: host, port: port, server: server, timeoutSeconds: timeoutSeconds)
        guard let session = libssh2_session_init_ex(nil, nil, nil, nil) else {
            close(socketFD)
            throw CloudError(.transport, "libssh2 could not make a session (out of memory)")
        }
        self.session = session
        libssh2_session_set_blocking(session, 1)
        libssh2_session_set_timeout(session, timeoutSeconds * 1000)
        if let preferred = hostKeys.preferredKeyTypes(host: host, port: port) {
            _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_HOSTKEY, preferred)
        }
        var fingerprint = ""
        do {
            let rc = libssh2_session_handshake(session, socketFD)
            guard rc == 0 else { throw Self.failure(session, rc, "the SSH handshake with \(server) failed", server: server) }
            var keyLength = 0
            var keyType: Int32 = 0
            guard let key = libssh2_session_hostkey(session, &keyLength, &keyType), keyLength > 0,
                  let hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256)
            else { throw CloudError(.transport, "\(server) sent no host key") }
            let keyBytes = [UInt8](UnsafeRawBufferPointer(start: key, count: keyLength))
            let hashBytes = [UInt8](UnsafeRawBufferPointer(start: hash, count: 32))
            fingerprint = "SHA256:" + Data(hashBytes).base64EncodedString().replacingOccurrences(of: "=", with: "")
            try hostKeys.check(host: host, port: port, keyType: keyType, key: keyBytes, fingerprint: fingerprint, session: session)
            try Self.authenticate(session, credentials, server: server)
        } catch {
            libssh2_session_free(session)
            close(socketFD)
            throw error
        }
        hostKeyFingerprint = fingerprint
        do {
            try openSFTP()
        } catch {
            shutdown()
            throw error
        }
    }

    deinit { shutdown() }

    private func shutdown() {
        if let channel {
            libssh2_channel_free(channel)
            self.channel = nil
        }
        if !broken { _ = libssh2_session_disconnect_ex(session, 11, "done", "") }
        libssh2_session_free(session)
        close(socketFD)
    }

    // MARK: Connecting

    private static func connect(host: String, port: Int, server: String, timeoutSeconds: Int) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let found = getaddrinfo(bare, String(port), &hints, &list)
        guard found == 0, let first = list else {
            let why = String(cString: gai_strerror(found))
            throw CloudError(.offline, "cannot find the SSH server \(server) (\(why)); check the host name and the network")
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = ECONNREFUSED
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.ai_protocol)
            guard fd >= 0 else { lastError = errno; continue }
            if connectWithTimeout(fd, address.pointee.ai_addr, address.pointee.ai_addrlen, timeoutSeconds) {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return fd
            }
            lastError = errno
            close(fd)
        }
        throw CloudError(.offline, "cannot connect to the SSH server \(server): \(String(cString: strerror(lastError))); "
            + "check that it is running and reachable")
    }

    private static func connectWithTimeout(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t, _ seconds: Int) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        if Glibc.connect(fd, address, length) == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = poll(&poller, 1, Int32(seconds * 1000))
        guard ready == 1 else {
            errno = ready == 0 ? ETIMEDOUT : errno
            return false
        }
        var code: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size)
        errno = code
        return code == 0
    }

    /// libssh2's last error on `session`, as a CloudError: a lost connection is Transport with
    /// what libssh2 said.
    static func failure(_ session: OpaquePointer, _ rc: Int32, _ what: String, server: String) -> CloudError {
        var message: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        _ = libssh2_session_last_error(session, &message, &length, 0)
        let said = message.map { String(cString: $0) } ?? "error \(rc)"
        if rc == LIBSSH2_ERROR_TIMEOUT || rc == LIBSSH2_ERROR_SOCKET_TIMEOUT {
            return CloudError(.transport, "\(what): \(server) did not answer in time")
        }
        return CloudError(.transport, "\(what) (\(said))")
    }

    // MARK: Authentication

    private static func authenticate(_ session: OpaquePointer, _ credentials: SSHCredentials, server: String) throws {
        let user = credentials.user
        let userLength = UInt32(user.utf8.count)
        let methods = libssh2_userauth_list(session, user, userLength).map { String(cString: $0) } ?? ""
        if libssh2_userauth_authenticated(session) != 0 { return }
        let offered = Set(methods.split(separator: ",").map(String.init))
        var tried: [String] = []

        if offered.contains("publickey"), let socketPath = credentials.agentSocket, !socketPath.isEmpty {
            tried.append("the ssh-agent's keys")
            if agentAuthenticate(session, user: user, socketPath: socketPath) { return }
        }
        if offered.contains("publickey"), let keyFile = credentials.identityFile {
            tried.append("the key \(keyFile)")
            guard FileManager.default.isReadableFile(atPath: keyFile) else {
                throw CloudError(.authRevoked, "cannot read the identity file \(keyFile) for \(user)@\(server); check identity_file in the profile")
            }
            let rc = libssh2_userauth_publickey_fromfile_ex(session, user, userLength, nil, keyFile, credentials.secret)
            if rc == 0 { return }
            if rc == LIBSSH2_ERROR_FILE {
                throw CloudError(.authRevoked, "the identity file \(keyFile) could not be opened: its passphrase is wrong or "
                    + "missing (BACKUP_PASSWORD or the profile's password_command), or it is not a private key")
            }
            if rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED {
                throw failure(session, rc, "authenticating to \(server) with \(keyFile) failed", server: server)
            }
        }
        if offered.contains("publickey") && credentials.identityFile == nil {
            for keyFile in credentials.defaultIdentityFiles where FileManager.default.isReadableFile(atPath: keyFile) {
                for passphrase in [nil, credentials.secret] {
                    let rc = libssh2_userauth_publickey_fromfile_ex(session, user, userLength, nil, keyFile, passphrase)
                    if rc == 0 { return }
                    // A key the server refused is not tried again with a passphrase.
                    if rc != LIBSSH2_ERROR_FILE { break }
                }
                tried.append("the key \(keyFile)")
            }
        }
        if credentials.identityFile == nil, let password = credentials.secret {
            if offered.contains("password") {
                tried.append("a password")
                let rc = libssh2_userauth_password_ex(session, user, userLength, password, UInt32(password.utf8.count), nil)
                if rc == 0 { return }
                if rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED {
                    throw failure(session, rc, "authenticating to \(server) failed", server: server)
                }
            } else if offered.contains("keyboard-interactive") {
                tried.append("a password (keyboard-interactive)")
                if backup_ssh2_kbd_password(session, user, userLength, password) == 0 { return }
            }
        }
        if tried.isEmpty {
            throw CloudError(.authRevoked, "\(server) offers \(methods.isEmpty ? "no authentication" : methods) for \(user), and none "
                + "was given: start an ssh-agent (SSH_AUTH_SOCK), set identity_file in the profile, or give a password "
                + "with BACKUP_PASSWORD or the profile's password_command")
        }
        throw CloudError(.authRevoked, "\(server) refused \(user) (tried \(tried.joined(separator: ", "))); check the user, "
            + "the key or the password")
    }

    private static func agentAuthenticate(_ session: OpaquePointer, user: String, socketPath: String) -> Bool {
        guard let agent = libssh2_agent_init(session) else { return false }
        defer { libssh2_agent_free(agent) }
        libssh2_agent_set_identity_path(agent, socketPath)
        guard libssh2_agent_connect(agent) == 0 else { return false }
        defer { _ = libssh2_agent_disconnect(agent) }
        guard libssh2_agent_list_identities(agent) == 0 else { return false }
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        while true {
            var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
            guard libssh2_agent_get_identity(agent, &identity, previous) == 0, let identity else { return false }
            if libssh2_agent_userauth(agent, user, identity) == 0 { return true }
            previous = identity
        }
    }

    // MARK: The SFTP channel

    private func openSFTP() throws {
        // An 8 MiB receive window: pipelined reads keep up to 2 MiB in flight.
        guard let channel = libssh2_channel_open_ex(session, "session", 7, 8 << 20, 32768, nil, 0) else {
            throw Self.failure(session, libssh2_session_last_errno(session), "\(server) refused an SSH channel", server: server)
        }
        self.channel = channel
        let rc = libssh2_channel_process_startup(channel, "subsystem", 9, "sftp", 4)
        guard rc == 0 else {
            throw Self.failure(session, rc, "\(server) has no SFTP subsystem (is sftp-server installed?)", server: server)
        }
        var hello = SFTPPacket(type: SFTP.initPacket, id: nil)
        hello.u32(3)
        try send(hello.finished())
        let (type, body) = try receivePacket()
        guard type == SFTP.version else { throw transport(SFTPProtocolError("the first reply is not VERSION")) }
        var reader = SFTPReader(body)
        let version = try decode { try reader.u32() }
        guard version >= 3 else { throw CloudError(.transport, "\(server) speaks SFTP version \(version); version 3 is needed") }
        while reader.remaining > 0 {
            let name = try decode { try reader.text() }
            _ = try decode { try reader.string() }
            extensions.insert(name)
        }
    }

    private func decode<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SFTPProtocolError {
            throw transport(error)
        }
    }

    private func transport(_ error: SFTPProtocolError) -> CloudError {
        broken = true
        return CloudError(.transport, "\(server): \(error.description)")
    }

    private func lost(_ rc: Int, _ what: String) -> CloudError {
        broken = true
        return Self.failure(session, Int32(truncatingIfNeeded: rc), "the SSH connection to \(server) failed while \(what)", server: server)
    }

    func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBufferPointer { try send(UnsafeRawBufferPointer($0)) }
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws {
        guard let channel else { throw CloudError(.transport, "the SFTP channel to \(server) is closed") }
        guard let base = bytes.baseAddress else { return }
        var sent = 0
        while sent < bytes.count {
            let rc = libssh2_channel_write_ex(channel, 0, (base + sent).assumingMemoryBound(to: CChar.self), bytes.count - sent)
            guard rc > 0 else { throw lost(rc, "sending") }
            sent += rc
        }
    }

    /// Reads until `count` bytes wait in the inbox (`inbox[inboxStart..<inboxEnd]`), moving
    /// what waits to the front first and growing the buffer only for a packet larger than it.
    private func fill(_ count: Int) throws {
        guard inboxEnd - inboxStart < count else { return }
        guard let channel else { throw CloudError(.transport, "the SFTP channel to \(server) is closed") }
        if inboxStart > 0 {
            let waiting = inboxEnd - inboxStart
            let start = inboxStart
            inbox.withUnsafeMutableBytes { raw in
                if let base = raw.baseAddress, waiting > 0 { memmove(base, base + start, waiting) }
            }
            inboxStart = 0
            inboxEnd = waiting
        }
        if inbox.count < count { inbox.append(contentsOf: repeatElement(0, count: count - inbox.count)) }
        while inboxEnd < count {
            let end = inboxEnd
            let rc = inbox.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return libssh2_channel_read_ex(channel, 0, (base + end).assumingMemoryBound(to: CChar.self), raw.count - end)
            }
            if rc < 0 { throw lost(rc, "receiving") }
            if rc == 0 && libssh2_channel_eof(channel) != 0 {
                broken = true
                throw CloudError(.transport, "\(server) closed the SFTP channel")
            }
            inboxEnd += rc
        }
    }

    /// The next packet: its type and the bytes after the type.
    func receivePacket() throws -> (UInt8, [UInt8]) {
        try fill(5)
        let header = inbox[inboxStart..<inboxStart + 4]
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length >= 1, length <= SFTP.maxPacket else { throw transport(SFTPProtocolError("a packet of \(length) bytes")) }
        try fill(4 + length)
        let type = inbox[inboxStart + 4]
        let body = Array(inbox[inboxStart + 5..<inboxStart + 4 + length])
        inboxStart += 4 + length
        return (type, body)
    }

    /// A new request id.
    func makeId() -> UInt32 {
        defer { nextId &+= 1 }
        return nextId
    }

    /// The reply to request `id` (its type and a reader after the id); replies to others
    /// that come first are kept for their own wait.
    func reply(to id: UInt32) throws -> (UInt8, SFTPReader) {
        if let waiting = parked.removeValue(forKey: id) { return (waiting.type, SFTPReader(waiting.body)) }
        while true {
            let (type, body) = try receivePacket()
            var reader = SFTPReader(body)
            let replyId = try decode { try reader.u32() }
            if replyId == id { return (type, reader) }
            guard parked.count < 4096 else { throw transport(SFTPProtocolError("replies to requests never sent")) }
            parked[replyId] = (type, Array(body[4...]))
        }
    }

    /// Sends `packet` and waits for its reply.
    func call(_ build: (inout SFTPPacket) -> Void, type: UInt8) throws -> (UInt8, SFTPReader) {
        let id = makeId()
        var packet = SFTPPacket(type: type, id: id)
        build(&packet)
        try send(packet.finished())
        return try reply(to: id)
    }

    /// A STATUS reply's status (ok or not); any other reply type is a protocol error.
    func status(_ reply: (UInt8, SFTPReader)) throws -> SFTPStatus {
        var (type, reader) = reply
        guard type == SFTP.status else { throw transport(SFTPProtocolError("reply type \(type) where STATUS was expected")) }
        let code = try decode { try reader.u32() }
        let message = (try? reader.text()) ?? ""
        return SFTPStatus(code: code, message: message)
    }

    /// Throws the status unless it is OK.
    func expectOK(_ reply: (UInt8, SFTPReader)) throws {
        let status = try status(reply)
        guard status.code == SFTP.ok else { throw status }
    }

    func expectHandle(_ reply: (UInt8, SFTPReader)) throws -> [UInt8] {
        var (type, reader) = reply
        if type == SFTP.status { throw try status(reply) }
        guard type == SFTP.handle else { throw transport(SFTPProtocolError("reply type \(type) where HANDLE was expected")) }
        let handle = try decode { try reader.string() }
        guard handle.count <= 256 else { throw transport(SFTPProtocolError("a handle of \(handle.count) bytes")) }
        return handle
    }

    func expectAttributes(_ reply: (UInt8, SFTPReader)) throws -> SFTPAttributes {
        var (type, reader) = reply
        if type == SFTP.status { throw try status(reply) }
        guard type == SFTP.attrs else { throw transport(SFTPProtocolError("reply type \(type) where ATTRS was expected")) }
        return try decode { try SFTPAttributes.decode(&reader) }
    }

    func expectName(_ reply: (UInt8, SFTPReader)) throws -> [UInt8] {
        var (type, reader) = reply
        if type == SFTP.status { throw try status(reply) }
        guard type == SFTP.name else { throw transport(SFTPProtocolError("reply type \(type) where NAME was expected")) }
        let count = try decode { try reader.u32() }
        guard count >= 1 else { throw transport(SFTPProtocolError("a NAME reply with no name")) }
        return try decode { try reader.string() }
    }
}
