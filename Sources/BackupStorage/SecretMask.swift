// Masking credentials in every message built from a server's response (WebDAV and S3). A
// server may echo what it was sent: the literal secret, or the secret the way some layer
// encoded it — percent-encoded (either hex case, `+` or `%20` for a space), the Basic
// credentials `base64(user:secret)` or `base64(secret)` (standard or URL-safe alphabet, with
// or without padding), JSON-escaped (`\"`, `\\`, `\/`, `\u00e9`) or XML-escaped (`&amp;`,
// `&lt;`, `&quot;`, `&#39;`, `&#xE9;`). Each character of the secret is matched in any of its
// encodings, so a mixture (a JSON string holding a percent-encoded form) is masked too.

import BackupEngine
import Foundation

/// The secrets of one remote, and how to mask them in text that came from its server.
public struct SecretMask: Sendable {
    /// What replaces a secret.
    public static let replacement = "***"

    private let secrets: [String]
    private let user: String?

    /// A mask for `secrets` (empty ones are ignored); `user` adds `base64(user:secret)`.
    public init(secrets: [String?], user: String? = nil) {
        self.secrets = secrets.compactMap { $0 }.filter { !$0.isEmpty }
        self.user = user
    }

    /// `text` with every form of every secret replaced by `***`.
    public func masked(_ text: String) -> String {
        guard !secrets.isEmpty, !text.isEmpty else { return text }
        var result = text
        for literal in literalForms() where result.contains(literal) {
            result = result.replacingOccurrences(of: literal, with: Self.replacement)
        }
        for secret in secrets {
            // The pattern is built from escaped pieces only; should it ever fail to compile,
            // the literal forms above have been masked and nothing else can be done.
            guard let pattern = try? NSRegularExpression(pattern: Self.pattern(secret)) else { continue }
            let range = NSRange(result.startIndex..., in: result)
            result = pattern.stringByReplacingMatches(in: result, range: range, withTemplate: Self.replacement)
        }
        return result
    }

    /// The error with its message masked.
    public func masked(_ error: CloudError) -> CloudError {
        let message = masked(error.message)
        return message == error.message ? error : CloudError(error.kind, message)
    }

    // MARK: Forms

    /// The forms no per-character pattern can match: base64 of the secret and of
    /// `user:secret`, in both alphabets, padded and not; longest first.
    func literalForms() -> [String] {
        var forms = Set<String>()
        for secret in secrets {
            var sources = [secret]
            if let user { sources.append(user + ":" + secret) }
            for source in sources {
                let standard = Data(source.utf8).base64EncodedString()
                let urlSafe = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                for form in [standard, urlSafe] {
                    forms.insert(form)
                    var unpadded = form
                    while unpadded.hasSuffix("=") { unpadded.removeLast() }
                    forms.insert(unpadded)
                }
            }
        }
        return forms.filter { !$0.isEmpty }.sorted { $0.count != $1.count ? $0.count > $1.count : $0 < $1 }
    }

    /// A regular expression matching `secret` with each of its scalars written in any of the
    /// encodings above.
    static func pattern(_ secret: String) -> String {
        secret.unicodeScalars.map { "(?:" + alternatives($0).joined(separator: "|") + ")" }.joined()
    }

    /// The ways one scalar may be written, as regular-expression pieces, longest first.
    static func alternatives(_ scalar: Unicode.Scalar) -> [String] {
        var pieces: [String] = []
        // XML: named and numeric character references.
        let named: [Unicode.Scalar: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&apos;"]
        if let entity = named[scalar] { pieces.append(NSRegularExpression.escapedPattern(for: entity)) }
        pieces.append("&#0*" + String(scalar.value) + ";")
        pieces.append("&#[xX]0*" + anyCaseHex(String(scalar.value, radix: 16)) + ";")
        // JSON: \uXXXX (a surrogate pair beyond the BMP) and the short escapes.
        let units = Array(String(scalar).utf16)
        pieces.append(units.map { "\\\\u" + anyCaseHex(fourDigits($0)) }.joined())
        let short: [Unicode.Scalar: String] = [
            "\"": "\\\\\"", "\\": "\\\\\\\\", "/": "\\\\/", "\u{08}": "\\\\b", "\u{0C}": "\\\\f", "\n": "\\\\n", "\r": "\\\\r", "\t": "\\\\t",
        ]
        if let escape = short[scalar] { pieces.append(escape) }
        // Percent-encoding of each UTF-8 byte, either hex case; `+` for a space.
        pieces.append(String(scalar).utf8.map { "%" + anyCaseHex(String($0, radix: 16).count < 2 ? "0" + String($0, radix: 16) : String($0, radix: 16)) }.joined())
        if scalar == " " { pieces.append("\\+") }
        pieces.append(NSRegularExpression.escapedPattern(for: String(scalar)))
        return pieces
    }

    private static func fourDigits(_ unit: UInt16) -> String {
        let hex = String(unit, radix: 16)
        return String(repeating: "0", count: 4 - hex.count) + hex
    }

    /// Hex digits as a pattern that takes either case ("e9" → "[eE]9").
    private static func anyCaseHex(_ hex: String) -> String {
        hex.lowercased().map { $0.isLetter ? "[\($0)\($0.uppercased())]" : String($0) }.joined()
    }
}
