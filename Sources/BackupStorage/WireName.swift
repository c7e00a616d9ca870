// WireName: how a file name is spelt on a WebDAV or S3 server. Inside the program a name is
// a String in FileName's codec (a byte that is not UTF-8 is `‛XX`); servers cannot be trusted
// to keep such a spelling. `rclone serve` quotes a lone `‛` (stores `‛FF` as `‛‛FF`) and,
// once its directory cache has expired, lists a control character as its U+24xx picture — so
// the next listing would name another file, and a sync would delete the one it had uploaded.
//
// On the wire, therefore, every byte a server may rewrite is a private-use code point that no
// server touches: a control byte b (0x01–0x1F, 0x7F) and each byte b of a sequence that is not
// UTF-8 (0x80–0xFF) become U+EF00 + b. A name's own code points in U+EF00–U+EFFF are prefixed
// with U+EF00, and `‛` is doubled (as the codec has always done: `rclone serve` keeps pairs,
// and names holding `‛` uploaded before this spelling keep their names). Everything else is
// sent as it is. Measured cold (server restarted) against `rclone serve webdav` and `s3`.

import BackupEngine

/// The reversible spelling of names on WebDAV and S3 servers.
enum WireName {
    private static let quote: Unicode.Scalar = "\u{201B}"
    /// U+EF00: the first code point of the block; before another of the block, it stands for it.
    private static let blockStart: UInt32 = 0xEF00

    /// The wire spelling of the name `component` (FileName's codec).
    static func encode(_ component: String) -> String {
        if isPlain(component) { return component }
        return spell(FileName.bytes(of: component))
    }

    /// The wire spelling of a path's components, "/"-joined.
    static func encode(path parts: some Sequence<String>) -> String {
        parts.map(encode).joined(separator: "/")
    }

    /// The name (FileName's codec) that `wire` spells, or nil when `wire` is not a spelling
    /// `encode` makes: a lone `‛`, a raw control character, a code point of the block that
    /// stands for no byte a name can hold, or bytes escaped that are valid UTF-8. Such a name
    /// was not written by this program, and no request could name it again.
    static func decode(_ wire: String) -> String? {
        if isPlain(wire) { return wire }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(wire.utf8.count)
        var scalars = wire.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            let value = scalar.value
            if scalar == quote {
                guard scalars.next() == quote else { return nil }
                bytes += [0xE2, 0x80, 0x9B]
            } else if value == blockStart {
                guard let next = scalars.next(), (blockStart...blockStart + 0xFF).contains(next.value) else { return nil }
                bytes += Array(String(next).utf8)
            } else if (blockStart + 1...blockStart + 0xFF).contains(value) {
                let byte = UInt8(value - blockStart)
                guard byte < 0x20 || byte >= 0x7F else { return nil }
                bytes.append(byte)
            } else if value < 0x20 || value == 0x7F {
                return nil
            } else {
                bytes += Array(String(scalar).utf8)
            }
        }
        let name = FileName.string(fromBytes: bytes)
        // Escaped bytes that form valid UTF-8 would spell a name two ways: only one is canonical.
        return spell(bytes) == wire ? name : nil
    }

    /// Whether `text` holds nothing the wire spelling changes, so that it is its own spelling:
    /// no control character, no `‛` (U+201B: E2 80 9B) and nothing of U+EF00–U+EFFF (EE BC–BF).
    private static func isPlain(_ text: String) -> Bool {
        var last: UInt8 = 0, beforeLast: UInt8 = 0
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { return false }
            if last == 0xEE && (0xBC...0xBF).contains(byte) { return false }
            if beforeLast == 0xE2 && last == 0x80 && byte == 0x9B { return false }
            beforeLast = last
            last = byte
        }
        return true
    }

    /// The wire spelling of the name `bytes`.
    private static func spell(_ bytes: [UInt8]) -> String {
        var out = String.UnicodeScalarView()
        func block(_ byte: UInt8) {
            if let scalar = Unicode.Scalar(blockStart + UInt32(byte)) { out.append(scalar) }
        }
        var index = 0
        while index < bytes.count {
            let length = FileName.validSequenceLength(bytes, at: index)
            if length == 0 {
                block(bytes[index])
                index += 1
                continue
            }
            let scalar = String(decoding: bytes[index..<index + length], as: UTF8.self).unicodeScalars.first ?? " "
            index += length
            switch scalar.value {
            case 0..<0x20, 0x7F: block(UInt8(scalar.value))
            case quote.value: out += [quote, quote]
            case blockStart...blockStart + 0xFF:
                block(0)
                out.append(scalar)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
