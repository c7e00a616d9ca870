// Where the files a run replaces or deletes are kept: `.backup-versions/<run>/<path>` beside
// the tree, one folder per run that changed the remote, named by the run's time in UTC
// (`20261201T103000Z`: no colons, which vfat, exFAT and SMB refuse). Each run's folder also
// holds the marker it replaced (`<run>/.backup-marker`), so the tree as it was before that run
// can be rebuilt, and beside the folder a small record of what the run kept (`<run>.json`).
// Everything read back from there is the remote's word: names that do not parse are left
// alone, never pruned, never restored from.

import Foundation
import Synchronization

/// The names and records of the versions folder.
public enum VersionStore {
    /// The folder at the remote root; `list()` never shows or descends into it.
    public static let folder = ".backup-versions"

    /// The remote path of `path` as kept by the run `run`.
    public static func path(run: String, _ path: String) -> String {
        folder + "/" + run + "/" + path
    }

    /// The remote path of the run's record.
    public static func recordPath(run: String) -> String {
        folder + "/" + run + ".json"
    }

    /// The remote path of the run's folder.
    public static func runFolder(_ run: String) -> String {
        folder + "/" + run
    }

    /// The run folder's name for `date`: `YYYYMMDDTHHMMSSZ`, UTC, whole seconds (rounded down).
    public static func runName(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = String(parts.tm_year + 1900)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + two(parts.tm_mon + 1) + two(parts.tm_mday)
            + "T" + two(parts.tm_hour) + two(parts.tm_min) + two(parts.tm_sec) + "Z"
    }

    /// The time a run folder's name stands for, or nil for any other name (exactly
    /// `YYYYMMDDTHHMMSSZ`, a real date and time).
    public static func date(ofRun name: String) -> Date? {
        let bytes = Array(name.utf8)
        guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int32(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
              let hour = number(9..<11), let minute = number(11..<13), let second = number(13..<15),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let seconds = timegm(&parts)
        let date = Date(timeIntervalSince1970: TimeInterval(seconds))
        // 20260231T… is not a date: timegm would roll it into March.
        return runName(date) == name ? date : nil
    }

    /// The runs among the names of the versions folder, oldest first: each folder whose name
    /// is a run's, with whether its record is there too.
    public static func runs(in names: [String]) -> [VersionRun] {
        let records = Set(names.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) })
        var seen = Set<String>()
        return names.compactMap { name -> VersionRun? in
            guard let date = date(ofRun: name), seen.insert(name).inserted else { return nil }
            return VersionRun(name: name, date: date, hasRecord: records.contains(name))
        }.sorted { $0.name < $1.name }
    }
}

/// One run's folder in the versions folder.
public struct VersionRun: Sendable, Equatable {
    /// `YYYYMMDDTHHMMSSZ`.
    public var name: String
    public var date: Date
    /// Whether `<name>.json` is beside the folder (a run stopped before its marker has none).
    public var hasRecord: Bool

    public init(name: String, date: Date, hasRecord: Bool) {
        self.name = name
        self.date = date
        self.hasRecord = hasRecord
    }
}

/// What one run kept, as its `<run>.json` says.
public struct VersionRecord: Sendable, Equatable, Codable {
    /// Files the run replaced with a new content (their old one is kept).
    public var replaced: Int
    /// Files the run deleted (kept).
    public var deleted: Int
    /// The bytes of the kept files (the marker left out).
    public var bytes: Int64
    /// Whether the marker the run replaced is kept in the folder.
    public var marker: Bool
    /// When the run's own marker was written (seconds since 1970): from then on the tree was
    /// the run's. Nil in a record of a run that wrote none.
    public var committed: Double?
    /// When the marker it replaced (kept in its folder) was written, where this machine knew:
    /// from then until `committed` the tree was that marker's.
    public var previous: Double?

    public init(replaced: Int, deleted: Int, bytes: Int64, marker: Bool, committed: Date? = nil, previous: Date? = nil) {
        self.replaced = replaced
        self.deleted = deleted
        self.bytes = bytes
        self.marker = marker
        self.committed = committed?.timeIntervalSince1970
        self.previous = previous?.timeIntervalSince1970
    }

    /// `committed` as a date, where it is one.
    public var committedDate: Date? { Self.date(committed) }
    /// `previous` as a date, where it is one.
    public var previousDate: Date? { Self.date(previous) }

    private static func date(_ seconds: Double?) -> Date? {
        seconds.flatMap { $0.isFinite && abs($0) < 1e11 ? Date(timeIntervalSince1970: $0) : nil }
    }

    /// The record's bytes as written.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }

    /// A record read from the remote, or nil for anything that is not one (too long, not
    /// JSON, negative counts).
    public static func decode(_ data: Data) -> VersionRecord? {
        guard data.count <= 4096, let record = try? JSONDecoder().decode(VersionRecord.self, from: data),
              record.replaced >= 0, record.deleted >= 0, record.bytes >= 0
        else { return nil }
        return record
    }
}

/// How long kept versions stay: the profile's `keep_versions`.
public struct VersionPolicy: Sendable, Equatable {
    /// Versions older than this many seconds are pruned after a successful run.
    public var keep: TimeInterval

    public init(keep: TimeInterval) {
        self.keep = keep
    }

    /// `keep_versions` as written: `N` followed by `h`, `d` or `w` (`30d`), or `0` for no
    /// versions (nil). Throws a message naming what is wrong.
    public static func parse(_ text: String) throws(VersionPolicyError) -> VersionPolicy? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "0" { return nil }
        guard let unit = trimmed.last, let count = Int(trimmed.dropLast()), count >= 0,
              let seconds = ["h": 3600, "d": 86_400, "w": 604_800][unit.lowercased()]
        else {
            throw VersionPolicyError(text: text)
        }
        if count == 0 { return nil }
        let (total, overflow) = count.multipliedReportingOverflow(by: seconds)
        guard !overflow, total <= 100 * 366 * 86_400 else { throw VersionPolicyError(text: text) }
        return VersionPolicy(keep: TimeInterval(total))
    }

    /// `keep` as `keep_versions` would say it.
    public var text: String {
        let seconds = Int(keep)
        if seconds % 604_800 == 0 { return "\(seconds / 604_800)w" }
        if seconds % 86_400 == 0 { return "\(seconds / 86_400)d" }
        return "\(seconds / 3600)h"
    }
}

/// A `keep_versions` value that is not one.
public struct VersionPolicyError: Error, Sendable, Equatable {
    public let text: String
    public var message: String {
        "keep_versions = \(String(reflecting: text)) is not a duration: write a number of hours, days or weeks "
            + "(12h, 30d, 8w), or 0 to keep no versions"
    }
}

/// The change guard (beyond the contract, beside the shrink guard): a run that would replace
/// more than this share of the files it can compare by content is refused (ransomware that
/// rewrites every file in place keeps the names, sizes and count the shrink guard watches).
public struct ChangeGuard: Sendable, Equatable {
    /// The largest share of the hash-compared known files one run may replace.
    public var maxReplaceFraction: Double
    /// Below this many hash-compared known files the guard does not apply.
    public var minHashCompared: Int

    public init(maxReplaceFraction: Double = 0.5, minHashCompared: Int = 20) {
        self.maxReplaceFraction = maxReplaceFraction
        self.minHashCompared = minHashCompared
    }

    /// `max_change` as written: `N%` (0 to 100; 100% never refuses) or `off`, both nil.
    public static func parse(_ text: String) throws(ChangeGuardError) -> ChangeGuard? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "off" { return nil }
        guard trimmed.hasSuffix("%"), let percent = Double(trimmed.dropLast()), percent.isFinite, (0...100).contains(percent) else {
            throw ChangeGuardError(text: text)
        }
        return percent >= 100 ? nil : ChangeGuard(maxReplaceFraction: percent / 100)
    }

    /// Whether replacing `replaced` of `known` exceeds the share (exact, as the shrink guard's).
    public func exceeded(replaced: Int, known: Int) -> Bool {
        known >= minHashCompared
            && ShrinkGuard(maxDeleteFraction: maxReplaceFraction, minRemoteEntries: 0).exceeded(deletes: replaced, known: known)
    }
}

/// One run's keeping of versions: its folder's name, chosen once, and what it kept so far.
/// Safe from many upload tasks at once.
final class VersionKeeper: Sendable {
    let storage: any RemoteStorage
    let run: String
    private let kept: Mutex<KeptVersions>

    private init(storage: any RemoteStorage, run: String) {
        self.storage = storage
        self.run = run
        kept = Mutex(KeptVersions(run: run))
    }

    /// A keeper for a run starting at `now`: its folder is named by that second, or by the
    /// first later second no folder has yet (two runs in one second never share a folder, so
    /// nothing kept is ever kept over).
    static func start(_ storage: any RemoteStorage, now: Date) async throws -> VersionKeeper {
        let taken = Set(try await storage.listNames(in: VersionStore.folder))
        var date = now
        // Never before a run already kept: the folders' order is the runs' order.
        if let newest = VersionStore.runs(in: Array(taken)).last, newest.date >= date.addingTimeInterval(-1) {
            date = newest.date.addingTimeInterval(1)
        }
        while taken.contains(VersionStore.runName(date)) || taken.contains(VersionStore.runName(date) + ".json") {
            date = date.addingTimeInterval(1)
        }
        return VersionKeeper(storage: storage, run: VersionStore.runName(date))
    }

    /// Keeps the file at `path` (of `size` bytes) before it is replaced or deleted; returns
    /// whether it is still at `path` (false: moved, or it was gone already).
    ///
    /// One to be replaced is copied (a folder: hard-linked), never moved: until the new
    /// content lands, its path holds the old one, so a run killed in between leaves the mirror
    /// whole. One to be deleted is moved.
    func keep(_ path: String, size: Int64, deleting: Bool) async throws -> Bool {
        let stillThere: Bool
        do {
            stillThere = try await storage.keepVersion(path, as: VersionStore.path(run: run, path), size: size, copy: !deleting)
        } catch let error as CloudError where error.kind == .notFound {
            return false  // gone since the listing: nothing to keep, nothing to lose
        }
        kept.withLock {
            if deleting { $0.deleted += 1 } else { $0.replaced += 1 }
            $0.bytes += size
        }
        return stillThere
    }

    /// Keeps (copies) the marker a run is about to replace.
    func keepMarker(_ path: String, size: Int64) async throws {
        do {
            _ = try await storage.keepVersion(path, as: VersionStore.path(run: run, path), size: size, copy: true)
        } catch let error as CloudError where error.kind == .notFound {
            return
        }
        kept.withLock { $0.marker = true }
    }

    /// What was kept so far; nil when nothing was.
    var summary: KeptVersions? {
        let now = kept.withLock { $0 }
        return now.files > 0 || now.marker ? now : nil
    }

    /// Whether any file was moved away from its path (the marker must then be written again).
    var keptFiles: Bool { kept.withLock { $0.files > 0 } }
}

/// A `max_change` value that is not one.
public struct ChangeGuardError: Error, Sendable, Equatable {
    public let text: String
    public var message: String {
        "max_change = \(String(reflecting: text)) is not a share: write a percentage from 0% to 100% "
            + "(the share of the files compared by content one run may replace), or off"
    }
}
