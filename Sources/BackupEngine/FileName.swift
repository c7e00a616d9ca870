// Paths are Swift Strings everywhere above the file system, but a Linux file name is any
// bytes but "/" and NUL. This codec makes every name a String, reversibly: valid UTF-8
// passes through unchanged (the escape character itself doubled), and each byte that is not
// part of valid UTF-8 becomes the escape character and two hex digits. It is applied at
// every boundary with the file system: scanning, the folder provider, restore placement.

/// The reversible mapping between file-name bytes and Strings.
public enum FileName {
    /// U+201B SINGLE HIGH-REVERSED-9 QUOTATION MARK, rare in names; rclone quotes with it too.
    public static let escape: Unicode.Scalar = "\u{201B}"
    private static let escapeUTF8: [UInt8] = [0xE2, 0x80, 0x9B]
    private static let hex = Array("0123456789ABCDEF".utf8)

    /// The String that stands for the name `bytes`.
    public static func string<C: Collection>(fromBytes bytes: C) -> String where C.Element == UInt8 {
        // Fast path: valid UTF-8 without the escape character.
        let array = Array(bytes)
        if let text = String(validating: array, as: UTF8.self), !text.unicodeScalars.contains(escape) {
            return text
        }
        return slowString(array)
    }

    private static func slowString(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 8)
        var index = 0
        while index < bytes.count {
            let length = validSequenceLength(bytes, at: index)
            if length == 0 {
                out += escapeUTF8
                out.append(hex[Int(bytes[index] >> 4)])
                out.append(hex[Int(bytes[index] & 0x0f)])
                index += 1
                continue
            }
            let sequence = bytes[index..<index + length]
            if sequence.elementsEqual(escapeUTF8) { out += escapeUTF8 }
            out += sequence
            index += length
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The length of the valid UTF-8 sequence starting at `index`, or 0 when it is invalid
    /// (overlong forms, surrogates and values past U+10FFFF are invalid, as in String).
    public static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let first = bytes[index]
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < bytes.count && range.contains(bytes[index + offset])
        }
        switch first {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: return continuation(1) ? 2 : 0
        case 0xE0: return continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF: return continuation(1) && continuation(2) ? 3 : 0
        case 0xED: return continuation(1, 0x80...0x9F) && continuation(2) ? 3 : 0
        case 0xF0: return continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF1...0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF4: return continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : 0
        default: return 0
        }
    }

    /// The bytes the String `name` stands for (the inverse of `string(fromBytes:)`).
    ///
    /// Only a canonical name is decoded: one that `string(fromBytes:)` gives back unchanged,
    /// so an escape can stand only for a byte that is not valid UTF-8 or for the escape
    /// character itself. Anything else (`‛2E` for ".", `‛2F` for "/", `‛00`, a lone escape)
    /// comes from no file system and is taken literally, as its own UTF-8: decoding can
    /// never produce "/", NUL, "." or "..". Untrusted paths are refused earlier, by
    /// `RelativePath`, which checks `canonicalBytes(of:)`.
    public static func bytes(of name: String) -> [UInt8] {
        canonicalBytes(of: name) ?? Array(name.utf8)
    }

    /// Whether `name` is what `string(fromBytes:)` makes of some bytes: true for every name
    /// without the escape character, and for escapes that stand only for bytes that are not
    /// valid UTF-8 (or for a doubled escape character).
    public static func isCanonical(_ name: String) -> Bool {
        canonicalBytes(of: name) != nil
    }

    /// The bytes a canonical `name` stands for, or nil when `name` is not canonical.
    public static func canonicalBytes(of name: String) -> [UInt8]? {
        let utf8 = Array(name.utf8)
        guard containsEscape(utf8) else { return utf8 }
        let decoded = decode(utf8)
        return string(fromBytes: decoded) == name ? decoded : nil
    }

    /// Every escape decoded, canonical or not.
    private static func decode(_ utf8: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var index = 0
        let e = escapeUTF8.count
        while index < utf8.count {
            if index + e <= utf8.count, utf8[index..<index + e].elementsEqual(escapeUTF8) {
                let next = index + e
                if next + e <= utf8.count, utf8[next..<next + e].elementsEqual(escapeUTF8) {
                    out += escapeUTF8
                    index = next + e
                    continue
                }
                if next + 2 <= utf8.count, let high = hexValue(utf8[next]), let low = hexValue(utf8[next + 1]) {
                    out.append(high << 4 | low)
                    index = next + 2
                    continue
                }
            }
            out.append(utf8[index])
            index += 1
        }
        return out
    }

    /// Whether `name` stands for bytes that are not its own UTF-8 (it holds an escape).
    public static func isEscaped(_ name: String) -> Bool {
        containsEscape(Array(name.utf8))
    }

    /// Calls `body` with the NUL-terminated bytes `path` stands for, for system calls.
    public static func withCString<T>(_ path: String, _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        // The escape's UTF-8 starts with 0xE2: a path without that byte is its own bytes.
        if !path.utf8.contains(escapeUTF8[0]) || !path.unicodeScalars.contains(escape) { return try path.withCString(body) }
        var bytes = bytes(of: path).map { CChar(bitPattern: $0) }
        bytes.append(0)
        return try bytes.withUnsafeBufferPointer { buffer in
            // Never nil: the array holds at least the NUL.
            guard let base = buffer.baseAddress else { return try "".withCString(body) }
            return try body(base)
        }
    }

    private static func containsEscape(_ utf8: [UInt8]) -> Bool {
        guard utf8.count >= 3 else { return false }
        for index in 0...(utf8.count - 3) where utf8[index] == 0xE2 && utf8[index + 1] == 0x80 && utf8[index + 2] == 0x9B {
            return true
        }
        return false
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
