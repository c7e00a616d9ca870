// The times `restore --as-of` takes, and the names and records of the versions folder, which
// come back from the remote and are read as untrusted.

import BackupApp
import BackupEngine
import Foundation
import XCTest

final class VersionTimeTests: XCTestCase {
    private func utc(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    func testATimeIsTheEndOfTheLastUnitItNames() throws {
        let second = try XCTUnwrap(VersionTime.parse("2026-11-30T14:05:09Z"))
        XCTAssertEqual(second.timeIntervalSince1970, try XCTUnwrap(utc("2026-11-30T14:05:09.000Z")).timeIntervalSince1970 + 0.999_999, accuracy: 1e-4)
        let minute = try XCTUnwrap(VersionTime.parse("2026-11-30T14:05Z"))
        XCTAssertEqual(minute.timeIntervalSince1970, try XCTUnwrap(utc("2026-11-30T14:05:59.999Z")).timeIntervalSince1970, accuracy: 1e-2)
        let fraction = try XCTUnwrap(VersionTime.parse("2026-11-30 14:05:09.5Z"))
        XCTAssertEqual(fraction.timeIntervalSince1970, try XCTUnwrap(utc("2026-11-30T14:05:09.500Z")).timeIntervalSince1970 + 0.099_999, accuracy: 1e-4)
        let offset = try XCTUnwrap(VersionTime.parse("2026-11-30T15:05:09+01:00"))
        XCTAssertEqual(offset, second)
        XCTAssertEqual(VersionTime.parse("2026-11-30T09:05:09-0500"), second)
        XCTAssertEqual(VersionTime.parse("@\(Int(try XCTUnwrap(utc("2026-11-30T14:05:09.000Z")).timeIntervalSince1970))"), second)
        XCTAssertNil(VersionTime.parse("@soon"))
    }

    func testADateAloneIsTheEndOfThatDayInLocalTime() throws {
        let day = try XCTUnwrap(VersionTime.parse("2026-11-30"))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone.current
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: day)
        XCTAssertEqual([parts.year, parts.month, parts.day, parts.hour, parts.minute, parts.second], [2026, 11, 30, 23, 59, 59])
    }

    func testWhatIsNotADateOrTimeIsRefused() {
        for text in ["", "yesterday", "2026-13-01", "2026-02-30", "2026-11-30T25:00", "2026-11-30T14:5", "2026-11-30T14:05:09Zjunk",
                     "2026/11/30", "20261130T140509Z", "2026-11-30T14:05:09+25:00", "2026-11-30T14:05:09."] {
            XCTAssertNil(VersionTime.parse(text), text)
        }
    }

    func testRunNamesRoundTripAndOthersAreNoRuns() throws {
        let date = Date(timeIntervalSince1970: 1_764_511_509.75)
        XCTAssertEqual(VersionStore.runName(date), "20251130T140509Z")
        XCTAssertEqual(VersionStore.date(ofRun: "20251130T140509Z"), Date(timeIntervalSince1970: 1_764_511_509))
        for name in ["20251130T140509", "20251130T140509Z.json", "20250230T000000Z", "2025113OT140509Z", "../20251130T140509Z",
                     "20251130t140509z", "20251130T246000Z", ""] {
            XCTAssertNil(VersionStore.date(ofRun: name), name)
        }
        let runs = VersionStore.runs(in: ["20251130T140509Z.json", "20251201T000000Z", "notes", "20251130T140509Z", "20251130T140509Z"])
        XCTAssertEqual(runs.map(\.name), ["20251130T140509Z", "20251201T000000Z"])
        XCTAssertEqual(runs.map(\.hasRecord), [true, false])
    }

    func testARecordFromTheRemoteIsReadOnlyWhenItIsOne() {
        XCTAssertNil(VersionRecord.decode(Data("not json".utf8)))
        XCTAssertNil(VersionRecord.decode(Data("{\"replaced\":-1,\"deleted\":0,\"bytes\":0,\"marker\":true}".utf8)))
        XCTAssertNil(VersionRecord.decode(Data(repeating: 0x20, count: 5000) + Data("{}".utf8)))
        let record = VersionRecord.decode(Data("{\"replaced\":2,\"deleted\":1,\"bytes\":9,\"marker\":true,\"committed\":1e300}".utf8))
        XCTAssertEqual(record?.replaced, 2)
        XCTAssertNil(record?.committedDate, "a time no clock gives is no time")
    }

    func testKeepVersionsAndMaxChangeValues() throws {
        XCTAssertEqual(try VersionPolicy.parse("30d")?.keep, 30 * 86_400)
        XCTAssertEqual(try VersionPolicy.parse("12h")?.keep, 12 * 3600)
        XCTAssertEqual(try VersionPolicy.parse("2W")?.keep, 14 * 86_400)
        XCTAssertNil(try VersionPolicy.parse("0"))
        for text in ["", "30", "d", "-1d", "1y", "99999999999w", "1.5d"] {
            XCTAssertThrowsError(try VersionPolicy.parse(text), text)
        }
        let config = """
            [default]
            source = /a
            remote = /b
            keep_versions = 1w
            max_change = 25%

            [off]
            source = /a
            remote = /c
            keep_versions = 0
            max_change = off
            """
        let parsed = try Config.parse(config, path: "/config")
        XCTAssertEqual(parsed.profiles[0].versions, VersionPolicy(keep: 7 * 86_400))
        XCTAssertEqual(parsed.profiles[0].changeGuard, ChangeGuard(maxReplaceFraction: 0.25))
        XCTAssertNil(parsed.profiles[1].versions)
        XCTAssertNil(parsed.profiles[1].changeGuard)
        let defaults = try Config.parse("[d]\nsource = /a\nremote = /b\n", path: "/config").profiles[0]
        XCTAssertEqual(defaults.versions, VersionPolicy(keep: 30 * 86_400))
        XCTAssertEqual(defaults.changeGuard, ChangeGuard())
        for bad in ["keep_versions = soon", "max_change = 150%", "max_change = half"] {
            XCTAssertThrowsError(try Config.parse("[d]\nsource = /a\nremote = /b\n\(bad)\n", path: "/config"), bad) { error in
                XCTAssertTrue(String(describing: error).contains("/config:4"), "\(error)")
            }
        }
    }
}
