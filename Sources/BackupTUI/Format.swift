// Numbers, sizes, durations and dates as the screens show them.

import BackupApp
import Foundation

enum Format {
    /// 1536 → "1.5 KiB" (the same units as the scripted mode).
    static func bytes(_ count: Int64) -> String { ByteCount.text(count) }

    /// 12345 → "12,345".
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var result = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0 && (digits.count - offset) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (value < 0 ? "-" : "") + result
    }

    /// "1 file", "3 files".
    static func files(_ value: Int) -> String {
        value == 1 ? "1 file" : "\(count(value)) files"
    }

    /// Seconds as "0:07", "12:34" or "1:02:03".
    static func duration(_ seconds: Double) -> String { DurationText.text(seconds) }

    /// A date as "2026-11-30 14:02" in `zone`.
    static func date(_ date: Date, zone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(format: "%04d-%02d-%02d %02d:%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0, parts.minute ?? 0)
    }

    /// A fraction as "42%".
    static func percent(_ done: Int, of total: Int) -> String {
        guard total > 0 else { return "0%" }
        return "\(Int((Double(done) / Double(total) * 100).rounded(.down)))%"
    }
}
