// `backup restore` end to end against a hostile remote: a fake WebDAV server
// (Tests/Fixtures/hostile_webdav.py) whose listings, sizes, bodies, redirects and XML lie, and
// hand-made folder remotes with names, FIFOs and links that try to lead out of the target.
// Every test runs the real binary in a sandbox (a fake HOME with .ssh/authorized_keys and a
// .bashrc, a victim file beside the target) and checks the stated outcome AND that nothing in
// the sandbox changed outside the target and the tool's own state and config folders.
//
// The outcomes are those of the restore-hardening issue: exit 5 when the remote's data fails
// a check (a hash or size mismatch, a refused name); refused names named in a note on stderr
// (a "note" line in --json); nothing written outside the target, ever; a completed restore
// leaves no .backup-staging and no .backup-tmp.* behind.

import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class HostileRemoteTests: XCTestCase {
    // MARK: Harness

    /// One run of the binary.
    struct Run {
        var ending: ChildProcess.Ending
        var status: Int32? { ending.status }
        var stdout: String { ending.stdout }
        var stderr: String { ending.stderr }
        var all: String { ending.stdout + ending.stderr }

        var jsonLines: [[String: Any]] {
            ending.stdout.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }
        }

        var result: [String: Any]? { jsonLines.last { $0["event"] as? String == "result" } }

        /// The text-mode notes: stderr lines starting "note:".
        var noteLines: [String] { ending.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("note:") } }

        /// The --json notes' paths and messages.
        var jsonNotes: [(path: String, message: String)] {
            jsonLines.filter { $0["event"] as? String == "note" }.map { ($0["path"] as? String ?? "", $0["message"] as? String ?? "") }
        }

        var summary: String {
            "exit \(ending.status.map(String.init) ?? "signal \(ending.signal ?? 0)")\(ending.timedOut ? " (killed after the timeout)" : ""), "
                + "\(String(format: "%.1f", ending.seconds)) s, peak RSS \(ending.maxRSSKiB / 1024) MiB\n"
                + "stdout:\n\(ending.stdout.prefix(4000))\nstderr:\n\(ending.stderr.prefix(4000))"
        }
    }

    private func makeSandbox() throws -> Sandbox {
        let sandbox = try Sandbox()
        addTeardownBlock { sandbox.cleanup() }
        return sandbox
    }

    private func makeServer(_ scenario: HostileScenario) throws -> HostileWebDAV {
        let server = try HostileWebDAV(scenario)
        addTeardownBlock { server.stop() }
        return server
    }

    /// Where the runs' stdout and stderr files go: outside the sandbox, so they are no change in it.
    private lazy var logs: TempDir = {
        // A TempDir that cannot be made means /tmp is unusable: nothing below could run either.
        let made = (try? TempDir("backup-hostile-logs")) ?? (try? TempDir("backup-hostile-logs-again"))
        guard let made else { fatalError("cannot make a temporary folder for the runs' output") }
        addTeardownBlock { made.cleanup() }
        return made
    }()

    /// Starts `backup arguments…` in the sandbox's HOME; `password` goes in BACKUP_PASSWORD
    /// (never argv), `extra` adds more (the S3 credentials).
    private func start(_ sandbox: Sandbox, _ arguments: [String], password: String?, extra: [String: String] = [:]) throws
        -> ChildProcess
    {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("BACKUP_") && !$0.key.hasPrefix("AWS_") }
        environment.merge(sandbox.environment) { _, new in new }
        environment.merge(extra) { _, new in new }
        if let password { environment["BACKUP_PASSWORD"] = password }
        return try ChildProcess(CLIFixture.binary, arguments, environment: environment, directory: logs.path,
                                outputFolder: logs.path)
    }

    /// `backup restore --remote REMOTE --to <target> --place all EXTRA…`, killed after `timeout`.
    private func restore(
        _ sandbox: Sandbox, remote: String, password: String?, _ extra: [String] = [], environment: [String: String] = [:],
        timeout: Double = 30
    ) throws -> Run {
        let child = try start(sandbox, ["restore", "--remote", remote, "--to", sandbox.target, "--place", "all"] + extra,
                              password: password, extra: environment)
        return Run(ending: child.wait(timeout: timeout))
    }

    /// The same from `server`: its WebDAV folder and password, or with `s3`, that bucket through
    /// the S3 mode's URL and credentials.
    private func restore(
        _ sandbox: Sandbox, _ server: HostileWebDAV, _ extra: [String] = [], s3 bucket: HostileScenario.S3Bucket? = nil,
        timeout: Double = 30
    ) throws -> Run {
        guard let bucket else { return try restore(sandbox, remote: server.remoteURL(), password: server.password, extra, timeout: timeout) }
        return try restore(sandbox, remote: server.s3RemoteURL(bucket), password: nil, extra, environment: server.s3Environment,
                           timeout: timeout)
    }

    /// Asserts the run ended by itself (not killed by the timeout nor a signal).
    private func assertFinished(_ run: Run, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(run.ending.timedOut, "the restore hung and was killed: \(run.summary)", file: file, line: line)
        XCTAssertNil(run.ending.signal, "a signal ended the restore: \(run.summary)", file: file, line: line)
    }

    /// Asserts a text-mode note names `path`.
    private func assertNoted(_ run: Run, _ path: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(run.noteLines.contains { $0.contains(path) }, "no note names \(path): \(run.summary)", file: file, line: line)
    }

    /// Asserts the run ended by itself with exit 0, the target holding exactly `files` (path →
    /// SHA-256) and no staging or temporary file.
    private func assertCompleted(
        _ run: Run, _ sandbox: Sandbox, files: [String: String], file: StaticString = #filePath, line: UInt = #line
    ) {
        assertFinished(run, file: file, line: line)
        XCTAssertEqual(run.status, 0, run.summary, file: file, line: line)
        XCTAssertEqual(sandbox.targetFiles(), files, run.summary, file: file, line: line)
        XCTAssertEqual(sandbox.leftoversInTarget(), [], run.summary, file: file, line: line)
    }

    /// Asserts the run ended by itself with exit 5 and a text-mode note naming each of `paths`.
    private func assertRefused(_ run: Run, noting paths: [String], file: StaticString = #filePath, line: UInt = #line) {
        assertFinished(run, file: file, line: line)
        XCTAssertEqual(run.status, 5, run.summary, file: file, line: line)
        for path in paths { assertNoted(run, path, file: file, line: line) }
    }

    private static let evil = "ssh-ed25519 AAAAATTACKER attacker@evil\n"
    private static func sha(_ text: String) -> String { HostileWebDAV.sha256(Data(text.utf8)) }

    /// The escape character's percent-encoding: U+201B, the name codec's escape (see FileName).
    private static let e = "%E2%80%9B"

    // MARK: The harness itself

    /// A benign remote: the restore completes, exit 0, the files are byte-identical, no
    /// staging or temporary file is left, nothing outside the target changes, and the client
    /// spoke only to this server. This must pass whenever restore works at all.
    func testBenignWebDAVRestoreCompletesWithExit0AndNothingOutsideChanges() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.groups = [.init("docs", order: 0, required: true, patterns: ["docs/"])]
        scenario.file("x.txt", "hello")
        scenario.file("docs/report.txt", "quarterly")
        scenario.file("photos/日本 beach.jpg", String(repeating: "jpeg", count: 5000))
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, ["--json"])
        assertCompleted(run, sandbox, files: [
            "x.txt": Self.sha("hello"), "docs/report.txt": Self.sha("quarterly"),
            "photos/日本 beach.jpg": Self.sha(String(repeating: "jpeg", count: 5000)),
        ])
        XCTAssertEqual(run.result?["placed"] as? Int, 3, run.summary)
        sandbox.assertNothingChangedOutsideTarget(since: before)
        let log = server.log()
        XCTAssertTrue(log.allSatisfy { $0.host == "127.0.0.1:\(server.port)" }, "\(log)")
        XCTAssertTrue(log.contains { $0.method == "PROPFIND" }, "\(log)")
        // The key file is asked for first: it says whether the remote is encrypted.
        XCTAssertEqual(Set(log.filter { $0.method == "GET" }.map(\.path)), [
            "/base/.backup-encrypted", "/base/.backup-marker", "/base/x.txt", "/base/docs/report.txt", "/base/photos/%E6%97%A5%E6%9C%AC%20beach.jpg",
        ])
        XCTAssertFalse(run.all.contains(server.password), "the password was printed")
    }

    /// The sandbox comparison sees a write outside the target (it would not prove much otherwise).
    func testSandboxComparisonSeesAWriteOutsideTheTarget() throws {
        let sandbox = try makeSandbox()
        let before = sandbox.snapshot()
        try Data("changed".utf8).write(to: URL(fileURLWithPath: sandbox.victim))
        try Data("new".utf8).write(to: URL(fileURLWithPath: sandbox.target + "/inside.txt"))
        try Data("new".utf8).write(to: URL(fileURLWithPath: sandbox.stateHome + "/backup-not-ours.txt"))
        XCTAssertEqual(symlink(sandbox.outside, sandbox.home + "/link"), 0)
        XCTAssertEqual(mkfifo(sandbox.outside + "/fifo", 0o600), 0)
        let changes = sandbox.snapshot().changes(since: before, allowing: Sandbox.writable)
        XCTAssertEqual(changes.count, 4, changes.joined(separator: "\n"))
        XCTAssertTrue(changes.contains { $0.hasPrefix("changed home/restore/victim.txt") }, "\(changes)")
        XCTAssertTrue(changes.contains { $0.hasPrefix("added home/link") && $0.contains("-> \(sandbox.outside)") }, "\(changes)")
        XCTAssertTrue(changes.contains { $0.hasPrefix("added outside/fifo: fifo") }, "\(changes)")
        XCTAssertTrue(changes.contains { $0.hasPrefix("added home/.local/state/backup-not-ours.txt") }, "\(changes)")
    }

    // MARK: Traversal through names

    /// Names whose escapes (U+201B + hex, the name codec's) decode to "..", "." or "/" are
    /// refused: exit 5, each named in a note, the benign file restored, nothing outside changed.
    func testEscapeEncodedTraversalIsRefusedWithExit5AndNothingOutsideChanges() throws {
        let sandbox = try makeSandbox()
        let e = Self.e
        // href → the path the client lists it as (the marker records the attacker's hash for it).
        let hostile: [(href: String, path: String)] = [
            ("\(e)2E\(e)2E/x.txt", "‛2E‛2E/x.txt"),
            ("\(e)2E\(e)2E/victim.txt", "‛2E‛2E/victim.txt"),
            ("\(e)2E\(e)2E/\(e)2E\(e)2E/.ssh/authorized_keys", "‛2E‛2E/‛2E‛2E/.ssh/authorized_keys"),
            ("\(e)2E\(e)2E/\(e)2E\(e)2E/\(e)2E\(e)2E/.ssh/authorized_keys", "‛2E‛2E/‛2E‛2E/‛2E‛2E/.ssh/authorized_keys"),
            ("docs/\(e)2E\(e)2E/\(e)2E\(e)2E/\(e)2E\(e)2E/.bashrc", "docs/‛2E‛2E/‛2E‛2E/‛2E‛2E/.bashrc"),
            (".\(e)2E/x2.txt", ".‛2E/x2.txt"),
            ("\(e)2E/x3.txt", "‛2E/x3.txt"),
            ("\(e)2E\(e)2E\(e)2F\(e)2E\(e)2E\(e)2F.ssh\(e)2Fauthorized_keys", "‛2E‛2E‛2F‛2E‛2E‛2F.ssh‛2Fauthorized_keys"),
            ("x\(e)00y.txt", "x‛00y.txt"),
        ]
        let server = try makeServer(Self.traversalScenario(hostile))
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertRefused(run, noting: hostile.map(\.path))
        XCTAssertEqual(sandbox.targetFiles(), ["x.txt": Self.sha("hello")], run.summary)
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// The same names with --overwrite, over a target that already holds files: still refused,
    /// exit 5, a JSON note per name, the victim beside the target untouched.
    func testEscapeEncodedTraversalWithOverwriteIsStillRefusedAndTheVictimIsUntouched() throws {
        let sandbox = try makeSandbox()
        try Data("old x\n".utf8).write(to: URL(fileURLWithPath: sandbox.target + "/x.txt"))
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: sandbox.target + "/victim.txt"))
        let e = Self.e
        let hostile: [(href: String, path: String)] = [
            ("\(e)2E\(e)2E/victim.txt", "‛2E‛2E/victim.txt"),
            ("\(e)2E\(e)2E/\(e)2E\(e)2E/.ssh/authorized_keys", "‛2E‛2E/‛2E‛2E/.ssh/authorized_keys"),
            ("\(e)2E\(e)2E/\(e)2E\(e)2E/\(e)2E\(e)2E/.ssh/authorized_keys", "‛2E‛2E/‛2E‛2E/‛2E‛2E/.ssh/authorized_keys"),
        ]
        let server = try makeServer(Self.traversalScenario(hostile))
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, ["--overwrite", "--json"])
        assertFinished(run)
        XCTAssertEqual(run.status, 5, run.summary)
        for (_, path) in hostile {
            XCTAssertTrue(run.jsonNotes.contains { $0.path == path }, "no JSON note for \(path): \(run.summary)")
        }
        XCTAssertEqual(sandbox.targetFiles(), ["x.txt": Self.sha("hello"), "victim.txt": Self.sha("mine\n")], run.summary)
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// x.txt ("hello") and `hostile`'s rows: each href, under /base, serves the attacker's key,
    /// and the marker records its hash under the path the client lists it as.
    private static func traversalScenario(_ hostile: [(href: String, path: String)]) -> HostileScenario {
        var scenario = HostileScenario()
        scenario.file("x.txt", "hello")
        for (href, path) in hostile {
            scenario.raw("/base/" + href, .text(evil), markerPath: path)
        }
        return scenario
    }

    /// Percent-encoded dots and slashes: every name that decodes to a way out is refused with a
    /// note and exit 5; a doubly-encoded one ("%252E%252E") is a plain name and stays inside.
    func testPercentEncodedTraversalIsRefusedWithExit5AndNothingOutsideChanges() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("x.txt", "hello")
        let refused: [(String, String)] = [
            ("/base/%2E%2E/x.txt", "../x.txt"),
            ("/base/..%2Fvictim.txt", "../victim.txt"),
            ("/base/a/%2E%2E/%2E%2E/x", "a/../../x"),
            ("/base/%2e%2e/%2e%2e/.ssh/authorized_keys", "../../.ssh/authorized_keys"),
            ("/base/../victim.txt", "../victim.txt"),
            ("/base/sub/..%2F..%2F..%2F.bashrc", "sub/../../../.bashrc"),
        ]
        // No marker hashes for these: the marker codec itself refuses ".." paths.
        for (href, _) in refused {
            scenario.raw(href, .text(Self.evil))
        }
        scenario.raw("/base/%252E%252E/kept.txt", .text("kept"), markerPath: "%2E%2E/kept.txt")
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertRefused(run, noting: refused.map(\.1))
        let files = sandbox.targetFiles()
        XCTAssertEqual(files["x.txt"], Self.sha("hello"), run.summary)
        // The doubly-encoded name is either restored under its literal name or refused: never decoded twice.
        XCTAssertTrue(Set(files.keys).isSubset(of: ["x.txt", "%2E%2E/kept.txt"]), "\(files.keys.sorted()) \(run.summary)")
        XCTAssertFalse(files.values.contains(Self.sha(Self.evil)), run.summary)
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    // MARK: Hrefs that are not this folder's

    /// Hrefs naming other hosts, and absolute paths outside the remote folder, are ignored
    /// with a note; nothing is fetched for them; the other files restore.
    func testAbsoluteAndOtherHostHrefsAreIgnoredWithANoteAndTheOthersRestore() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("ok.txt", "fine")
        let foreign = [
            "http://other-host.invalid/base/y.txt",
            "https://127.0.0.2:1/base/z.txt",
            "//other-host.invalid/base/w.txt",
            "/elsewhere/v.txt",
        ]
        // Each is served here too, at its path, so a client that took it as its own would restore it.
        scenario.raw(foreign[0], .text("y from elsewhere"), markerPath: "y.txt")
        scenario.raw(foreign[1], .text("z from elsewhere"), markerPath: "z.txt")
        scenario.raw(foreign[2], .text("w from elsewhere")) { $0.serveAt = "/base/w.txt" }
        scenario.raw(foreign[3], .text("v from elsewhere"))
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertFinished(run)
        XCTAssertEqual(sandbox.targetFiles(), ["ok.txt": Self.sha("fine")], run.summary)
        // Ignored is not a failure of the restore's own files: 0, or 5 if the fix counts them as refused names.
        XCTAssertTrue(run.status == 0 || run.status == 5, run.summary)
        for host in ["other-host.invalid/base/y.txt", "127.0.0.2:1/base/z.txt", "other-host.invalid/base/w.txt", "/elsewhere/v.txt"] {
            assertNoted(run, host)
        }
        let log = server.log()
        XCTAssertEqual(log.filter { $0.method == "GET" && !["/base/.backup-marker", "/base/.backup-encrypted"].contains($0.path) }.map(\.path),
                       ["/base/ok.txt"], "\(log)")
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    // MARK: Redirects

    /// A 301/302 on a file's GET is not followed (the log shows no request to its target) and
    /// the file fails; the others restore.
    func testRedirectOnAFileGETIsNotFollowedAndTheFileFails() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("ok.txt", "fine")
        let x = scenario.file("x.txt", "moved x")
        let y = scenario.file("y.txt", "moved y")
        scenario.entries[x].redirect = "/base/moved/x.txt"
        scenario.entries[y].redirect = "http://localhost:\(0)/base/moved/y.txt"  // the port is set below
        scenario.entries[y].redirectStatus = 302
        scenario.raw("/base/moved/x.txt", .text("moved x")) { $0.listed = false }
        scenario.raw("/base/moved/y.txt", .text("moved y")) { $0.listed = false }
        let server = try makeServer(scenario)
        scenario.entries[y].redirect = "http://localhost:\(server.port)/base/moved/y.txt"
        server.load(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertFinished(run)
        XCTAssertNotEqual(run.status, 0, run.summary)
        XCTAssertEqual(sandbox.targetFiles()["ok.txt"], Self.sha("fine"), run.summary)
        XCTAssertNil(sandbox.targetFiles()["x.txt"], run.summary)
        XCTAssertNil(sandbox.targetFiles()["y.txt"], run.summary)
        let log = server.log()
        XCTAssertTrue(log.contains { $0.method == "GET" && $0.path == "/base/x.txt" && $0.status == 301 }, "x.txt was never asked for: \(log)")
        XCTAssertTrue(log.contains { $0.method == "GET" && $0.path == "/base/y.txt" && $0.status == 302 }, "y.txt was never asked for: \(log)")
        XCTAssertFalse(log.contains { $0.path.contains("/moved/") }, "a redirect was followed: \(log)")
        XCTAssertTrue(log.allSatisfy { $0.host == "127.0.0.1:\(server.port)" }, "\(log)")
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// A 301 on the marker's GET is not followed: no backup is found, nothing is placed.
    func testRedirectOnTheMarkerGETIsNotFollowedAndNothingIsRestored() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("x.txt", "hello")
        scenario.markerRedirect = "/base/moved/.backup-marker"
        let server = try makeServer(scenario)
        // The redirect's target holds a valid marker: following it would restore x.txt.
        scenario.entries.append(HostileScenario.Entry(href: "/base/moved/.backup-marker", body: .bytes(try markerBytes(scenario))))
        scenario.entries[scenario.entries.count - 1].listed = false
        server.load(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertFinished(run)
        XCTAssertNotEqual(run.status, 0, run.summary)
        XCTAssertEqual(sandbox.targetFiles(), [:], run.summary)
        let log = server.log()
        XCTAssertTrue(log.contains { $0.method == "GET" && $0.path == "/base/.backup-marker" && $0.status == 301 }, "\(log)")
        XCTAssertFalse(log.contains { $0.path.contains("/moved/") }, "the marker's redirect was followed: \(log)")
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// The marker the python fixture would build for `scenario`, built here with BackupTree's codec.
    private func markerBytes(_ scenario: HostileScenario) throws -> Data {
        try Marker(groups: scenario.groups.map { MarkerGroup(name: $0.name, required: $0.required, patterns: $0.patterns, order: $0.order) },
                   hashes: scenario.hashes).encoded()
    }

    // MARK: Duplicates

    /// One file listed several times (the same href, "./", "//"): restored once, exit 0, and a
    /// `--resume` afterwards finds nothing pending.
    func testDuplicateHrefsAreDeduplicatedAndTheRestoreCompletesWithExit0() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("x.txt", "hello")
        scenario.file("docs/a.txt", "alpha")
        for href in ["/base/x.txt", "/base/x.txt", "/base/./x.txt", "/base//x.txt", "/base/docs/a.txt", "/base/docs/./a.txt"] {
            scenario.raw(href, .text(href.hasSuffix("a.txt") ? "alpha" : "hello"))
        }
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, ["--json"])
        assertCompleted(run, sandbox, files: ["x.txt": Self.sha("hello"), "docs/a.txt": Self.sha("alpha")])
        XCTAssertEqual(run.result?["placed"] as? Int, 2, run.summary)
        XCTAssertEqual(run.result?["pending"] as? Int, 0, run.summary)

        let resumed = try restore(sandbox, server, ["--resume", "--json"])
        assertFinished(resumed)
        XCTAssertEqual(resumed.status, 0, resumed.summary)
        XCTAssertEqual(resumed.result?["pending"] as? Int, 0, resumed.summary)
        XCTAssertEqual(sandbox.targetFiles(), ["x.txt": Self.sha("hello"), "docs/a.txt": Self.sha("alpha")])
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    // MARK: Sizes and hashes

    /// A body far past its listed size (5 B listed, 300 MB sent): refused, exit 5, nothing of it
    /// in the target (placed or staged), and the download stopped near the limit.
    func testOversizeBodyIsRefusedWithExit5AndTheDownloadStopsAtTheListedSize() throws {
        try assertOversizeBodyRefused()
    }

    /// The oversize body of the test above, from the WebDAV server or with `s3` from that bucket.
    private func assertOversizeBodyRefused(s3 bucket: HostileScenario.S3Bucket? = nil, file: StaticString = #filePath,
                                           line: UInt = #line) throws {
        let sandbox = try makeSandbox()
        var scenario = Self.scenario(s3: bucket)
        scenario.file("ok.txt", "fine")
        scenario.raw(scenario.href("big.bin"), .repeated(byte: 0x42, count: 300_000_000), listedSize: 5)
        scenario.hashes["big.bin"] = Self.sha("BBBBB")  // the first 5 bytes: only the size can tell
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, s3: bucket, timeout: 60)
        assertFinished(run, file: file, line: line)
        XCTAssertEqual(run.status, 5, run.summary, file: file, line: line)
        XCTAssertLessThan(run.ending.seconds, 30, run.summary, file: file, line: line)
        let files = sandbox.targetFiles()
        XCTAssertEqual(files["ok.txt"], Self.sha("fine"), run.summary, file: file, line: line)
        XCTAssertFalse(files.keys.contains { $0.hasSuffix("big.bin") || $0.contains(".backup-tmp.") }, "\(files.keys.sorted())",
                       file: file, line: line)
        let path = bucket.map { "/\($0.bucket)/\($0.prefix)/big.bin" } ?? "/base/big.bin"
        let gets = server.log().filter { $0.method == "GET" && $0.path == path }
        XCTAssertFalse(gets.isEmpty, "big.bin was never asked for: \(server.log())", file: file, line: line)
        for get in gets {
            XCTAssertFalse(get.complete, "the whole 300 MB was read", file: file, line: line)
            XCTAssertLessThan(get.sent, 64 << 20, "the download did not stop at the listed size", file: file, line: line)
        }
        sandbox.assertNothingChangedOutsideTarget(since: before, file: file, line: line)
    }

    /// A body shorter than its listed size (300 B listed, 5 sent): refused, exit 5, nothing of it left.
    func testUndersizeBodyIsRefusedWithExit5AndNothingIsPlacedForIt() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("ok.txt", "fine")
        scenario.raw("/base/small.bin", .text("short"), listedSize: 300, markerPath: "small.bin")
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server)
        assertFinished(run)
        XCTAssertEqual(run.status, 5, run.summary)
        let files = sandbox.targetFiles()
        XCTAssertEqual(files["ok.txt"], Self.sha("fine"), run.summary)
        XCTAssertFalse(files.keys.contains { $0.hasSuffix("small.bin") || $0.contains(".backup-tmp.") }, "\(files.keys.sorted())")
        XCTAssertTrue(server.log().contains { $0.method == "GET" && $0.path == "/base/small.bin" }, "small.bin was never asked for")
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// A body of the listed size whose SHA-256 is not the marker's: exit 5; the text names the
    /// path and says "hash mismatch"; --json has a line with "error":"hashMismatch" and the path.
    func testWrongBodyIsAHashMismatchWithExit5NamingThePathInTextAndJSON() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("ok.txt", "fine")
        scenario.raw("/base/x.txt", .text("hellO"))
        scenario.hashes["x.txt"] = Self.sha("hello")
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let text = try restore(sandbox, server)
        assertFinished(text)
        XCTAssertEqual(text.status, 5, text.summary)
        XCTAssertTrue(text.stderr.lowercased().contains("hash mismatch"), text.summary)
        XCTAssertTrue(text.stderr.split(separator: "\n").contains { $0.contains("x.txt") && $0.lowercased().contains("hash mismatch") },
                      text.summary)
        XCTAssertNil(sandbox.targetFiles()["x.txt"], text.summary)

        let json = try restore(sandbox, server, ["--json"])
        assertFinished(json)
        XCTAssertEqual(json.status, 5, json.summary)
        XCTAssertTrue(json.jsonLines.contains { $0["error"] as? String == "hashMismatch" && $0["path"] as? String == "x.txt" },
                      json.summary)
        XCTAssertNil(sandbox.targetFiles()["x.txt"], json.summary)
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    // MARK: Hostile XML

    /// The peak memory a hostile listing may cost the restore.
    private static let rssCapKiB = 200 * 1024

    /// A 300 MB multistatus (one href of 300 MB of text): refused with an error about the
    /// listing, nothing restored, peak RSS under 200 MB.
    func testHugeMultistatusIsRefusedWithAClearErrorAndBoundedMemory() throws {
        try assertListingRefused(.hugeText(bytes: 300_000_000))
    }

    /// A "billion laughs" multistatus: refused with an error about the listing, peak RSS under 200 MB.
    func testBillionLaughsMultistatusIsRefusedWithBoundedMemory() throws {
        try assertListingRefused(.billionLaughs)
    }

    /// A DOCTYPE with an external entity (file:///etc/passwd): refused, and nothing of the
    /// entity's file shows anywhere.
    func testDoctypeWithAnExternalEntityIsRefusedAndNothingIsRead() throws {
        let run = try assertListingRefused(.externalEntity)
        XCTAssertFalse(run.all.contains("root:"), run.summary)
    }

    @discardableResult
    private func assertListingRefused(_ body: HostileScenario.PropfindBody, file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("ok.txt", "fine")
        scenario.propfindBody = body
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, timeout: 60)
        assertFinished(run, file: file, line: line)
        XCTAssertTrue(run.status == 1 || run.status == 5, "a hostile listing must fail the restore: \(run.summary)", file: file, line: line)
        XCTAssertTrue(run.all.lowercased().contains("listing"), "the error does not say the listing is at fault: \(run.summary)",
                      file: file, line: line)
        XCTAssertLessThan(run.ending.maxRSSKiB, Self.rssCapKiB, "peak RSS \(run.ending.maxRSSKiB / 1024) MiB: \(run.summary)",
                          file: file, line: line)
        XCTAssertEqual(sandbox.targetFiles(), [:], run.summary, file: file, line: line)
        sandbox.assertNothingChangedOutsideTarget(since: before, file: file, line: line)
        return run
    }

    // MARK: The target changed under a running restore

    /// While the restore waits on one download, FIFOs and links are planted in its staging
    /// area and target (a FIFO at the staging path of a file not yet fetched, the staging
    /// folder of another turned into a link to a folder outside, a final folder turned into
    /// such a link). The restore does not hang and writes nothing outside the target.
    func testFIFOsAndLinksPlantedInTheTargetMidRestoreNeitherHangNorLeadOutside() throws {
        let sandbox = try makeSandbox()
        var scenario = HostileScenario()
        scenario.file("a.txt", "first")
        let big = scenario.file("big.bin", String(repeating: "b", count: 1000))
        scenario.entries[big].stall = true
        scenario.file("sub/c.txt", "into a linked staging folder")
        scenario.file("sub2/d.txt", "into a linked final folder")
        scenario.file("z.bin", String(repeating: "z", count: 200_000))  // more than a pipe holds
        // The stalled file's group comes first: the other files' downloads (several run at
        // once within a group) start only once it is placed, so everything below is planted
        // before any of them.
        scenario.groups = [HostileScenario.Group("first", order: 0, patterns: ["/a.txt", "/big.bin"])]
        scenario.stallLimit = 20
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let child = try start(sandbox, ["restore", "--remote", server.remoteURL(), "--to", sandbox.target, "--place", "all"],
                              password: server.password)
        let stalled = server.waitStalled(timeout: 15)
        XCTAssertEqual(stalled, ["/base/big.bin"], "the restore never asked for big.bin")
        let staging = sandbox.target + "/" + RestoreTarget.stagingName
        mkdir(staging, 0o755)
        rmdir(staging + "/sub")  // made ahead of its download by some designs; empty either way
        XCTAssertEqual(mkfifo(staging + "/z.bin", 0o644), 0, "could not plant the FIFO: \(String(cString: strerror(errno)))")
        XCTAssertEqual(symlink(sandbox.outside, staging + "/sub"), 0, "could not plant the staging link")
        XCTAssertEqual(symlink(sandbox.outside, sandbox.target + "/sub2"), 0, "could not plant the target link")
        server.release()

        let run = Run(ending: child.wait(timeout: 30))
        assertFinished(run)
        XCTAssertNotNil(run.status, run.summary)
        // The planted links and FIFO are the test's own: outside/ must hold exactly what it held.
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    // MARK: A hand-made folder remote

    /// Writes `files` (bytes-exact names: each "/"-separated component is FileName-decoded) and
    /// a marker recording `hashes` into the sandbox's folder remote.
    private func makeFolderRemote(_ sandbox: Sandbox, files: [String: String], hashes: [String: String],
                                  groups: [MarkerGroup] = []) throws {
        for (path, contents) in files {
            let full = sandbox.remote + "/" + path
            let folder = (full as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try Data(contents.utf8).write(to: URL(fileURLWithPath: full))
        }
        try Marker(groups: groups, hashes: hashes).encoded()
            .write(to: URL(fileURLWithPath: sandbox.remote + "/" + SyncEngine.defaultMarkerPath))
    }

    /// A folder remote with names that look like escapes ("‛2E‛2E" as literal bytes), a FIFO,
    /// and links pointing outside: the literal names stay literal inside the target (or are
    /// refused with a note), the FIFO does not hang the restore, the links are not followed
    /// (nothing of outside/ reaches the target), and nothing outside the target changes.
    func testFolderRemoteWithEscapeLikeNamesAFIFOAndOutsideLinksRestoresOnlyInsideTheTarget() throws {
        let sandbox = try makeSandbox()
        let literal = "\u{201B}2E\u{201B}2E"
        try makeFolderRemote(sandbox, files: [
            "x.txt": "hello",
            "\(literal)/x.txt": Self.evil,
            "\(literal)/\(literal)/.ssh/authorized_keys": Self.evil,
        ], hashes: [
            "x.txt": Self.sha("hello"),
            // Keyed as the listing shows the literal names (the escape doubled) and as an attacker would hope.
            "‛‛2E‛‛2E/x.txt": Self.sha(Self.evil), "‛2E‛2E/x.txt": Self.sha(Self.evil),
            "‛‛2E‛‛2E/‛‛2E‛‛2E/.ssh/authorized_keys": Self.sha(Self.evil),
            "pipe.bin": Self.sha(""), "link.txt": Self.sha("outside secret\n"),
        ])
        XCTAssertEqual(mkfifo(sandbox.remote + "/pipe.bin", 0o644), 0)
        XCTAssertEqual(symlink(sandbox.outside + "/secret.txt", sandbox.remote + "/link.txt"), 0)
        XCTAssertEqual(symlink(sandbox.outside, sandbox.remote + "/linkdir"), 0)
        XCTAssertEqual(symlink(sandbox.home + "/.ssh", sandbox.remote + "/ssh"), 0)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, remote: sandbox.remote, password: nil, timeout: 20)
        assertFinished(run)
        XCTAssertTrue(run.status == 0 || run.status == 5, run.summary)
        let files = sandbox.targetFiles()
        XCTAssertEqual(files["x.txt"], Self.sha("hello"), run.summary)
        // Literal names: restored under the same bytes, inside the target, or refused with a note.
        for name in ["‛‛2E‛‛2E/x.txt", "‛‛2E‛‛2E/‛‛2E‛‛2E/.ssh/authorized_keys"] where files[name] == nil {
            assertNoted(run, name)
        }
        XCTAssertTrue(Set(files.keys).isSubset(of: ["x.txt", "‛‛2E‛‛2E/x.txt", "‛‛2E‛‛2E/‛‛2E‛‛2E/.ssh/authorized_keys"]),
                      "\(files.keys.sorted())")
        XCTAssertFalse(files.values.contains(Self.sha("outside secret\n")), "a link in the remote was followed: \(files)")
        XCTAssertEqual(sandbox.targetSnapshot().entries.values.filter { $0.kind == .fifo || $0.kind == .link }.count, 0)
        XCTAssertEqual(sandbox.leftoversInTarget(), [], run.summary)
        // The remote's volume id is left to testFolderRemoteRestoreWritesNothingIntoTheRemote.
        sandbox.assertNothingChangedOutsideTarget(since: before, alsoAllowed: ["remote/.backup-volume-id"])
    }

    /// A benign restore from a folder remote that has no volume id yet (a disk copied by hand,
    /// a read-only medium): exit 0, and the remote is not written to, not even its identity.
    func testFolderRemoteRestoreWritesNothingIntoTheRemote() throws {
        let sandbox = try makeSandbox()
        try makeFolderRemote(sandbox, files: ["x.txt": "hello", "docs/a.txt": "alpha"],
                             hashes: ["x.txt": Self.sha("hello"), "docs/a.txt": Self.sha("alpha")])
        let before = sandbox.snapshot()

        let run = try restore(sandbox, remote: sandbox.remote, password: nil, ["--json"])
        assertCompleted(run, sandbox, files: ["x.txt": Self.sha("hello"), "docs/a.txt": Self.sha("alpha")])
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// A folder remote file whose contents do not match the marker: exit 5, named with
    /// "hash mismatch" in the text and as "error":"hashMismatch" with the path in --json.
    func testFolderRemoteWrongBodyIsAHashMismatchWithExit5NamingThePath() throws {
        let sandbox = try makeSandbox()
        try makeFolderRemote(sandbox, files: ["ok.txt": "fine", "x.txt": "hellO"],
                             hashes: ["ok.txt": Self.sha("fine"), "x.txt": Self.sha("hello")])
        let before = sandbox.snapshot()

        let text = try restore(sandbox, remote: sandbox.remote, password: nil)
        assertFinished(text)
        XCTAssertEqual(text.status, 5, text.summary)
        XCTAssertTrue(text.stderr.split(separator: "\n").contains { $0.contains("x.txt") && $0.lowercased().contains("hash mismatch") },
                      text.summary)
        let json = try restore(sandbox, remote: sandbox.remote, password: nil, ["--json"])
        XCTAssertEqual(json.status, 5, json.summary)
        XCTAssertTrue(json.jsonLines.contains { $0["error"] as? String == "hashMismatch" && $0["path"] as? String == "x.txt" },
                      json.summary)
        XCTAssertNil(sandbox.targetFiles()["x.txt"])
        XCTAssertEqual(sandbox.targetFiles()["ok.txt"], Self.sha("fine"))
        sandbox.assertNothingChangedOutsideTarget(since: before, alsoAllowed: ["remote/.backup-volume-id"])
    }

    // MARK: S3 (the same fixture as a path-style S3 endpoint)

    /// An empty scenario, served as a path-style S3 endpoint of `bucket` (nil: as WebDAV).
    private static func scenario(s3 bucket: HostileScenario.S3Bucket?) -> HostileScenario {
        var scenario = HostileScenario()
        scenario.s3 = bucket
        return scenario
    }

    /// The S3 mode's harness check: a benign bucket restores completely, exit 0.
    func testBenignS3RestoreCompletesWithExit0AndNothingOutsideChanges() throws {
        let sandbox = try makeSandbox()
        let bucket = HostileScenario.S3Bucket()
        var scenario = Self.scenario(s3: bucket)
        scenario.file("x.txt", "hello")
        scenario.file("docs/日本 report.txt", "quarterly")
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, ["--json"], s3: bucket)
        assertCompleted(run, sandbox, files: ["x.txt": Self.sha("hello"), "docs/日本 report.txt": Self.sha("quarterly")])
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// Object keys with escapes that decode to ".." (and raw "../" keys): refused with a note,
    /// exit 5, the benign object restored, nothing outside changed.
    func testS3TraversalKeysAreRefusedWithExit5AndNothingOutsideChanges() throws {
        let sandbox = try makeSandbox()
        let bucket = HostileScenario.S3Bucket()
        var scenario = Self.scenario(s3: bucket)
        scenario.file("x.txt", "hello")
        let escaped = ["‛2E‛2E/x.txt", "‛2E‛2E/victim.txt", "‛2E‛2E/‛2E‛2E/.ssh/authorized_keys",
                       "‛2E‛2E/‛2E‛2E/‛2E‛2E/.ssh/authorized_keys", "‛2E‛2E‛2F‛2E‛2E‛2F.bashrc"]
        for path in escaped {
            scenario.raw(bucket.prefix + "/" + path, .text(Self.evil), markerPath: path)
        }
        let dotted = ["../victim.txt", "a/../../.bashrc", "../../.ssh/authorized_keys"]
        for path in dotted {
            scenario.raw(bucket.prefix + "/" + path, .text(Self.evil))
        }
        let server = try makeServer(scenario)
        let before = sandbox.snapshot()

        let run = try restore(sandbox, server, s3: bucket)
        assertRefused(run, noting: escaped + dotted)
        XCTAssertEqual(sandbox.targetFiles(), ["x.txt": Self.sha("hello")], run.summary)
        XCTAssertFalse(run.all.contains(server.password), "the secret key was printed")
        sandbox.assertNothingChangedOutsideTarget(since: before)
    }

    /// An object far past its listed size (5 B listed, 300 MB sent): refused, exit 5, nothing
    /// of it in the target, the download stopped near the limit.
    func testS3OversizeBodyIsRefusedWithExit5AndTheDownloadStopsAtTheListedSize() throws {
        try assertOversizeBodyRefused(s3: HostileScenario.S3Bucket())
    }
}
