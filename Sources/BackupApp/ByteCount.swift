// Sizes as every front end shows them, so the scripted mode and the TUI agree.

import Foundation

public enum ByteCount {
    /// 1536 → "1.5 KiB"; below 1 KiB, "N B".
    public static func text(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}

public enum FileCount {
    /// "1 file", "3 files": how the scripted mode and the stored outcomes count files.
    public static func text(_ count: Int) -> String { count == 1 ? "1 file" : "\(count) files" }
}

public enum DurationText {
    /// Seconds as "0:07", "12:34" or "1:02:03"; "–" for a time that cannot be told.
    public static func text(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "–" }
        let total = Int(min(seconds, 359_999 * 3600).rounded())
        let (hours, minutes, secs) = (total / 3600, total / 60 % 60, total % 60)
        return hours > 0 ? String(format: "%d:%02d:%02d", hours, minutes, secs) : String(format: "%d:%02d", minutes, secs)
    }
}
