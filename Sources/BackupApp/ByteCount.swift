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
