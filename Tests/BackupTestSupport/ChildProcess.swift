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
        /// The binary's peak resident set size, in KiB (its ru_maxrss, measured by the wrapper).
        public var maxRSSKiB: Int
        public var seconds: Double
        public var stdout: String
        public var stderr: String
    }

    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
    private let reportPath: String
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
        // Through a fresh python3 that forks the binary and reports its peak memory. Not the
        // spawned process's own ru_maxrss: posix_spawn starts the child in this process's
        // memory (CLONE_VM), and exec keeps the larger of the two peaks, so a test process
        // that has grown to 300 MiB would show 300 MiB for every child. The wrapper forks
        // from its own few MiB, and reports RUSAGE_CHILDREN: the binary's peak alone. It
        // leads its own process group, so a timeout kills both; it passes the exit status on
        // (128 + the signal when one ended the binary, reported as that signal).
        reportPath = outputFolder + "/maxrss-\(token)"
        let script = """
            import os, resource, subprocess, sys
            os.setpgrp()
            report, folder = sys.argv[1], sys.argv[2]
            os.chdir(folder)
            code = subprocess.run(sys.argv[3:]).returncode
            open(report, "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
            sys.exit(code if code >= 0 else 128 - code)
            """
        let command = ["/usr/bin/env", "python3", "-c", script, reportPath, directory, executable] + arguments
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
                return posix_spawn(&pid, "/usr/bin/env", &actions, nil, args, env)
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
                kill(-pid, SIGKILL)  // the wrapper's group: the binary too
                kill(pid, SIGKILL)
            }
            usleep(5_000)
        }
        var signal = status & 0x7f
        var code = signal == 0 ? (status >> 8) & 0xff : Int32(0)
        if signal == 0 && code > 128 { (signal, code) = (code - 128, 0) }  // the binary's own signal
        let peak = Self.read(reportPath).trimmingCharacters(in: .whitespacesAndNewlines)
        let ending = Ending(
            status: signal == 0 ? code : nil, signal: signal == 0 ? nil : signal, timedOut: timedOut,
            maxRSSKiB: Int(peak) ?? Int(usage.ru_maxrss), seconds: Date().timeIntervalSince(started),
            stdout: Self.read(stdoutPath), stderr: Self.read(stderrPath))
        reaped = ending
        return ending
    }

    /// Whether the child is still running (not yet reaped by `wait`).
    public var isRunning: Bool { reaped == nil && kill(pid, 0) == 0 }

    deinit {
        if reaped == nil {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            _ = wait(timeout: 0)
        }
    }

    private static func read(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }
}
