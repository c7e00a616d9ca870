// What the screen tests share: an app in a temporary home (its own config and state), a
// context whose clock the test moves and whose jobs the test feeds by hand, and a loop on a
// ScreenBuffer that draws a screen stack the way a person would see it.

@testable import BackupTUI
import BackupApp
import BackupEngine
import BackupTerminal
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

/// A clock the test sets.
final class TestClock: Sendable {
    private let value = Mutex(1000.0)
    var now: Double { value.withLock { $0 } }
    func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
    var function: @Sendable () -> Double { { [self] in now } }
}

final class TUIFixture {
    let dir: TempDir
    let app: BackupApp
    let clock = TestClock()
    let context: Context
    /// The sync jobs the screens started, in order, with their profile.
    private(set) var syncs: [(profile: Profile, job: SyncJob)] = []
    private(set) var restores: [(profile: Profile?, job: RestoreJob, record: String, placeAll: Bool)] = []
    /// The plan restore jobs read when the engine first reports, as a started job reads the record.
    var restorePlan: [RecordedFile]?

    init() throws {
        dir = try TempDir("backup-tui")
        app = BackupApp(
            paths: AppPaths(configFolder: dir.path("config/backup"), stateFolder: dir.path("state/backup")),
            environment: ["HOME": dir.path("home")])
        context = Context(app: app, clock: clock.function, timeZone: TimeZone(identifier: "UTC") ?? .current)
        context.startSync = { [unowned self] profile, request in
            let job = SyncJob(request: request, clock: clock.function)
            syncs.append((profile, job))
            return job
        }
        context.startPreview = nil
        context.startRestore = { [unowned self] profile, request, record, placeAll in
            let plan = restorePlan
            let job = RestoreJob(request: request, placeAll: placeAll, clock: clock.function, loadPlan: { plan })
            restores.append((profile, job, record, placeAll))
            return job
        }
    }

    /// A profile written to the config, with its source and remote folders made.
    @discardableResult
    func profile(_ name: String = "default", groups: [ProfileGroup] = []) throws -> Profile {
        let source = try dir.makeFolder("\(name)/source")
        let remote = try dir.makeFolder("\(name)/remote")
        var profile = Profile(name: name, source: source, remote: remote)
        profile.groups = groups
        return try app.initProfile(profile, replace: true)
    }

    /// A loop over `screens` on a buffer of `columns`x`rows`.
    func loop(_ screens: [any Screen], columns: Int = 60, rows: Int = 20) -> (Loop, ScreenBuffer) {
        let buffer = ScreenBuffer(columns: columns, rows: rows)
        return (Loop(terminal: buffer, context: context, screens: screens), buffer)
    }

    /// The frame `screens` draw at the given size.
    func frame(_ screens: [any Screen], columns: Int = 60, rows: Int = 20) -> String {
        let (loop, buffer) = loop(screens, columns: columns, rows: rows)
        loop.step(timeoutMilliseconds: 0)
        return buffer.text
    }

    /// Presses `keys` one per turn of the loop (time moving on by a frame each), then lets
    /// it draw.
    func press(_ keys: [Key], _ loop: Loop, _ buffer: ScreenBuffer) {
        // One turn first, so the screens have taken what their jobs did before a key comes.
        clock.advance(0.2)
        loop.step(timeoutMilliseconds: 0)
        buffer.keys += keys
        for _ in 0..<keys.count + 1 {
            clock.advance(0.2)
            loop.step(timeoutMilliseconds: 0)
        }
    }

    /// `text` typed as keys.
    static func type(_ text: String) -> [Key] { text.map { .character($0) } }
}

/// Compares a frame with an expected screen, showing both on failure.
func assertScreen(_ actual: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
    let trimmed = expected.split(separator: "\n", omittingEmptySubsequences: false).map { line in
        var line = String(line)
        while line.last == " " { line.removeLast() }
        return line
    }.joined(separator: "\n")
    if actual != trimmed {
        let want = trimmed.split(separator: "\n", omittingEmptySubsequences: false)
        let got = actual.split(separator: "\n", omittingEmptySubsequences: false)
        let first = zip(want, got).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(want.count, got.count)
        XCTFail("the screen differs from row \(first) (expected \(want.count) rows, got \(got.count)):\n"
            + "--- expected\n\(trimmed)\n--- actual\n\(actual)\n---", file: file, line: line)
    }
}

extension TransferReading {
    /// `bytes` moved, with `current` in flight (none when nil), as a job's meter reads.
    static func sent(_ bytes: Int64, current: String?, expected: Int64 = 0) -> TransferReading {
        TransferReading(bytes: bytes, expectedBytes: expected, moving: current.map { [Moving(path: $0)] } ?? [])
    }
}
