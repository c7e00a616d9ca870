// A child process started with posix_spawn and reaped with wait4, so a test gets what
// Foundation's Process does not give: the child's peak resident memory (ru_maxrss), and a
// hard timeout after which the child is killed rather than hanging the test. Standard
// output and error go to files; standard input is /dev/null.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A spawned child; `wait(timeout:)` reaps it once.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: used by one test thread; `pid` is immutable and `reaped` is set once by wait.

    /// How a child ended.
    public struct Ending: Sendable {
        /// The exit status, or nil when a signal ended it.
        public var status: Int32?
        public var signal: Int32?
        /// Killed by `wait(timeout:)` after the timeout.
        public var timedOut: Bool
        /// Peak resident set size, in KiB (ru_maxrss).
        public var maxRSSKiB: Int
        public var seconds: Double
        public var stdout: String
        public var stderr: String
    }

    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
    private let started = Date()
    private var reaped: Ending?

    /// Starts `executable` with exactly `arguments` and `environment` in `directory`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String], directory: String,
                outputFolder: String) throws {
        let token = UUID().uuidString
        stdoutPath = outputFolder + "/stdout-\(token)"
        stderrPath = outputFolder + "/stderr-\(token)"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Through sh for the working folder (glibc's addchdir_np is not imported); exec keeps
        // the pid, so wait4's usage is the binary's own.
        let command = ["/bin/sh", "-c", "cd \"$0\" || exit 127; exec \"$@\"", directory, executable] + arguments
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { args in
            envp.withUnsafeBufferPointer { env -> Int32 in
                guard let args = args.baseAddress, let env = env.baseAddress else { return EINVAL }
                return posix_spawn(&pid, "/bin/sh", &actions, nil, args, env)
            }
        }
        guard result == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO)
        }
        self.pid = pid
    }

    /// Waits for the child, killing it (SIGKILL) after `timeout` seconds; reaps it once.
    public func wait(timeout: Double) -> Ending {
        if let reaped { return reaped }
        let deadline = started.addingTimeInterval(timeout)
        var status: Int32 = 0
        var usage = rusage()
        var timedOut = false
        while true {
            let done = wait4(pid, &status, WNOHANG, &usage)
            if done == pid { break }
            if done < 0 && errno != EINTR { break }
            if !timedOut && Date() >= deadline {
                timedOut = true
                kill(pid, SIGKILL)
            }
            usleep(5_000)
        }
        let signal = status & 0x7f
        let ending = Ending(
            status: signal == 0 ? (status >> 8) & 0xff : nil, signal: signal == 0 ? nil : signal, timedOut: timedOut,
            maxRSSKiB: Int(usage.ru_maxrss), seconds: Date().timeIntervalSince(started),
            stdout: Self.read(stdoutPath), stderr: Self.read(stderrPath))
        reaped = ending
        return ending
    }

    /// Whether the child is still running (not yet reaped by `wait`).
    public var isRunning: Bool { reaped == nil && kill(pid, 0) == 0 }

    deinit {
        if reaped == nil {
            kill(pid, SIGKILL)
            _ = wait(timeout: 0)
        }
    }

    private static func read(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }
}
