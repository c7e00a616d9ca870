// AWS Signature Version 4 for S3 requests: the canonical request, the string to sign, the
// derived signing key and the Authorization header, on OpenSSL's HMAC and SHA-256. Pure
// functions over values, so the published AWS examples can check every step.

import BackupEngine
import CCrypto
import Foundation

/// Signs S3 requests with AWS Signature Version 4 (header-based authentication).
struct SigV4Signer: Sendable {
    /// The SHA-256 of an empty payload, for requests without a body.
    static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    let accessKeyId: String
    let secretAccessKey: String
    /// Sent as `x-amz-security-token` and signed, for temporary credentials.
    let sessionToken: String?
    let region: String
    let service: String

    /// The headers to add to a request: `x-amz-date`, `x-amz-content-sha256`, the session
    /// token where there is one, and `Authorization`.
    ///
    /// `path` is the URI-encoded path as sent (S3 does not normalise or double-encode it);
    /// `query` holds decoded names and values; `headers` are the other headers to sign
    /// (`host` must be among them).
    func headersToAdd(
        method: String, path: String, query: [(String, String)], headers: [(String, String)],
        payloadHash: String, date: Date
    ) -> [(String, String)] {
        let stamp = Self.timestamp(date)
        var added: [(String, String)] = [("x-amz-date", stamp), ("x-amz-content-sha256", payloadHash)]
        if let sessionToken { added.append(("x-amz-security-token", sessionToken)) }
        let authorization = self.authorization(
            method: method, path: path, query: query, headers: headers + added, payloadHash: payloadHash,
            timestamp: stamp)
        added.append(("Authorization", authorization))
        return added
    }

    /// The Authorization header for a request whose signed headers already include
    /// `x-amz-date` (equal to `timestamp`).
    func authorization(
        method: String, path: String, query: [(String, String)], headers: [(String, String)],
        payloadHash: String, timestamp: String
    ) -> String {
        let (canonical, signedHeaders) = Self.canonicalRequest(
            method: method, path: path, query: query, headers: headers, payloadHash: payloadHash)
        let day = String(timestamp.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let toSign = Self.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonical)
        let signature = Self.hex(Self.hmac(key: signingKey(day: day), Array(toSign.utf8)))
        return "AWS4-HMAC-SHA256 Credential=\(accessKeyId)/\(scope), SignedHeaders=\(signedHeaders), "
            + "Signature=\(signature)"
    }

    /// The key derived from the secret for one day, region and service.
    func signingKey(day: String) -> [UInt8] {
        var key = Self.hmac(key: Array("AWS4\(secretAccessKey)".utf8), Array(day.utf8))
        for part in [region, service, "aws4_request"] { key = Self.hmac(key: key, Array(part.utf8)) }
        return key
    }

    // MARK: The steps, as AWS defines them

    /// The canonical request and its signed-header list.
    static func canonicalRequest(
        method: String, path: String, query: [(String, String)], headers: [(String, String)], payloadHash: String
    ) -> (request: String, signedHeaders: String) {
        // Header names are case-insensitive: lowercased, values trimmed with inner runs of
        // spaces folded, and repeated names joined with commas in their order of appearance.
        var merged: [String: [String]] = [:]
        for (name, value) in headers {
            merged[name.lowercased(), default: []].append(foldSpaces(value))
        }
        let names = merged.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(merged[$0, default: []].joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let encoded: [(name: String, value: String)] = query.map {
            (uriEncode($0.0, keepSlash: false), uriEncode($0.1, keepSlash: false))
        }
        let sorted = encoded.sorted { $0.name == $1.name ? $0.value < $1.value : $0.name < $1.name }
        let canonicalQuery = sorted.map { $0.name + "=" + $0.value }.joined(separator: "&")
        let lines: [String] = [method, path.isEmpty ? "/" : path, canonicalQuery, canonicalHeaders, signedHeaders,
                               payloadHash]
        let request = lines.joined(separator: "\n")
        return (request, signedHeaders)
    }

    static func stringToSign(timestamp: String, scope: String, canonicalRequest: String) -> String {
        "AWS4-HMAC-SHA256\n\(timestamp)\n\(scope)\n\(SHA256Hasher.hex(Data(canonicalRequest.utf8)))"
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC, computed by hand: a DateFormatter is neither cheap
    /// nor safe to share between threads on every platform.
    static func timestamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)\(two(month))\(two(day))T\(two(secondOfDay / 3600))\(two(secondOfDay % 3600 / 60))"
            + "\(two(secondOfDay % 60))Z"
    }

    /// Percent-encodes everything but the unreserved characters (A–Z a–z 0–9 - _ . ~), and
    /// "/" when `keepSlash`, as SigV4 and S3 key paths require.
    static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepSlash:
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0f)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { keyBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                _ = HMAC(backup_evp_sha256(), keyBuffer.baseAddress, Int32(keyBuffer.count),
                         messageBuffer.baseAddress, messageBuffer.count, &digest, &length)
            }
        }
        return Array(digest.prefix(Int(length)))
    }

    /// Lowercase hex of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func foldSpaces(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}
