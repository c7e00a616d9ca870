// A SHA-256 digest held as its 32 bytes. The scan, the state and the plan hold one per file;
// as a hex String each would be a heap allocation of about 100 bytes, most of a large tree's
// memory. Text (lowercase hex) is made only where a digest is written or shown.

/// The 32 bytes of a SHA-256 digest, compared and hashed as four words.
public struct SHA256Digest: Sendable, Hashable, CustomStringConvertible {
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest whose 32 bytes are `bytes`; nil for any other count.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 32 else { return nil }
        words = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) }
    }

    /// The digest spelt by 64 hex digits (either case); nil for any other text.
    public init?(hex: String) {
        var text = hex
        guard let digest = text.withUTF8({ Self(hexDigits: $0) }) else { return nil }
        self = digest
    }

    /// The digest spelt by these 64 ASCII hex digits (either case); nil for other bytes.
    public init?(hexDigits utf8: UnsafeBufferPointer<UInt8>) {
        guard utf8.count == 64 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &words) { raw -> Bool in
            for index in 0..<32 {
                guard let high = Self.nibble(utf8[2 * index]), let low = Self.nibble(utf8[2 * index + 1]) else { return false }
                raw[index] = high << 4 | low
            }
            return true
        }
        guard ok else { return nil }
        self.words = words
    }

    /// Calls `body` with the digest's 32 bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var copy = words
        return try Swift.withUnsafeBytes(of: &copy, body)
    }

    /// Lowercase hex, 64 digits.
    public var hex: String {
        var copy = words
        return Swift.withUnsafeBytes(of: &copy) { bytes in
            String(unsafeUninitializedCapacity: 64) { out in
                for (index, byte) in bytes.enumerated() {
                    out[2 * index] = Self.digits[Int(byte >> 4)]
                    out[2 * index + 1] = Self.digits[Int(byte & 0x0f)]
                }
                return 64
            }
        }
    }

    /// 32 zero bytes: a placeholder where a flag says no digest is held.
    static let zero = SHA256Digest(words: (0, 0, 0, 0))

    private init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    public var description: String { hex }

    public static func == (a: SHA256Digest, b: SHA256Digest) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
