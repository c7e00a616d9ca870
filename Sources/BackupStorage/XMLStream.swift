// A streaming XML tokenizer for the subset servers send (WebDAV multistatus): fed chunks as
// they arrive, it reports elements (namespaces resolved) and their text, and keeps nothing
// but the open elements and the markup token in hand. No DTD is read: `<!DOCTYPE` and
// `<!ENTITY` are refused, and only the five predefined entities and numeric character
// references are expanded, so an entity bomb cannot grow a thing. Comments and processing
// instructions are skipped; CDATA is text. Markup tokens and nesting depth are capped.
//
// Why not FoundationXML's XMLParser: `XMLParser(data:)` hands libxml2 the whole body as one
// chunk, and libxml2 (2.9, without XML_PARSE_HUGE) stops any single chunk past 10,000,000
// bytes with "Huge input lookup" (XML_ERR_INTERNAL_ERROR) after parsing all of it, so a
// listing over 10 MB was refused as "not WebDAV XML"; and it needs the whole body in memory
// first, next to the tree built from it.

#if canImport(Glibc)
import Glibc
#endif

/// A body that is not the well-formed XML the tokenizer reads; `reason` says where and why.
struct XMLStreamError: Error, Sendable, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// What the tokenizer reports, in document order.
protocol XMLStreamHandler {
    /// An element opened; `namespace` is its resolved URI ("" when it has none).
    mutating func startElement(namespace: String, name: String) throws
    /// The innermost open element closed.
    mutating func endElement() throws
    /// Character data of the innermost open element, references already expanded; one
    /// element's text may come in several pieces.
    mutating func text(_ bytes: UnsafeRawBufferPointer) throws
}

/// A push tokenizer: `feed` it every chunk, then `finish` it.
struct XMLTokenizer {
    /// The longest tag, comment-free markup token or reference held while it is incomplete.
    static let maxMarkup = 64 << 10
    /// The deepest nesting of elements accepted.
    static let maxDepth = 64

    private enum State { case text, reference, markup, tag, comment, cdata, instruction }

    private struct Open {
        let qualifiedName: [UInt8]
        /// How many namespace bindings this element declared.
        let bindings: Int
    }

    private var state = State.text
    /// The token being collected: markup after "<", a tag's bytes, a reference after "&".
    private var pending: [UInt8] = []
    /// The quote character a tag is inside of (0: none).
    private var quote: UInt8 = 0
    /// How many of the terminator's leading bytes ("--" of "-->", "]]" of "]]>", "?" of
    /// "?>") the last bytes seen were.
    private var matched = 0
    private var open: [Open] = []
    private var bindings: [(prefix: [UInt8], uri: String)] = []
    private var sawRoot = false
    private var offset = 0

    init() {}

    /// Reads the next bytes of the body.
    mutating func feed<H: XMLStreamHandler>(_ chunk: UnsafeRawBufferPointer, _ handler: inout H) throws {
        guard let start = chunk.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        let end = start + chunk.count
        var p = start
        defer { offset += chunk.count }
        while p < end {
            switch state {
            case .text:
                let next = Self.find(UInt8(ascii: "<"), p, end) ?? end
                let amp = Self.find(UInt8(ascii: "&"), p, next) ?? next
                if amp > p, !open.isEmpty { try handler.text(UnsafeRawBufferPointer(start: p, count: amp - p)) }
                p = amp
                if amp < next {
                    state = .reference
                    pending.removeAll(keepingCapacity: true)
                    p += 1
                } else if next < end {
                    state = .markup
                    pending.removeAll(keepingCapacity: true)
                    p += 1
                }
            case .reference:
                let semicolon = Self.find(UInt8(ascii: ";"), p, end)
                let stop = semicolon ?? end
                pending.append(contentsOf: UnsafeBufferPointer(start: p, count: stop - p))
                if pending.count > 16 { throw error("a reference \"&\(Self.text(pending.prefix(16)))…\" has no end") }
                p = stop
                guard semicolon != nil else { break }
                p += 1
                let expanded = try expand(pending)
                if !open.isEmpty { try expanded.withUnsafeBytes { try handler.text($0) } }
                state = .text
            case .markup:
                // Enough of the token to tell a tag from a comment, CDATA, an instruction or a DTD.
                pending.append(p.pointee)
                p += 1
                try classify()
            case .tag:
                if quote != 0 {
                    let close = Self.find(quote, p, end)
                    let stop = close.map { $0 + 1 } ?? end
                    try collect(p, stop)
                    p = stop
                    if close != nil { quote = 0 }
                    break
                }
                let close = Self.find(UInt8(ascii: ">"), p, end) ?? end
                // The first quote before the end, of either kind: a quoted value may hold ">".
                let double = Self.find(UInt8(ascii: "\""), p, close) ?? close
                let firstQuote = Self.find(UInt8(ascii: "'"), p, double) ?? double
                if firstQuote < close {
                    try collect(p, firstQuote + 1)
                    quote = firstQuote.pointee
                    p = firstQuote + 1
                    break
                }
                try collect(p, close)
                p = close
                if close < end {
                    p += 1
                    state = .text
                    try tag(&handler)
                }
            case .comment, .instruction:
                let terminator: UInt8 = state == .comment ? UInt8(ascii: "-") : UInt8(ascii: "?")
                let needed = state == .comment ? 2 : 1
                let byte = p.pointee
                p += 1
                if byte == UInt8(ascii: ">") && matched >= needed {
                    state = .text
                } else if byte == terminator {
                    matched += 1
                } else {
                    matched = 0
                    // Skip to the next possible terminator at once.
                    p = Self.find(terminator, p, end) ?? end
                }
            case .cdata:
                let byte = p.pointee
                if byte == UInt8(ascii: ">") && matched == 2 {
                    matched = 0
                    state = .text
                    p += 1
                } else if byte == UInt8(ascii: "]") {
                    // Only the last two "]" can start the terminator; one before them is text.
                    if matched == 2 { try emitBrackets(1, &handler) } else { matched += 1 }
                    p += 1
                } else {
                    try emitBrackets(matched, &handler)
                    matched = 0
                    let next = Self.find(UInt8(ascii: "]"), p, end) ?? end
                    try handler.text(UnsafeRawBufferPointer(start: p, count: next - p))
                    p = next
                }
            }
        }
    }

    /// Checks that the body ended where a document may end.
    func finish() throws {
        guard state == .text, open.isEmpty else {
            throw error("the body ended inside \(open.last.map { "<\(Self.text($0.qualifiedName))>" } ?? "markup")")
        }
        guard sawRoot else { throw error("the body holds no element") }
    }

    // MARK: Private

    private mutating func classify() throws {
        let first = pending[0]
        if first == UInt8(ascii: "?") {
            state = .instruction
            matched = 0
        } else if first != UInt8(ascii: "!") {
            state = .tag
            quote = 0
        } else if pending.count >= 3, pending[1] == UInt8(ascii: "-"), pending[2] == UInt8(ascii: "-") {
            state = .comment
            matched = 0
        } else if pending.count >= 8, Array(pending.prefix(8)) == Array("![CDATA[".utf8) {
            guard !open.isEmpty else { throw error("CDATA outside the root element") }
            state = .cdata
            matched = 0
        } else if pending.count >= 8 || !(Array("![CDATA[".utf8).starts(with: pending) || Array("!--".utf8).starts(with: pending)) {
            // <!DOCTYPE, <!ENTITY, <!ELEMENT...: a DTD is never read.
            throw error("it declares a DTD or entities (\"<\(Self.text(pending.prefix(9)))\"), which are refused")
        }
    }

    private mutating func collect(_ from: UnsafePointer<UInt8>, _ to: UnsafePointer<UInt8>) throws {
        pending.append(contentsOf: UnsafeBufferPointer(start: from, count: to - from))
        if pending.count > Self.maxMarkup { throw error("a tag is longer than \(Self.maxMarkup >> 10) KiB") }
    }

    private func emitBrackets<H: XMLStreamHandler>(_ count: Int, _ handler: inout H) throws {
        guard count > 0 else { return }
        try [UInt8](repeating: UInt8(ascii: "]"), count: count).withUnsafeBytes { try handler.text($0) }
    }

    /// Handles the complete tag in `pending` (the bytes between "<" and ">").
    private mutating func tag<H: XMLStreamHandler>(_ handler: inout H) throws {
        var bytes = pending[...]
        if bytes.first == UInt8(ascii: "/") {
            let name = Self.trimmed(bytes.dropFirst())
            guard let top = open.popLast() else { throw error("</\(Self.text(name))> closes nothing") }
            guard top.qualifiedName.elementsEqual(name) else {
                throw error("</\(Self.text(name))> closes <\(Self.text(top.qualifiedName))>")
            }
            bindings.removeLast(top.bindings)
            try handler.endElement()
            return
        }
        let selfClosing = bytes.last == UInt8(ascii: "/")
        if selfClosing { bytes = bytes.dropLast() }
        let nameEnd = bytes.firstIndex(where: Self.isSpace) ?? bytes.endIndex
        let qualifiedName = Array(bytes[..<nameEnd])
        guard !qualifiedName.isEmpty else { throw error("a tag has no name") }
        if open.isEmpty && sawRoot { throw error("a second root element <\(Self.text(qualifiedName))>") }
        guard open.count < Self.maxDepth else { throw error("elements are nested deeper than \(Self.maxDepth)") }

        var declared = 0
        var rest = bytes[nameEnd...]
        while true {
            rest = rest.drop(while: Self.isSpace)
            guard !rest.isEmpty else { break }
            guard let equals = rest.firstIndex(of: UInt8(ascii: "=")) else {
                throw error("an attribute of <\(Self.text(qualifiedName))> has no value")
            }
            let name = Self.trimmed(rest[..<equals])
            rest = rest[rest.index(after: equals)...].drop(while: Self.isSpace)
            guard let quoteChar = rest.first, quoteChar == UInt8(ascii: "\"") || quoteChar == UInt8(ascii: "'"),
                  let close = rest.dropFirst().firstIndex(of: quoteChar)
            else { throw error("an attribute of <\(Self.text(qualifiedName))> is not quoted") }
            let rawValue = rest[rest.index(after: rest.startIndex)..<close]
            rest = rest[rest.index(after: close)...]
            let xmlns = Array("xmlns".utf8)
            if name.elementsEqual(xmlns) || (name.starts(with: xmlns + [UInt8(ascii: ":")])) {
                let prefix = name.count > xmlns.count ? Array(name.dropFirst(xmlns.count + 1)) : []
                bindings.append((prefix, try Self.text(expandAll(rawValue))))
                declared += 1
            }
        }

        let colon = qualifiedName.firstIndex(of: UInt8(ascii: ":"))
        let prefix = colon.map { Array(qualifiedName[..<$0]) } ?? []
        let local = colon.map { Array(qualifiedName[($0 + 1)...]) } ?? qualifiedName
        guard let namespace = bindings.last(where: { $0.prefix == prefix })?.uri ?? (prefix.isEmpty ? "" : nil) else {
            throw error("the prefix of <\(Self.text(qualifiedName))> is not declared")
        }
        sawRoot = true
        open.append(Open(qualifiedName: qualifiedName, bindings: declared))
        try handler.startElement(namespace: namespace, name: Self.text(local))
        if selfClosing {
            open.removeLast()
            bindings.removeLast(declared)
            try handler.endElement()
        }
    }

    /// The bytes a reference stands for (`name` is what came between "&" and ";").
    private func expand<C: Collection>(_ name: C) throws -> [UInt8] where C.Element == UInt8 {
        switch Self.text(name) {
        case "amp": return [UInt8(ascii: "&")]
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "quot": return [UInt8(ascii: "\"")]
        case "apos": return [UInt8(ascii: "'")]
        case let text where text.hasPrefix("#"):
            let digits = text.dropFirst()
            let value = digits.hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
            guard let value, value != 0, let scalar = Unicode.Scalar(value) else {
                throw error("\"&\(text);\" is not a character")
            }
            return Array(String(Character(scalar)).utf8)
        case let text:
            throw error("\"&\(text);\" is not one of XML's predefined entities (no DTD is read)")
        }
    }

    /// An attribute value with its references expanded.
    private func expandAll(_ value: ArraySlice<UInt8>) throws -> [UInt8] {
        var out: [UInt8] = []
        var rest = value
        while let amp = rest.firstIndex(of: UInt8(ascii: "&")) {
            out += rest[..<amp]
            guard let semicolon = rest[amp...].firstIndex(of: UInt8(ascii: ";")) else {
                throw error("a reference in an attribute has no end")
            }
            out += try expand(rest[rest.index(after: amp)..<semicolon])
            rest = rest[rest.index(after: semicolon)...]
        }
        return out + rest
    }

    private func error(_ why: String) -> XMLStreamError {
        XMLStreamError(reason: "\(why), near byte \(offset)")
    }

    private static func find(_ byte: UInt8, _ from: UnsafePointer<UInt8>, _ to: UnsafePointer<UInt8>)
        -> UnsafePointer<UInt8>?
    {
        guard to > from, let hit = memchr(from, Int32(byte), to - from) else { return nil }
        return UnsafePointer(hit.assumingMemoryBound(to: UInt8.self))
    }

    private static func isSpace(_ byte: UInt8) -> Bool { ASCIIText.isSpace(byte) }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> { ASCIIText.trimmed(bytes) }

    static func text<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        String(decoding: Array(bytes), as: UTF8.self)
    }
}
