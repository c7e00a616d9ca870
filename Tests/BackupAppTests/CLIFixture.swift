// Runs the built `backup` binary in a temporary home: its own XDG config and state folders,
// a source tree and a folder remote, so every end-to-end test is isolated.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

/// What one run of the binary printed and returned.
struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String

    /// The JSON objects printed one per line on stdout.
    var jsonLines: [[String: Any]] {
        stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    var result: [String: Any]? { jsonLines.last { $0["event"] as? String == "result" } }
}

final class CLIFixture {
    let dir: TempDir
    var source: String { dir.path("source") }
    var remote: String { dir.path("remote") }

    init() throws {
        dir = try TempDir("backup-e2e")
        try dir.makeFolder("source")
        try dir.makeFolder("remote")
        try dir.makeFolder("home")
    }

    static var binary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("backup").path
    }

    /// More environment for every run (credentials for a server under test).
    var extraEnvironment: [String: String] = [:]

    /// Run the binary as the unprivileged user `nobody` (via setpriv when the tests run as
    /// root): root reads any file, so only an ordinary user meets a permission problem.
    var asNobody = false

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(extraEnvironment) { _, new in new }
        environment["HOME"] = dir.path("home")
        environment["XDG_CONFIG_HOME"] = dir.path("config")
        environment["XDG_STATE_HOME"] = dir.path("state")
        return environment
    }

    /// A process for `arguments`, not yet started; stdout to a pipe, stderr to a file.
    func process(_ arguments: [String]) throws -> (Process, Pipe, String) {
        let process = Process()
        if asNobody && geteuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", Self.binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Self.binary)
            process.arguments = arguments
        }
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: dir.path)
        let out = Pipe()
        let errPath = dir.path("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardInput = FileHandle.nullDevice
        return (process, out, errPath)
    }

    /// Runs `backup arguments…` to the end.
    @discardableResult
    func run(_ arguments: String...) throws -> CLIResult {
        try run(arguments)
    }

    func run(_ arguments: [String]) throws -> CLIResult {
        let (process, out, errPath) = try process(arguments)
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let errData = FileManager.default.contents(atPath: errPath) ?? Data()
        return CLIResult(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }

    /// Runs `backup arguments…` under a fresh python3 whose only child it is, and returns
    /// with the result the child's peak resident memory in KiB (its ru_maxrss).
    func runMeasuringPeakMemory(_ arguments: [String]) throws -> (CLIResult, peakKiB: Int) {
        let report = dir.path("maxrss-\(UUID().uuidString)")
        let script = "import resource,subprocess,sys; r=subprocess.run(sys.argv[2:]).returncode; "
            + "open(sys.argv[1],'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(r)"
        let (process, out, errPath) = try self.process([])
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, report, Self.binary] + arguments
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let errData = FileManager.default.contents(atPath: errPath) ?? Data()
        let peak = (try? String(contentsOfFile: report, encoding: .utf8)).flatMap { Int($0) } ?? -1
        return (CLIResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                          stderr: String(decoding: errData, as: UTF8.self)), peak)
    }

    /// Writes a file into the source tree.
    @discardableResult
    func write(_ relative: String, _ text: String) throws -> String {
        try dir.write("source/" + relative, Data(text.utf8))
    }

    /// Every regular file under `folder`: relative path (FileName-escaped, so names that are
    /// not UTF-8 compare byte-exactly) → contents. Links are not followed.
    func tree(_ folder: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        func walk(_ path: String, _ relative: String) {
            guard let handle = FileName.withCString(path, { opendir($0) }) else { return }
            defer { closedir(handle) }
            while let entry = readdir(handle) {
                let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                    tuple.withMemoryRebound(to: UInt8.self, capacity: 256) { pointer in
                        FileName.string(fromBytes: UnsafeBufferPointer(start: pointer, count: strlen(UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))))
                    }
                }
                if name == "." || name == ".." { continue }
                let full = path + "/" + name
                let rel = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard FileName.withCString(full, { lstat($0, &info) }) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFDIR {
                    walk(full, rel)
                } else if info.st_mode & S_IFMT == S_IFREG {
                    let fd = FileName.withCString(full) { open($0, O_RDONLY) }
                    var data = Data()
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    while fd >= 0 {
                        let count = read(fd, &buffer, buffer.count)
                        if count <= 0 { break }
                        data.append(contentsOf: buffer[0..<count])
                    }
                    close(fd)
                    result[rel] = data
                }
            }
        }
        walk(folder, "")
        return result
    }

    /// A file as a tree holds it: its bytes, permission bits and modification time.
    struct Kept: Equatable, CustomStringConvertible {
        var data: Data
        var mode: mode_t
        var mtime: Int64
        var description: String { "\(data.count) B, mode \(String(mode, radix: 8)), mtime \(mtime)" }
    }

    /// Every regular file under `root` but the tool's own `.backup*` entries, with its mode and
    /// time (whole seconds): what a restore must give back.
    func snapshot(_ root: String) throws -> [String: Kept] {
        var result: [String: Kept] = [:]
        for (path, data) in try tree(root) where !path.hasPrefix(".backup") {
            var info = stat()
            XCTAssertEqual(lstat(root + "/" + path, &info), 0, path)
            result[path] = Kept(data: data, mode: info.st_mode & 0o7777, mtime: Int64(info.st_mtim.tv_sec))
        }
        return result
    }
}
