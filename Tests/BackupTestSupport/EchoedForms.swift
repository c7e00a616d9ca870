// The forms in which a server might echo a credential back: each written out by hand (not
// by SecretMask), for the masking tests of the providers and of the command line. The
// password holds a character that changes under each encoding: "@", " ", "&", "\"", "/",
// "<", ">", "+", "é", "'", "\\" and "?".

import Foundation

/// The forms of a secret a server might echo, each written out by hand (not by SecretMask).
public enum EchoedForms {
    public static let user = "alice"
    public static let password = "p@ss w&rd\"/<x>+é'\\>?~z"

    /// Standard, URL-safe, and both without padding (this password's base64 holds "+" and "/"
    /// and ends in "=", so the four differ).
    public static func base64(_ text: String) -> [String] {
        let standard = Data(text.utf8).base64EncodedString()
        let urlSafe = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return [standard, urlSafe, String(standard.prefix { $0 != "=" }), String(urlSafe.prefix { $0 != "=" })]
    }

    /// Name → form.
    public static let all: [(String, String)] = [
        ("literal", password),
        ("percent, upper hex", "p%40ss%20w%26rd%22%2F%3Cx%3E%2B%C3%A9%27%5C%3E%3F~z"),
        ("percent, lower hex", "p%40ss%20w%26rd%22%2f%3cx%3e%2b%c3%a9%27%5c%3e%3f~z"),
        ("form encoding, + for space", "p%40ss+w%26rd%22%2F%3Cx%3E%2B%C3%A9%27%5C%3E%3F~z"),
        ("percent, only some characters", "p%40ss%20w&rd%22/%3Cx%3E+%C3%A9'%5C>?~z"),
        ("base64 user:pass", base64(user + ":" + password)[0]),
        ("base64url user:pass", base64(user + ":" + password)[1]),
        ("base64 user:pass unpadded", base64(user + ":" + password)[2]),
        ("base64url user:pass unpadded", base64(user + ":" + password)[3]),
        ("base64 pass", base64(password)[0]),
        ("base64url pass", base64(password)[1]),
        ("base64 pass unpadded", base64(password)[2]),
        ("base64url pass unpadded", base64(password)[3]),
        ("JSON", "p@ss w&rd\\\"/<x>+é'\\\\>?~z"),
        ("JSON with \\/", "p@ss w&rd\\\"\\/<x>+é'\\\\>?~z"),
        ("JSON \\u escapes", "p@ss w\\u0026rd\\\"\\/\\u003cx\\u003e+\\u00e9\\u0027\\\\\\u003e?~z"),
        ("XML", "p@ss w&amp;rd&quot;/&lt;x&gt;+é&#39;\\&gt;?~z"),
        ("XML &apos; and numeric", "p@ss w&#38;rd&#x22;/&lt;x&gt;+&#xE9;&apos;\\&gt;?~z"),
    ]
}
