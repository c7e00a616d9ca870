// Byte-level trimming for protocol text (XML element text, HTTP header lines). The whitespace
// of XML (§2.3 S) and of HTTP (OWS, plus the line's CRLF) is ASCII only, and trimming bytes
// costs no String made and no Foundation bridge per element or header.

enum ASCIIText {
    /// Space, tab, CR or LF.
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// `bytes` without the spaces, tabs, CRs and LFs at either end.
    static func trimmed<C: BidirectionalCollection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        var slice = bytes[...].drop(while: isSpace)
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        return slice
    }

    /// The trimmed bytes read as UTF-8 (a malformed sequence becomes U+FFFD).
    static func trimmedString<C: BidirectionalCollection>(_ bytes: C) -> String where C.Element == UInt8 {
        String(decoding: trimmed(bytes), as: UTF8.self)
    }
}
