// The passphrase of an encrypted remote, asked on the terminal (/dev/tty) with echo off, when
// neither BACKUP_CRYPT_PASSWORD nor the profile's crypt_password_command gives it. A new backup
// asks twice, so a typing mistake does not become the only key.

import BackupApp
import Foundation
#if canImport(Glibc)
import Glibc
#endif

enum PassphrasePrompt {
    @Sendable static func ask(_ question: Encryption.Question) -> String? {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        for _ in 0..<3 {
            guard let first = read(tty, prompt: "passphrase for the encrypted remote \(TerminalText.visible(question.remote)): ") else { return nil }
            if first.isEmpty { return nil }
            guard question.confirm else { return first }
            guard let again = read(tty, prompt: "the same passphrase again: ") else { return nil }
            if again == first { return first }
            write(tty, "the two differ; once more\n")
        }
        return nil
    }

    private static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// One line read from `fd` with echo off (restored after, also when the read fails).
    private static func read(_ fd: Int32, prompt: String) -> String? {
        write(fd, prompt)
        var saved = termios()
        let canMute = tcgetattr(fd, &saved) == 0
        if canMute {
            var muted = saved
            muted.c_lflag &= ~tcflag_t(ECHO)
            muted.c_lflag |= tcflag_t(ECHONL)
            _ = tcsetattr(fd, TCSANOW, &muted)
        }
        defer { if canMute { _ = tcsetattr(fd, TCSANOW, &saved) } }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let got = Glibc.read(fd, &byte, 1)
            if got < 0 && errno == EINTR { continue }
            guard got == 1 else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            line.append(byte)
            if line.count > 4096 { return nil }
        }
        return String(decoding: line, as: UTF8.self)
    }
}
