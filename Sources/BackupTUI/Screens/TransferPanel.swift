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

/// Whether a new second began since the last look: the clock of the elapsed time and the sign
/// of life, which move once a second while a job runs even when nothing else does.
struct SecondHand {
    private var last = -1

    mutating func moved(at time: Double) -> Bool {
        let second = Int(time.rounded(.down))
        defer { last = second }
        return second != last
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

    /// The amount ("12.3 MiB of 50 MiB") and, while it runs, the speed ("1.2 MiB/s · ETA 0:31").
    static func bytesParts(_ state: TransferState, now: Double, running: Bool) -> (amount: String, speed: String?) {
        let reading = state.reading
        var amount = Format.bytes(reading.bytes)
        if reading.expectedBytes > 0 { amount += " of " + Format.bytes(reading.expectedBytes) }
        guard running, let rate = state.rate.rate(at: now) else { return (amount, nil) }
        var speed = "\(Format.bytes(Int64(rate)))/s"
        if let left = state.rate.secondsLeft(reading.expectedBytes - reading.bytes, at: now) {
            speed += " · ETA " + Format.duration(left)
        }
        return (amount, speed)
    }

    /// The bytes as one field, or as two (the speed on a row of its own) where one row is too
    /// narrow for both.
    static func drawBytes(_ name: String, _ state: TransferState, now: Double, running: Bool,
                          canvas: Canvas, row: inout Int, label: Int) {
        let (amount, speed) = bytesParts(state, now: now, running: running)
        guard let speed else { return canvas.field(name, amount, row: &row, label: label) }
        let joined = amount + " · " + speed
        if DisplayWidth.of(joined) <= canvas.columns - label - 2 { return canvas.field(name, joined, row: &row, label: label) }
        canvas.field(name, amount, row: &row, label: label)
        canvas.field("Speed", speed, row: &row, label: label)
    }

    /// The files in flight from `row`, one a line ("path  3.1 MiB of 10 MiB"), at most
    /// `maxRows` (the last line says how many more); returns the rows used.
    static func drawMoving(_ moving: [TransferReading.Moving], canvas: Canvas, row: Int, label: Int, maxRows: Int) -> Int {
        guard maxRows > 0 else { return 0 }
        var used = 0
        for (index, file) in moving.enumerated() {
            let more = moving.count - index - 1
            // The last row names a file too; the ones that do not fit are counted after it.
            if used == maxRows - 1 && more > 0 && maxRows > 1 {
                canvas.text("… and \(moving.count - index) more", row: row + used, column: label + 1, style: .dim)
                return used + 1
            }
            var amount = Format.bytes(file.bytes)
            if let size = file.size {
                // Every byte is out and the server has not answered yet (it may be storing it).
                amount = size > 0 && file.bytes >= size ? Format.bytes(size) + ", waiting for the server" : amount + " of " + Format.bytes(size)
            }
            let extra = maxRows == 1 && more > 0 ? " (+\(more))" : ""
            // A narrow screen keeps room for the name: the bytes moved alone.
            if canvas.columns - label - DisplayWidth.of(amount + extra) - 4 < 16 { amount = Format.bytes(file.bytes) }
            amount += extra
            let amountWidth = DisplayWidth.of(amount)
            let pathWidth = max(canvas.columns - label - 2 - amountWidth - 2, 4)
            canvas.path(file.path, row: row + used, column: label + 1, width: pathWidth)
            canvas.text(amount, row: row + used, column: max(label + 1 + pathWidth + 1, canvas.columns - amountWidth - 1), style: .dim)
            used += 1
            if used == maxRows { break }
        }
        return used
    }
}
