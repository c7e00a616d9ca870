// A real OpenSSH server for the SFTP tests: Debian's /usr/sbin/sshd (openssh-server, installed
// by .ci/run) on 127.0.0.1 and a free port, with its own host key, its own authorized_keys and
// config in a fresh folder; never the machine's sshd or its keys. It serves SFTP with OpenSSH's
// internal-sftp. Running it needs root (CI runs as root); a missing sshd fails the test.

import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// A running sshd, stopped by `stop()` (or on deinit).
public final class SSHServer: @unchecked Sendable {
    // @unchecked: every stored property is immutable after init except the Process, whose
    // terminate/wait are safe from any thread; stop() is idempotent.

    public let port: Int
    /// The folder holding the server's keys and config, and the client's key pair.
    public let folder: String
    /// The client's private key (no passphrase), authorized for every user.
    public let clientKey: String
    /// The same key with the passphrase `keyPassphrase`.
    public let protectedKey: String
    public let keyPassphrase = "correct horse battery"
    /// The server's host key's public half.
    public let hostKeyPublic: String
    /// The host key's fingerprint, "SHA256:…".
    public let fingerprint: String
    private let process: Process
    private let lifeline: FileHandle

    /// Starts sshd; `passwords` allows password authentication (for a throwaway user).
    /// `subsystem`: the SFTP server sshd runs (a hostile one in the tests that need it).
    public init(folder: String, passwords: Bool = true, subsystem: String = "internal-sftp", file: StaticString = #filePath, line: UInt = #line) throws {
        self.folder = folder
        guard access("/usr/sbin/sshd", X_OK) == 0 else {
            XCTFail("/usr/sbin/sshd was not found; run .ci/run (it installs openssh-server)", file: file, line: line)
            throw RcloneServer.ServerError(message: "sshd not found")
        }
        guard geteuid() == 0 else {
            XCTFail("the SFTP tests start sshd, which needs root (CI runs as root)", file: file, line: line)
            throw RcloneServer.ServerError(message: "not root")
        }
        mkdir("/run/sshd", 0o755)  // sshd's privilege-separation folder
        let hostKey = folder + "/host_ed25519"
        clientKey = folder + "/client_ed25519"
        protectedKey = folder + "/client_protected"
        hostKeyPublic = hostKey + ".pub"
        try Self.shell(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey])
        try Self.shell(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", clientKey])
        try Self.shell(["ssh-keygen", "-q", "-t", "ed25519", "-N", keyPassphrase, "-f", protectedKey])
        let authorized = try String(contentsOfFile: clientKey + ".pub", encoding: .utf8)
            + String(contentsOfFile: protectedKey + ".pub", encoding: .utf8)
        try authorized.write(toFile: folder + "/authorized_keys", atomically: true, encoding: .utf8)
        fingerprint = try Self.shell(["ssh-keygen", "-l", "-E", "sha256", "-f", hostKeyPublic])
            .split(separator: " ").dropFirst().first.map(String.init) ?? ""

        var lastError = "no attempt made"
        for _ in 0..<3 {
            let port = try RcloneServer.freePort()
            let config = """
                Port \(port)
                ListenAddress 127.0.0.1
                HostKey \(hostKey)
                PidFile none
                AuthorizedKeysFile \(folder)/authorized_keys
                StrictModes no
                PermitRootLogin yes
                PasswordAuthentication \(passwords ? "yes" : "no")
                KbdInteractiveAuthentication no
                UsePAM no
                MaxStartups 100:30:200
                MaxSessions 100
                LogLevel ERROR
                Subsystem sftp \(subsystem)

                """
            try config.write(toFile: folder + "/sshd_config", atomically: true, encoding: .utf8)
            let process = Process()
            // Through sh, which stops sshd when its stdin (a pipe from this process) closes.
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "\"$0\" \"$@\" <&- & child=$!; cat >/dev/null; kill $child 2>/dev/null; wait $child",
                                 "/usr/sbin/sshd", "-D", "-e", "-f", folder + "/sshd_config"]
            let logPath = folder + "/sshd.log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = FileHandle(forWritingAtPath: logPath)
            process.standardOutput = log
            process.standardError = log
            let lifeline = Pipe()
            process.standardInput = lifeline
            try process.run()
            if RcloneServer.waitUntilListening(port: port, process: process, seconds: 10) {
                self.port = port
                self.process = process
                self.lifeline = lifeline.fileHandleForWriting
                return
            }
            try? lifeline.fileHandleForWriting.close()
            process.waitUntilExit()
            lastError = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log)"
        }
        XCTFail("sshd did not start on 127.0.0.1: \(lastError)", file: file, line: line)
        throw RcloneServer.ServerError(message: "sshd did not start")
    }

    deinit { stop() }

    public func stop() {
        try? lifeline.close()
        process.waitUntilExit()
    }

    /// The known_hosts line that trusts this server's key.
    public var knownHostsLine: String {
        let parts = ((try? String(contentsOfFile: hostKeyPublic, encoding: .utf8)) ?? "").split(separator: " ")
        return "[127.0.0.1]:\(port) \(parts.first ?? "") \(parts.dropFirst().first ?? "")\n"
    }

    /// Ends every SSH connection the server holds (its session processes), as a dropped
    /// network would: the master keeps listening.
    public func dropConnections() {
        _ = try? Self.shell(["pkill", "-KILL", "-P", String(sshdPID)], allowFailure: true)
    }

    /// The sshd master's pid (the child of the `sh` lifeline).
    private var sshdPID: Int32 {
        let children = (try? Self.shell(["pgrep", "-P", String(process.processIdentifier)], allowFailure: true)) ?? ""
        return Int32(children.split(separator: "\n").first.map(String.init) ?? "") ?? -1
    }

    /// Runs a command, returning its standard output; throws when it exits non-zero.
    @discardableResult
    public static func shell(_ arguments: [String], input: String? = nil, allowFailure: Bool = false) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try? stdin.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard allowFailure || process.terminationStatus == 0 else {
            throw RcloneServer.ServerError(message: "\(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A system user made for one test and removed after it (password authentication needs a
/// real account; CI runs as root, so the test can make one).
public final class ThrowawayUser: Sendable {
    public let name: String
    public let password: String
    public let home: String

    public init(home: String) throws {
        name = "bkp" + RcloneServer.randomToken(8)
        password = "pw-" + RcloneServer.randomToken(16)
        self.home = home
        try SSHServer.shell(["useradd", "-M", "-d", home, "-s", "/bin/sh", name])
        try SSHServer.shell(["chpasswd"], input: "\(name):\(password)\n")
        try SSHServer.shell(["chown", "\(name):", home])
    }

    public func remove() {
        _ = try? SSHServer.shell(["userdel", name], allowFailure: true)
    }
}

/// An ssh-agent holding one key, stopped by `stop()`.
public final class SSHAgent: @unchecked Sendable {
    // @unchecked: immutable after init but for the Process, whose terminate/wait are thread-safe.
    public let socket: String
    private let process: Process

    public init(folder: String, key: String) throws {
        socket = folder + "/agent.sock"
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        process.arguments = ["-D", "-a", socket]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(5)
        while access(socket, F_OK) != 0 && Date() < deadline { usleep(20_000) }
        let add = Process()
        add.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-add")
        add.arguments = ["-q", key]
        add.environment = ["SSH_AUTH_SOCK": socket, "PATH": "/usr/bin:/bin"]
        add.standardOutput = FileHandle.nullDevice
        add.standardError = FileHandle.nullDevice
        try add.run()
        add.waitUntilExit()
        guard add.terminationStatus == 0 else { throw RcloneServer.ServerError(message: "ssh-add failed") }
    }

    deinit { stop() }

    public func stop() {
        // ssh-agent -D was seen to outlive SIGTERM here; it is killed.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
