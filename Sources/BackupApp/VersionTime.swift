// The times people give `restore --as-of` and read in `backup versions`: ISO 8601 dates and
// date-times, in local time unless they end in Z or an offset.

import Foundation

public enum VersionTime {
    /// The instant `text` names, or nil when it is not an ISO 8601 date or date-time.
    ///
    /// `2026-11-30`, `2026-11-30T14:05`, `2026-11-30T14:05:09`, `2026-11-30 14:05:09.5`, each
    /// optionally followed by `Z`, `+01:00` or `-0500`; without one it is local time (`TZ`).
    /// Also `@SECONDS` since 1970.
    /// A time is taken as the end of the last unit it names: a date as the last moment of that
    /// day, a minute as its last second, a second as its end. So `--as-of 2026-11-30` is the
    /// backup as that day left it, and a time copied from `date` just after a sync includes
    /// that sync.
    public static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // `@1764511509` (as `date +@%s` prints it): seconds since 1970, UTC, to that second's end.
        if trimmed.hasPrefix("@"), let seconds = Int64(trimmed.dropFirst()), abs(seconds) < 100_000_000_000 {
            return Date(timeIntervalSince1970: TimeInterval(seconds) + 0.999_999)
        }
        let bytes = Array(trimmed.utf8)
        var at = 0
        func number(_ digits: Int) -> Int? {
            guard at + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[at..<(at + digits)] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            at += digits
            return value
        }
        func take(_ character: Character) -> Bool {
            guard at < bytes.count, bytes[at] == character.asciiValue else { return false }
            at += 1
            return true
        }
        guard let year = number(4), take("-"), let month = number(2), take("-"), let day = number(2),
              (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var components = DateComponents(year: year, month: month, day: day, hour: 0, minute: 0, second: 0)
        var span: TimeInterval = 86_400
        if at < bytes.count && (take("T") || take("t") || take(" ")) {
            guard let hour = number(2), hour < 24, take(":"), let minute = number(2), minute < 60 else { return nil }
            components.hour = hour
            components.minute = minute
            span = 60
            if take(":") {
                guard let second = number(2), second < 60 else { return nil }
                components.second = second
                span = 1
                if take(".") || take(",") {
                    let start = at
                    var fraction = 0.0, scale = 0.1
                    while at < bytes.count, (0x30...0x39).contains(bytes[at]) {
                        fraction += Double(bytes[at] - 0x30) * scale
                        scale /= 10
                        at += 1
                    }
                    guard at > start else { return nil }
                    components.nanosecond = Int(fraction * 1e9)
                    span = scale * 10
                }
            }
        }
        var zone = TimeZone.current
        if at < bytes.count {
            if take("Z") || take("z") {
                zone = TimeZone(secondsFromGMT: 0) ?? zone
            } else if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") {
                let sign = bytes[at] == UInt8(ascii: "-") ? -1 : 1
                at += 1
                guard let hours = number(2), hours < 24 else { return nil }
                _ = take(":")
                guard let minutes = number(2), minutes < 60, let offset = TimeZone(secondsFromGMT: sign * (hours * 3600 + minutes * 60)) else {
                    return nil
                }
                zone = offset
            }
        }
        guard at == bytes.count else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        components.timeZone = zone
        guard let date = calendar.date(from: components),
              calendar.component(.day, from: date) == day, calendar.component(.month, from: date) == month
        else { return nil }
        // The end of the unit: the last instant before the next one begins.
        return date.addingTimeInterval(span - 0.000_001)
    }

    /// `date` for people: local time, to the second, with its offset (`2026-11-30 14:05:09 +0100`).
    public static func shown(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone.current
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss Z"
        return formatter.string(from: Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
    }
}
