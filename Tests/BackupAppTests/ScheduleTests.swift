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
}
