// The pieces of `backup schedule` that need no systemd: the intervals it takes and what each
// becomes in a timer and a crontab, unit names escaped exactly as the real `systemd-escape`
// escapes them, and values quoted so a path cannot add a setting to a unit.

@testable import BackupApp
import BackupTestSupport
import Foundation
import XCTest

final class ScheduleTests: XCTestCase {
    func testIntervalsParseAndOthersAreRefusedWithTheirForm() throws {
        let cases: [(String, String, Int)] = [
            ("hourly", "hourly", 3600), ("Daily", "daily", 86400), ("weekly", "weekly", 604_800),
            ("6h", "6h", 21600), ("45m", "45m", 2700), ("1m", "1m", 60), ("744h", "744h", 744 * 3600),
        ]
        for (text, words, seconds) in cases {
            let interval = try ScheduleInterval(parsing: text)
            XCTAssertEqual(interval.words, words)
            XCTAssertEqual(interval.seconds, seconds, text)
        }
        for bad in ["", "h", "0h", "06h", "-5m", "5", "5s", "5d", "monthly", "1.5h", "745h", "99999999m", "５m"] {
            XCTAssertThrowsError(try ScheduleInterval(parsing: bad), bad) { error in
                let error = error as? AppError
                XCTAssertEqual(error?.status, .usage, bad)
                XCTAssertTrue(error?.message.contains("--every") == true, error?.message ?? "")
            }
        }
    }

    func testWallClockIntervalsAreCalendarEventsAndOthersCountFromTheLastRun() throws {
        let calendar: [(String, String?)] = [
            ("hourly", "hourly"), ("daily", "daily"), ("weekly", "weekly"), ("15m", "*:00/15"), ("60m", "hourly"),
            ("6h", "00/6:00:00"), ("24h", "daily"), ("168h", "weekly"), ("45m", nil), ("7h", nil), ("36h", nil),
        ]
        for (text, event) in calendar {
            let interval = try ScheduleInterval(parsing: text)
            XCTAssertEqual(interval.calendar, event, text)
            if let event {
                XCTAssertEqual(interval.timerSettings.first, "OnCalendar=\(event)")
            } else {
                XCTAssertEqual(Array(interval.timerSettings.prefix(2)), ["OnActiveSec=\(ScheduleInterval.span(interval.seconds))",
                                                                         "OnUnitActiveSec=\(ScheduleInterval.span(interval.seconds))"])
            }
            XCTAssertLessThanOrEqual(interval.randomizedDelay, min(1800, max(1, interval.seconds / 10)))
            XCTAssertTrue(interval.timerSettings.contains { $0.hasPrefix("RandomizedDelaySec=") })
        }
        XCTAssertEqual(try ScheduleInterval(parsing: "daily").randomizedDelay, 1800)
        XCTAssertEqual(try ScheduleInterval(parsing: "hourly").randomizedDelay, 360)
    }

    func testCronTimesAreExactWhereCronCanSayItAndSayWhenNot() throws {
        let exact: [(String, String)] = [("hourly", "7 * * * *"), ("15m", "*/15 * * * *"), ("6h", "7 */6 * * *"), ("daily", "7 0 * * *"),
                                          ("weekly", "7 0 * * 1"), ("1m", "* * * * *")]
        for (text, fields) in exact {
            let (got, note) = try ScheduleInterval(parsing: text).cronTimes(spread: 7)
            XCTAssertEqual(got, fields, text)
            XCTAssertNil(note, text)
        }
        let (fields, note) = try ScheduleInterval(parsing: "45m").cronTimes(spread: 7)
        XCTAssertEqual(fields, "*/30 * * * *")
        XCTAssertTrue(note?.contains("every 30 minutes") == true, note ?? "")
        XCTAssertNotNil(try ScheduleInterval(parsing: "7h").cronTimes(spread: 0).note)
    }

    func testUnitNamesAreEscapedAsSystemdEscapeDoes() throws {
        let tool = try XCTUnwrap(["/usr/bin/systemd-escape", "/bin/systemd-escape"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                 "systemd-escape is missing: apt-get install systemd")
        let names = ["default", "my-laptop", ".hidden", "a.b_c", "x-y-z", "9lives", "UPPER.case", "tail.", "a:b", "é-ü", "sp ace", "a/b"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = names
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertEqual(names.map(Scheduler.escape), printed.split(whereSeparator: \.isWhitespace).map(String.init))
        for name in names where Profile.isValidName(name) {
            XCTAssertEqual(Scheduler.unescape(Scheduler.escape(name)), name)
        }
        XCTAssertNil(Scheduler.unescape("a-b"), "a '-' is a '/', which no profile name holds")
        XCTAssertNil(Scheduler.unescape("\\x0a"))
    }

    func testValuesAreQuotedSoAPathCannotAddASetting() throws {
        XCTAssertEqual(try Scheduler.quoted("/a b/%h/$HOME/\"q\"\\"), "\"/a b/%%h/$$HOME/\\\"q\\\"\\\\\"")
        XCTAssertEqual(try Scheduler.quoted("X=/a$b", exec: false), "\"X=/a$b\"")
        for bad in ["/a\nExecStartPre=/bin/rm -rf ~", "/a\rb", "/a\u{7F}"] {
            XCTAssertThrowsError(try Scheduler.quoted(bad)) { XCTAssertEqual(($0 as? AppError)?.status, .usage) }
            XCTAssertThrowsError(try Scheduler.unquotedPath(bad))
        }
        let dir = try TempDir("schedule-quote")
        addTeardownBlock { dir.cleanup() }
        let scheduler = Scheduler(environment: ["HOME": dir.path, "PATH": "/nonexistent"],
                                  paths: AppPaths(configFolder: dir.path("cfg\nEvil=1/backup"), stateFolder: dir.path("state/backup")),
                                  executable: "/usr/bin/backup")
        XCTAssertThrowsError(try scheduler.serviceDropInText("p", configPath: nil), "a line break in a pinned folder must not reach a unit")
    }

    /// A scheduler in a temporary home whose PATH has a `systemctl` that records its arguments
    /// (and fails when told to), and, when `manager`, a user manager's socket.
    private func recordingScheduler(manager: Bool, failing: String? = nil) throws -> (Scheduler, TempDir, () -> [String]) {
        let dir = try TempDir("schedule-systemctl")
        addTeardownBlock { dir.cleanup() }
        let bin = try dir.makeFolder("bin")
        let log = dir.path("systemctl.log")
        let script = "#!/bin/sh\necho \"$*\" >>'\(log)'\n" + (failing.map { "case \"$*\" in *\($0)*) echo 'Unit not found.' >&2; exit 5;; esac\n" } ?? "")
        try dir.write("bin/systemctl", Data(script.utf8))
        chmod(bin + "/systemctl", 0o755)
        let runtime = try dir.makeFolder("run")
        if manager {
            try FileManager.default.createDirectory(atPath: runtime + "/systemd", withIntermediateDirectories: true)
            let python = Process()
            python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            python.arguments = ["python3", "-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", runtime + "/systemd/private"]
            try python.run()
            python.waitUntilExit()
        }
        let environment = ["HOME": dir.path("home"), "PATH": bin, "XDG_CONFIG_HOME": dir.path("config"), "XDG_RUNTIME_DIR": runtime, "USER": "someone"]
        var scheduler = Scheduler(environment: environment, executable: "/usr/bin/backup")
        scheduler.systemUnitFolders = [dir.path("packaged")]
        scheduler.lingerFolder = dir.path("linger")
        let calls = { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
        return (scheduler, dir, calls)
    }

    func testWithAUserManagerTheTimerIsEnabledAndStartedAndOffDisablesIt() throws {
        let (scheduler, dir, calls) = try recordingScheduler(manager: true)
        let profile = Profile(name: "my-pc", source: "/src", remote: "/dst")
        let report = try scheduler.schedule(profile, every: try ScheduleInterval(parsing: "daily"), configPath: nil)
        XCTAssertTrue(report.enabled)
        XCTAssertNil(report.enableSkipped)
        XCTAssertNil(report.cronLine)
        XCTAssertEqual(calls(), ["--user daemon-reload", "--user enable backup@my\\x2dpc.timer", "--user restart backup@my\\x2dpc.timer"])
        XCTAssertTrue(report.warnings.contains { $0.contains("loginctl enable-linger someone") })
        try FileManager.default.createDirectory(atPath: dir.path("linger"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.path("linger/someone"), contents: nil)
        XCTAssertFalse(try scheduler.schedule(profile, every: try ScheduleInterval(parsing: "daily"), configPath: nil).warnings
            .contains { $0.contains("lingering") }, "no lingering warning once lingering is on")

        let removed = try scheduler.unschedule("my-pc")
        XCTAssertEqual(removed.count, 2)
        XCTAssertEqual(Array(calls().suffix(2)), ["--user disable --now backup@my\\x2dpc.timer", "--user daemon-reload"])
        XCTAssertTrue(scheduler.list().isEmpty)
    }

    func testASystemctlFailureIsNamedWithWhatItSaid() throws {
        let (scheduler, _, _) = try recordingScheduler(manager: true, failing: "enable")
        XCTAssertThrowsError(try scheduler.schedule(Profile(name: "p", source: "/s", remote: "/r"), every: try ScheduleInterval(parsing: "1h"), configPath: nil)) {
            let message = ($0 as? AppError)?.message ?? ""
            XCTAssertTrue(message.contains("systemctl --user enable backup@p.timer") && message.contains("Unit not found."), message)
        }
    }

    func testAPackagedTemplateIsUsedAndOnlyOurOwnCopyIsEverReplaced() throws {
        let (scheduler, dir, _) = try recordingScheduler(manager: false)
        let profile = Profile(name: "p", source: "/s", remote: "/r")
        let every = try ScheduleInterval(parsing: "daily")
        let own = scheduler.unitFolder + "/backup@.service"
        XCTAssertTrue(try scheduler.schedule(profile, every: every, configPath: nil).written.contains(own))

        // A person's own template is theirs: never rewritten.
        try Data("[Service]\nExecStart=/opt/mine sync --profile %I\n".utf8).write(to: URL(fileURLWithPath: own))
        XCTAssertFalse(try scheduler.schedule(profile, every: every, configPath: nil).written.contains(own))
        XCTAssertTrue(try String(contentsOfFile: own, encoding: .utf8).contains("/opt/mine"))

        // Ours, once a package installed its own, is removed so the package's takes effect.
        try Data(try Scheduler.serviceTemplate(executable: "/old/backup", packaged: false).utf8).write(to: URL(fileURLWithPath: own))
        try dir.write("packaged/backup@.service", Data(try Scheduler.serviceTemplate(executable: "/usr/bin/backup", packaged: true).utf8))
        try dir.write("packaged/backup@.timer", Data(Scheduler.timerTemplate(packaged: true).utf8))
        let report = try scheduler.schedule(profile, every: every, configPath: nil)
        XCTAssertEqual(report.templates, [dir.path("packaged/backup@.service"), dir.path("packaged/backup@.timer")])
        XCTAssertFalse(FileManager.default.fileExists(atPath: own))
        XCTAssertFalse(Scheduler.isOurs(dir.path("packaged/backup@.service")), "a package's copy is never ours to remove")
    }
}
