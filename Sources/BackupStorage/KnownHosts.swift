// Whether an SSH server is the one the person trusts: its host key checked against OpenSSH's
// `~/.ssh/known_hosts` (read only) and the tool's own `known_hosts` (written only when the
// person accepts a key by its fingerprint, `--accept-host-key SHA256:…`). An unknown key is
// refused with its fingerprint and the flag that accepts it; a changed key is refused loudly
// and accepted only by a flag naming the new fingerprint.

import BackupEngine
import CSSH2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The host-key files and the person's word for this run.
public struct KnownHosts: Sendable, Equatable {
    /// Files read but never written (OpenSSH's own).
    public var readOnlyFiles: [String]
    /// The tool's own file: read, and written when a key is accepted.
    public var ownFile: String?
    /// `--accept-host-key`: the fingerprint (`SHA256:…`) the person checked and accepts.
    public var acceptFingerprint: String?

    public init(readOnlyFiles: [String] = [], ownFile: String? = nil, acceptFingerprint: String? = nil) {
        self.readOnlyFiles = readOnlyFiles
        self.ownFile = ownFile
        self.acceptFingerprint = acceptFingerprint
    }

    /// The files for `home` and `configFolder` (the tool's `$XDG_CONFIG_HOME/backup`).
    public static func standard(home: String, configFolder: String, accept: String? = nil) -> KnownHosts {
        KnownHosts(readOnlyFiles: [home + "/.ssh/known_hosts"], ownFile: configFolder + "/known_hosts", acceptFingerprint: accept)
    }

    /// Whether `text` is a SHA-256 fingerprint as OpenSSH prints it: `SHA256:` and the hash in
    /// base64 without its padding (43 characters).
    public static func isFingerprint(_ text: String) -> Bool {
        guard text.hasPrefix("SHA256:") else { return false }
        let hash = text.dropFirst(7)
        return hash.count == 43 && hash.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/") }
    }

    /// How a host is named in a known_hosts file: `host`, or `[host]:port` off port 22.
    static func token(host: String, port: Int) -> String {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return port == 22 ? bare : "[\(bare)]:\(port)"
    }

    /// The host-key algorithms to ask for, those the files hold for this host first (so the
    /// server shows the key that can be checked), or nil when the files know nothing of it.
    func preferredKeyTypes(host: String, port: Int) -> String? {
        let token = Self.token(host: host, port: port)
        var known: [String] = []
        for file in readOnlyFiles + [ownFile].compactMap({ $0 }) {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 3, !fields[0].hasPrefix("#"), !fields[0].hasPrefix("@"),
                      fields[0].split(separator: ",").contains(where: { $0 == token })
                else { continue }
                let type = String(fields[1])
                let names = type == "ssh-rsa" ? ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] : [type]
                for name in names where !known.contains(name) { known.append(name) }
            }
        }
        guard !known.isEmpty else { return nil }
        let all = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
        return (known.filter(all.contains) + all.filter { !known.contains($0) }).joined(separator: ",")
    }

    /// What a file says of the key: libssh2's MATCH, MISMATCH, NOTFOUND (also for a missing file).
    private func verdict(_ file: String, session: OpaquePointer, host: String, port: Int, mask: Int32, key: [UInt8]) -> Int32 {
        guard let text = try? Data(contentsOf: URL(fileURLWithPath: file)), let hosts = libssh2_knownhost_init(session) else {
            return LIBSSH2_KNOWNHOST_CHECK_NOTFOUND
        }
        defer { libssh2_knownhost_free(hosts) }
        // Line by line: a line libssh2 cannot read (a key type it does not know) is skipped
        // rather than ending the file. Each line is given with its newline and a NUL after it:
        // libssh2 1.10 reads the byte past the length it is given, looking for a newline, and a
        // stray one there would cut the key's last character (a false "changed").
        for line in text.split(separator: UInt8(ascii: "\n")) where !line.isEmpty && line.first != UInt8(ascii: "#") {
            let bytes = Array(line) + [UInt8(ascii: "\n"), 0]
            _ = bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) {
                    libssh2_knownhost_readline(hosts, $0.baseAddress, bytes.count - 1, LIBSSH2_KNOWNHOST_FILE_OPENSSH)
                }
            }
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var found: UnsafeMutablePointer<libssh2_knownhost>?
        return key.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                libssh2_knownhost_checkp(hosts, bare, Int32(port), $0.baseAddress, key.count,
                                         LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | mask, &found)
            }
        }
    }

    private static func mask(_ keyType: Int32) -> Int32 {
        switch keyType {
        case LIBSSH2_HOSTKEY_TYPE_RSA: LIBSSH2_KNOWNHOST_KEY_SSHRSA
        case LIBSSH2_HOSTKEY_TYPE_DSS: LIBSSH2_KNOWNHOST_KEY_SSHDSS
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: LIBSSH2_KNOWNHOST_KEY_ECDSA_256
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: LIBSSH2_KNOWNHOST_KEY_ECDSA_384
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: LIBSSH2_KNOWNHOST_KEY_ECDSA_521
        case LIBSSH2_HOSTKEY_TYPE_ED25519: LIBSSH2_KNOWNHOST_KEY_ED25519
        default: LIBSSH2_KNOWNHOST_KEY_UNKNOWN
        }
    }

    /// The key's type name, as its blob begins ("ssh-ed25519").
    static func typeName(_ key: [UInt8]) -> String? {
        guard key.count >= 4 else { return nil }
        let length = key[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard length > 0, length <= 64, key.count >= 4 + length else { return nil }
        let name = String(decoding: key[4..<4 + length], as: UTF8.self)
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-@.".contains($0)) } ? name : nil
    }

    /// Passes when a file holds this key for the host, or the person accepted its fingerprint
    /// (then written to the tool's own file); else throws AuthRevoked, saying what to do.
    func check(host: String, port: Int, keyType: Int32, key: [UInt8], fingerprint: String, session: OpaquePointer) throws {
        let mask = Self.mask(keyType)
        let name = Self.token(host: host, port: port)
        let files = [ownFile].compactMap { $0 } + readOnlyFiles
        let verdicts = files.map { verdict($0, session: session, host: host, port: port, mask: mask, key: key) }
        if verdicts.contains(LIBSSH2_KNOWNHOST_CHECK_MATCH) { return }
        let changed = verdicts.firstIndex(of: LIBSSH2_KNOWNHOST_CHECK_MISMATCH).map { files[$0] }
        let type = Self.typeName(key) ?? "unknown type"
        if let accepted = acceptFingerprint {
            if accepted == fingerprint {
                try remember(token: name, type: type, key: key)
                return
            }
            throw CloudError(.authRevoked, "the host key of \(name) is \(fingerprint) (\(type)), not \(accepted) as given to "
                + "--accept-host-key; nothing was sent to it")
        }
        if let changed {
            throw CloudError(.authRevoked, "WARNING: the host key of \(name) has CHANGED since it was trusted (\(changed)): "
                + "it is now \(fingerprint) (\(type)). Someone may be intercepting the connection; nothing was sent to it. "
                + "If the server's key was really replaced, check the new fingerprint on the server (ssh-keygen -lf "
                + "/etc/ssh/ssh_host_*_key.pub) and accept it with `backup probe --accept-host-key \(fingerprint)` (or on "
                + "init, or restore --remote)")
        }
        throw CloudError(.authRevoked, "the host key of \(name) is not known: \(fingerprint) (\(type)); nothing was sent to it. "
            + "Check the fingerprint on the server (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub) and accept it with "
            + "`backup init … --accept-host-key \(fingerprint)` (also on `backup restore --remote …` and `backup probe`)")
    }

    /// Writes the key to the tool's own file (0600, its folder 0700), replacing the lines it
    /// held for the host.
    private func remember(token: String, type: String, key: [UInt8]) throws {
        guard let ownFile else { return }
        let old = (try? String(contentsOfFile: ownFile, encoding: .utf8)) ?? ""
        var lines = old.split(separator: "\n").filter { line in
            !(line.split(separator: " ").first?.split(separator: ",").contains(where: { $0 == token }) ?? false)
        }.map(String.init)
        lines.append("\(token) \(type) \(Data(key).base64EncodedString())")
        let body = Data((lines.joined(separator: "\n") + "\n").utf8)
        do throws(ReplacedFile.Failure) {
            try ReplacedFile.write(body, to: ownFile, mode: 0o600, folderMode: 0o700)
        } catch {
            throw CloudError(.transport, "cannot write the accepted host key to \(ownFile): \(error.reason)")
        }
    }
}
