// What the sync and restore screens both show of a job's bytes: a bar, percentage and ETA
// that follow bytes (and move during a large file), the rate over the last seconds, the
// elapsed time and a sign of life that turns even when nothing moves, and every file in flight
// with how far it is.

import BackupApp
import BackupTerminal

/// A job's bytes as the screen keeps them: the latest reading and the rate window over them.
struct TransferState: Sendable {
    var reading = TransferReading()
    var rate = RateWindow()

    mutating func update(_ reading: TransferReading, at time: Double) {
        self.reading = reading
        rate.add(time: time, bytes: reading.bytes)
    }
}

enum TransferPanel {
    /// The characters of the sign of life, one a second.
    static let spinner: [Character] = ["|", "/", "-", "\\"]

    /// The sign of life for `time`: it turns once a second while a job runs.
    static func life(at time: Double) -> Character {
        spinner[Int(max(0, time)) % spinner.count]
    }

    /// The bar and its percentage at `row`: by bytes when any are expected, else `steps`.
    static func drawBar(_ fraction: Double, canvas: Canvas, row: Int) {
        let barWidth = max(canvas.columns - 9, 4)
        canvas.bar(fraction, row: row, column: 1, width: barWidth)
        canvas.text(String(Int((fraction * 100).rounded(.down))) + "%", row: row, column: barWidth + 2)
    }

    /// "12.3 MiB of 50 MiB · 1.2 MiB/s · ETA 0:31", the rate and ETA over the last seconds.
    static func bytesLine(_ state: TransferState, now: Double, running: Bool) -> String {
        let reading = state.reading
        var words = Format.bytes(reading.bytes)
        if reading.expectedBytes > 0 { words += " of " + Format.bytes(reading.expectedBytes) }
        guard running else { return words }
        if let rate = state.rate.rate(at: now) {
            words += " · \(Format.bytes(Int64(rate)))/s"
            if let left = state.rate.secondsLeft(reading.expectedBytes - reading.bytes, at: now) {
                words += " · ETA " + Format.duration(left)
            }
        }
        return words
    }

    /// The files in flight from `row`, one a line ("path  3.1 MiB of 10 MiB"), at most
    /// `maxRows` (the last line says how many more); returns the rows used.
    static func drawMoving(_ moving: [TransferReading.Moving], canvas: Canvas, row: Int, label: Int, maxRows: Int) -> Int {
        guard maxRows > 0 else { return 0 }
        var used = 0
        for (index, file) in moving.enumerated() {
            if used == maxRows - 1 && moving.count - index > 1 {
                canvas.text("… and \(moving.count - index) more", row: row + used, column: label + 1, style: .dim)
                return used + 1
            }
            var amount = Format.bytes(file.bytes)
            if let size = file.size {
                // Every byte is out and the server has not answered yet (it may be storing it).
                amount = size > 0 && file.bytes >= size ? Format.bytes(size) + ", waiting for the server" : amount + " of " + Format.bytes(size)
            }
            let amountWidth = DisplayWidth.of(amount)
            let pathWidth = max(canvas.columns - label - 2 - amountWidth - 2, 4)
            canvas.path(file.path, row: row + used, column: label + 1, width: pathWidth)
            canvas.text(amount, row: row + used, column: max(label + 1 + pathWidth + 1, canvas.columns - amountWidth - 1), style: .dim)
            used += 1
        }
        return used
    }
}
