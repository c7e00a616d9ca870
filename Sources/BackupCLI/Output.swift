// What the scripted mode prints. Human: a progress line on stderr, redrawn in place on a
// terminal (at most ten times a second) and printed plainly at most once a second
// elsewhere, then a summary. JSON: one object per line on stdout, each with an "event" key;
// paths that are not UTF-8 get a base64 twin field. Every text line passes through
// `TerminalText.visible` on its way out, so a remote's names and messages cannot drive the
// terminal; JSON keeps every string exact (its escapes carry control characters).

import BackupApp
import BackupEngine
import Foundation
import Synchronization

/// Prints a job's events and results, as text or as JSON lines.
final class Output: Sendable {
    /// A log line's priority, as journald reads it from a `<N>` prefix (sd-daemon(3)).
    enum Level: Int, Sendable { case error = 3, warning = 4, notice = 5, info = 6 }

    let json: Bool
    private let terminal: Bool
    /// A scheduled run (BACKUP_SCHEDULED=1, set by the timer's service): one line per event,
    /// never a progress line redrawn or repeated each second.
    private let scheduled: Bool
    /// Standard error goes to the journal (JOURNAL_STREAM is set): each line carries its priority.
    private let journal: Bool
    private let state = Mutex<(last: ContinuousClock.Instant?, drawn: Bool)>((nil, false))
    /// The bytes over the last seconds, for the rate and ETA of the progress line.
    private let rate = Mutex(RateWindow())
    /// The last result the run reported (as JSON), for the profile's notification command.
    private let lastResult = Mutex<Data?>(nil)
    private let started = ContinuousClock.now

    init(json: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.json = json
        scheduled = Scheduler.isScheduledRun(environment)
        journal = !(environment["JOURNAL_STREAM"] ?? "").isEmpty
        terminal = isatty(STDERR_FILENO) == 1 && !scheduled
    }

    /// `<N>` for a line of `level` when the journal reads standard error, else nothing.
    private func prefix(_ level: Level) -> String { journal ? "<\(level.rawValue)>" : "" }

    /// Seconds since this output was made, the clock of the rate window.
    private var seconds: Double {
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    // MARK: Events

    /// The handler to give a job.
    var events: JobEvents {
        { [self] event in handle(event) }
    }

    private func handle(_ event: JobEvent) {
        switch event {
        case .phase(let name):
            if !json { progress("\(name)…", force: true) }
        case .scanning(let files, let hashed, let hashedBytes):
            if json {
                if due() { emit(["event": "scanning", "files": files, "hashed": hashed, "hashed_bytes": hashedBytes]) }
            } else {
                progress("scanning: \(files) files found, \(hashed) read (\(Self.bytes(hashedBytes)))", force: false)
            }
        case .syncStage(let stage):
            let (name, fields, words): (String, [String: Any], String) = switch stage {
            case .uploading(let files, let bytes):
                ("uploading", ["files": files, "bytes": bytes], "uploading \(FileCount.text(files)) (\(Self.bytes(bytes)))")
            case .deleting(let files): ("deleting", ["files": files], "deleting \(FileCount.text(files)) from the remote")
            case .updatingMetadata(let files):
                ("updating metadata", ["files": files], "setting the mode and times of \(FileCount.text(files)) on the remote")
            case .writingMarker(let bytes): ("writing the marker", ["bytes": bytes], "writing the backup's marker (\(Self.bytes(bytes)))")
            }
            if json { emit(["event": "stage", "stage": name].merging(fields) { a, _ in a }) } else { progress(words + "…", force: true) }
        case .scanned(let files, let bytes, let hashed, let whenSent):
            if json {
                emit(["event": "scanned", "files": files, "bytes": bytes, "hashed": hashed, "hashed_when_sent": whenSent])
            } else {
                let later = whenSent > 0 ? "; \(whenSent) new \(whenSent == 1 ? "file" : "files") to read as \(whenSent == 1 ? "it is" : "they are") sent" : ""
                progress("scanned \(files) files (\(Self.bytes(bytes))), read \(hashed)\(later)", force: true)
            }
        case .note(let path, let message):
            if json { emit(["event": "note", "message": message].merging(Self.pathFields("path", path)) { a, _ in a }) } else { line("note: \(message)", level: .notice) }
        case .syncProgress(let done, let total, let transfer):
            counted(done, total, transfer, unit: "steps", verb: "sent")
        case .restoreProgress(let value, let transfer):
            let final = value.filesDone == value.filesTotal
            let now = seconds
            rate.withLock { $0.add(time: now, bytes: transfer.bytes) }
            if json {
                if final || due() {
                    emit(["event": "progress", "done": value.filesDone, "total": value.filesTotal, "staged": value.filesStaged,
                          "groups_done": value.groupsDone, "groups_total": value.groupsTotal].merging(transferFields(transfer)) { a, _ in a })
                }
            } else {
                progress("\(value.filesDone)/\(value.filesTotal) files placed, \(value.groupsDone)/\(value.groupsTotal) groups, "
                    + bytesText(transfer, verb: "received", now: now) + (transfer.current.map { ": \($0)" } ?? ""), force: final)
            }
        case .verifyProgress(let done, let total, let transfer):
            counted(done, total, transfer, unit: "files checked", verb: "read")
        case .fileFailed(let path, let kind, let message, _):
            if json {
                emit(["event": "error", "error": kind, "message": message].merging(Self.pathFields("path", path)) { a, _ in a })
            } else {
                line("error: \(message)", level: .error)
            }
        case .conflict(let group, let paths):
            if json {
                emit(["event": "conflict", "group": group].merging(Self.pathList("paths", paths)) { a, _ in a })
            } else {
                line("group \"\(group)\" not placed: it would overwrite \(paths.count) local file(s) that differ (\(paths.prefix(3).joined(separator: ", "))\(paths.count > 3 ? ", …" : "")); pass --overwrite to replace them", level: .warning)
            }
        }
    }

    /// A progress of `done` of `total` (steps of a sync, files a verify checked) and its bytes:
    /// a JSON `progress` event, or the line "3/10 steps, 1.2 MiB of 4 MiB sent, …".
    private func counted(_ done: Int, _ total: Int, _ transfer: TransferReading, unit: String, verb: String) {
        let final = done == total
        let now = seconds
        rate.withLock { $0.add(time: now, bytes: transfer.bytes) }
        if json {
            if final || due() {
                emit(["event": "progress", "done": done, "total": total].merging(transferFields(transfer)) { a, _ in a })
            }
        } else {
            progress("\(done)/\(total) \(unit), " + bytesText(transfer, verb: verb, now: now)
                + (transfer.current.map { ": \($0)" } ?? ""), force: final)
        }
    }

    /// "12.3 MiB of 50 MiB sent, 1.2 MiB/s, ETA 0:31": the same numbers as the TUI's.
    private func bytesText(_ transfer: TransferReading, verb: String, now: Double) -> String {
        var words = Self.bytes(transfer.bytes)
        if transfer.expectedBytes > 0 { words += " of " + Self.bytes(transfer.expectedBytes) }
        words += " " + verb
        let (speed, left) = rate.withLock { window in
            (window.rate(at: now), window.secondsLeft(transfer.expectedBytes - transfer.bytes, at: now))
        }
        if let speed { words += ", \(Self.bytes(Int64(speed)))/s" }
        if let left { words += ", ETA " + DurationText.text(left) }
        return words
    }

    /// The bytes of a progress event in JSON: moved so far, expected in all, and each file
    /// in flight with its bytes.
    private func transferFields(_ transfer: TransferReading) -> [String: Any] {
        [
            "bytes": transfer.bytes, "bytes_total": transfer.expectedBytes,
            "in_flight": transfer.moving.map { file -> [String: Any] in
                var fields = Self.pathFields("path", file.path)
                fields["bytes"] = file.bytes
                if let size = file.size { fields["size"] = size }
                return fields
            },
        ]
    }

    /// Whether a throttled progress line is due now (at most 10 a second on a terminal or in
    /// JSON, once a second in a log).
    private func due(force: Bool = false) -> Bool {
        let interval: Duration = (terminal || json) ? .milliseconds(100) : .seconds(1)
        let now = ContinuousClock.now
        return state.withLock { state in
            if !force, let last = state.last, now - last < interval { return false }
            state.last = now
            return true
        }
    }

    /// A progress line, when one is due. `text` is made only then: a restore reports every
    /// file, and formatting each report (sizes with `String(format:)`) cost more than the
    /// throttle saved.
    private func progress(_ text: @autoclosure () -> String, force: Bool) {
        if scheduled && !force { return }
        guard due(force: force) else { return }
        let text = TerminalText.visible(text())
        if terminal {
            let width = 120
            let shown = text.count > width ? String(text.prefix(width - 1)) + "…" : text
            state.withLock { $0.drawn = true }
            FileHandle.standardError.write(Data("\r\u{1B}[K\(shown)".utf8))
        } else {
            FileHandle.standardError.write(Data((prefix(.info) + text + "\n").utf8))
        }
    }

    /// A line on stderr, clearing a progress line first; a control character in it (a line
    /// break too) is shown as an escape.
    func line(_ text: String, level: Level = .info) {
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        FileHandle.standardError.write(Data(((drawn ? "\r\u{1B}[K" : "") + prefix(level) + TerminalText.visible(text) + "\n").utf8))
    }

    /// The summary on stdout (human mode), one line per argument: a control character inside
    /// a line (a line break too, as in a file name) is shown as an escape, never acted on.
    func summary(_ lines: String...) {
        summary(lines: lines)
    }

    func summary(lines: [String], level: Level = .info) {
        let shown = TerminalText.visible(lines: lines)
        document(journal ? shown.split(separator: "\n", omittingEmptySubsequences: false).map { prefix(level) + $0 }.joined(separator: "\n") : shown)
    }

    /// Text the program wrote itself (help, the man page, completion scripts), printed as is.
    func document(_ text: String) {
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    // MARK: JSON

    /// The run's result: printed as its JSON line with --json, else as `lines`; kept for the
    /// notification command either way.
    func finish(_ result: [String: Any], lines: [String]) {
        keep(result)
        // In the journal, a run that did not complete is an error whatever it printed.
        let level: Level = switch result["status"] as? String {
        case "completed": .info
        case "partial": .warning
        default: .error
        }
        if json { emit(result) } else { summary(lines: lines, level: level) }
    }

    /// Keeps `result` for the notification command without printing it.
    func keep(_ result: [String: Any]) {
        let data = try? JSONSerialization.data(withJSONObject: result, options: [.sortedKeys, .withoutEscapingSlashes])
        lastResult.withLock { $0 = data }
    }

    /// What `finish` was last given, as JSON.
    var result: Data? { lastResult.withLock { $0 } }

    func emit(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        FileHandle.standardOutput.write(Data(Self.asciiControls(String(decoding: data, as: UTF8.self)).utf8) + Data("\n".utf8))
    }

    /// JSON text with DEL, C1 and bidi controls (which JSON may carry raw) as `\uXXXX`
    /// escapes: the same strings to a parser, nothing a terminal acts on when printed. C0
    /// controls are escaped by JSONSerialization already; these can only occur in strings.
    static func asciiControls(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: TerminalText.needsEscape) else { return json }
        var result = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if TerminalText.needsEscape(scalar) {
                let hex = String(scalar.value, radix: 16)
                result.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// `key: path`, plus `key_base64` with the real bytes when the name is not UTF-8.
    static func pathFields(_ key: String, _ path: String) -> [String: Any] {
        var fields: [String: Any] = [key: path]
        if FileName.isEscaped(path) { fields[key + "_base64"] = Data(FileName.bytes(of: path)).base64EncodedString() }
        return fields
    }

    static func pathList(_ key: String, _ paths: [String]) -> [String: Any] {
        var fields: [String: Any] = [key: paths]
        let escaped = paths.filter(FileName.isEscaped)
        if !escaped.isEmpty {
            fields[key + "_base64"] = Dictionary(escaped.map { ($0, Data(FileName.bytes(of: $0)).base64EncodedString()) }, uniquingKeysWith: { a, _ in a })
        }
        return fields
    }

    static func bytes(_ count: Int64) -> String { ByteCount.text(count) }
}
