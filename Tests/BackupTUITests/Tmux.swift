// The real binary in a real terminal: tmux, each session on its own server (-L), started at
// a fixed size with an isolated HOME/XDG environment, typed into with send-keys and read
// with capture-pane, polled up to a deadline (never a fixed sleep). The pane runs a small
// shell that prints the binary's exit status and stays, so a test can read what the
// terminal looks like after the TUI has gone.

import Foundation
import XCTest

final class Tmux {
    let socket = "backup-tui-test-\(getpid())-\(UUID().uuidString.prefix(8))"
    private let session = "backup"
    private(set) var killed = false
    /// The server's socket file, removed with the server.
    private var socketPath: String?

    /// The `backup` binary SwiftPM built next to the test bundle.
    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("backup").path
    }

    static var tmuxPath: String? {
        ["/usr/bin/tmux", "/usr/local/bin/tmux", "/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts `backup arguments…` at `width`x`height` with `environment` (added to a clean one).
    init(width: Int, height: Int, arguments: [String], environment: [String: String], directory: String) throws {
        guard Self.tmuxPath != nil else {
            // A failure, not a skip: CI installs tmux (.ci/run), and these tests are the TUI's proof.
            throw NSError(domain: "tmux", code: 1, userInfo: [NSLocalizedDescriptionKey: "tmux is not installed: apt-get install tmux"])
        }
        var env = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "screen"]
        env.merge(environment) { _, new in new }
        // `trap : INT` keeps the shell alive through Ctrl-C (its children still get the
        // default action); "$@" runs the binary with the test's arguments untouched.
        let script = "trap : INT; cd \"$1\"; shift; \"$@\"; echo \"[backup exited $?]\"; exec sleep 3600"
        let command = ["/usr/bin/env", "-i"] + env.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            + ["/bin/sh", "-c", script, "sh", directory, Self.binary] + arguments
        try run(["new-session", "-d", "-s", session, "-x", "\(width)", "-y", "\(height)", "--"] + command)
        socketPath = try? format("#{socket_path}")
    }

    deinit { kill() }

    /// Stops the session's server (idempotent).
    func kill() {
        guard !killed else { return }
        killed = true
        _ = try? run(["kill-server"])
        // tmux leaves the socket file behind; without this, every run would add one.
        if let socketPath { unlink(socketPath) }
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let outPath = NSTemporaryDirectory() + "/\(socket)-\(UUID().uuidString).out"
        defer { try? FileManager.default.removeItem(atPath: outPath) }
        let status = try Self.spawn(Self.tmuxPath ?? "/usr/bin/tmux", ["-u", "-L", socket, "-f", "/dev/null"] + arguments, output: outPath)
        let text = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
        guard status == 0 else {
            throw NSError(domain: "tmux", code: Int(status), userInfo: [NSLocalizedDescriptionKey: "tmux \(arguments.joined(separator: " ")): \(text)"])
        }
        return text
    }

    /// Runs a program to its end with its output in a file, and no other descriptor of this
    /// process open in it. Not Foundation's Process: it watches for a child's end through a
    /// descriptor the child inherits, and the server new-session forks keeps every
    /// inherited descriptor, so Process would wait for the server, not the client.
    static func spawn(_ path: String, _ arguments: [String], output: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS by hand: the macros are not imported.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    /// What the pane shows now.
    func screen() throws -> String {
        try run(["capture-pane", "-p", "-t", session])
    }

    /// The pane's lines now.
    func lines() throws -> [String] {
        try screen().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A tmux format value of the pane, e.g. `#{alternate_on}`.
    func format(_ format: String) throws -> String {
        try run(["display-message", "-p", "-t", session, format]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Presses keys by their tmux names ("Enter", "Tab", "C-c", "q").
    func press(_ keys: String...) throws {
        try run(["send-keys", "-t", session] + keys)
    }

    /// Types `text` literally.
    func type(_ text: String) throws {
        try run(["send-keys", "-t", session, "-l", text])
    }

    func resize(width: Int, height: Int) throws {
        try run(["resize-window", "-t", session, "-x", "\(width)", "-y", "\(height)"])
    }

    /// The pid of the process running in the pane's shell (the binary).
    func binaryPid() throws -> Int32? {
        let shell = try format("#{pane_pid}")
        let outPath = NSTemporaryDirectory() + "/\(socket)-ps.out"
        defer { try? FileManager.default.removeItem(atPath: outPath) }
        _ = try Self.spawn("/bin/ps", ["-o", "pid=", "--ppid", shell], output: outPath)
        let text = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }.first
    }

    /// `stty -a` of the pane's terminal: the modes the binary left behind.
    func terminalModes() throws -> String {
        let tty = try format("#{pane_tty}")
        let outPath = NSTemporaryDirectory() + "/\(socket)-stty.out"
        defer { try? FileManager.default.removeItem(atPath: outPath) }
        _ = try Self.spawn("/bin/sh", ["-c", "stty -a < \"$0\"", tty], output: outPath)
        return String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
    }

    /// Polls the pane until `condition` holds on its text, up to `timeout` seconds; fails the
    /// test with the last screen otherwise. A capture can come while curses is still writing a
    /// frame's rows, so once the condition holds the screen is captured again until two captures
    /// in a row agree (a frame written in full), for at most half a second: a screen that keeps
    /// changing (a progress bar) is returned as last seen, the condition still holding.
    @discardableResult
    func wait(for what: String, timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line,
              _ condition: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            last = try screen()
            if condition(last) { return try settled(last, condition) }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(what); the screen was:\n\(last)", file: file, line: line)
        throw NSError(domain: "tmux", code: 2, userInfo: [NSLocalizedDescriptionKey: "timed out waiting for \(what)"])
    }

    /// `matched` once a capture after it is the same screen, or the last capture that still
    /// meets `condition` after half a second of change.
    private func settled(_ matched: String, _ condition: (String) -> Bool) throws -> String {
        var previous = matched
        let until = Date().addingTimeInterval(0.5)
        while Date() < until {
            usleep(15_000)
            let next = try screen()
            if next == previous { return next }
            guard condition(next) else { return previous }
            previous = next
        }
        return previous
    }

    /// The screen once it shows every one of `texts` (a capture can come while curses is still
    /// writing a frame's rows, so a test waits for the last row it reads, not the first).
    @discardableResult
    func waitAll(_ texts: [String], timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        try wait(for: texts.joined(separator: " and "), timeout: timeout, file: file, line: line) { screen in
            texts.allSatisfy(screen.contains)
        }
    }

    /// Waits until the pane shows `text`.
    @discardableResult
    func wait(for text: String, timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        try wait(for: "\"\(text)\"", timeout: timeout, file: file, line: line) { $0.contains(text) }
    }

    /// Waits for the binary to exit and returns its exit status.
    func exitStatus(timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line) throws -> Int? {
        let text = try wait(for: "the binary to exit", timeout: timeout, file: file, line: line) { $0.contains("[backup exited ") }
        guard let range = text.range(of: "[backup exited ") else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }
}
