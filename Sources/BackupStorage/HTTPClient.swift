// The shared HTTP layer of the WebDAV and S3 providers: one attempt after another until a
// response is final. Owns the retry policy (throttling honoured through Retry-After, capped;
// server errors and dropped connections retried a bounded number of times where the request
// may be repeated) and the mapping of failures that mean the same for every provider:
// cannot connect or TLS refused → Offline, throttled past the retries or stalled → Transport.
// What a status means beyond that is each provider's business.

import BackupEngine
import CCurl
import Foundation

/// How the HTTP layer waits, retries and verifies, for one remote.
public struct HTTPSettings: Sendable, Equatable {
    /// A PEM file of CA certificates to trust besides the system's (a NAS with a self-signed
    /// certificate). Verification itself is never turned off.
    public var caFile: String?
    /// Seconds to wait for a TCP (and TLS) connection.
    public var connectTimeout: Double = 15
    /// Seconds with no byte moving before an attempt is given up as stalled.
    public var stallTimeout: Int = 60
    /// The longest wait a `Retry-After` header can ask for; longer requests are cut to this.
    public var retryAfterCap: Double = 10
    /// Retries of a throttled request (429, 503) before it fails as Transport.
    public var throttleRetries = 3
    /// Retries of a repeatable request after a dropped connection.
    public var connectionRetries = 3
    /// Retries of a repeatable request after a stall (each costs `stallTimeout`).
    public var stallRetries = 1
    /// Retries of a repeatable request after a 500, 502 or 504.
    public var serverErrorRetries = 2
    /// The first wait between retries when the server names none; doubled each time.
    public var backoff: Double = 0.5
    /// The most `readBytes` (the marker) takes into memory; a longer body fails as Transport
    /// rather than be allocated. Raise it for a marker of millions of files.
    public var readBytesLimit = 256 << 20

    public init(caFile: String? = nil) {
        self.caFile = caFile
    }
}

/// Sends requests to one server with the retry policy of `HTTPSettings`.
final class HTTPClient: Sendable {
    /// The server as messages name it: scheme, host and port, never credentials.
    let server: String
    let settings: HTTPSettings
    private let loop = CurlLoop.shared

    init(server: String, settings: HTTPSettings) {
        self.server = server
        self.settings = settings
    }

    /// Sends the request `prepare` builds (again for every attempt, so a signature can carry
    /// a fresh date) and returns the first final response, of any status.
    ///
    /// `what` says what the request is for ("uploading a/b.txt"), for messages. Only a
    /// `repeatable` request is sent again after a dropped connection, a stall or a 5xx;
    /// throttling is retried either way, since the server did not act on the request.
    /// Throws `CloudError` (Offline, Transport), `LocalFileError` or `CancellationError`.
    func send(
        _ what: String, repeatable: Bool, _ prepare: () throws -> HTTPRequest
    ) async throws -> HTTPResponse {
        let curlSettings = CurlSettings(
            caFile: settings.caFile, connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
        var throttled = 0, dropped = 0, stalled = 0, failedServer = 0
        while true {
            let request = try prepare()
            let response: HTTPResponse
            do {
                response = try await loop.perform(request, settings: curlSettings)
            } catch let tooLarge as BodyTooLarge {
                throw CloudError(.transport, "\(server) sent a response longer than \(tooLarge.limit) bytes while "
                    + "\(what), more than this request may hold in memory; it was stopped there. Check that the "
                    + "remote URL names the right server")
            } catch let refused as HTTPStreamFailure {
                throw CloudError(.transport, "\(server) sent a response that cannot be read while \(what): "
                    + "\(refused.reason)")
            } catch let failure as CurlFailure {
                switch Self.classify(failure) {
                case .cannotConnect:
                    throw CloudError(.offline, "cannot connect to \(server) while \(what): \(failure.detail); "
                        + "check that the server is running and reachable and that the remote URL is right")
                case .tlsRefused:
                    throw tlsError(failure, what)
                case .dropped where repeatable && dropped < settings.connectionRetries:
                    try await pause(settings.backoff * Double(1 << dropped))
                    dropped += 1
                    continue
                case .dropped:
                    throw CloudError(.transport, "the connection to \(server) broke while \(what) "
                        + "(\(failure.detail))\(dropped > 0 ? ", also after \(dropped) retries" : ""); run again later")
                case .stalled where repeatable && stalled < settings.stallRetries:
                    stalled += 1
                    continue
                case .stalled:
                    throw CloudError(.transport, "\(server) stopped responding for \(settings.stallTimeout) s while "
                        + "\(what)\(stalled > 0 ? ", also after \(stalled) retries" : ""); run again later")
                case .other:
                    throw CloudError(.transport, "the request to \(server) failed while \(what): \(failure.detail)")
                }
            }

            switch response.status {
            case 429, 503:
                guard throttled < settings.throttleRetries else {
                    throw CloudError(.transport, "\(server) is still throttling requests (HTTP \(response.status)) "
                        + "after \(throttled) retries while \(what); wait a while and run again, "
                        + "or lower the number of parallel transfers")
                }
                try await pause(retryDelay(response, retry: throttled))
                throttled += 1
            case let status where [500, 502, 504].contains(status) && repeatable
                && failedServer < settings.serverErrorRetries:
                try await pause(settings.backoff * Double(1 << failedServer))
                failedServer += 1
            default:
                return response
            }
        }
    }

    /// How long to wait before retry number `retry` (from 0) of a throttled request: the
    /// server's Retry-After (seconds or an HTTP date) where it gives one, else the backoff;
    /// never more than the cap.
    func retryDelay(_ response: HTTPResponse, retry: Int, now: Date = Date()) -> Double {
        let fallback = settings.backoff * Double(1 << min(retry, 16))
        var delay = fallback
        if let value = response.header("retry-after")?.trimmingCharacters(in: .whitespaces) {
            if let seconds = Double(value), seconds.isFinite, seconds >= 0 {
                delay = seconds
            } else if let date = Self.httpDate(value) {
                delay = max(0, date.timeIntervalSince(now))
            }
        }
        return min(delay, settings.retryAfterCap)
    }

    // MARK: Private

    private enum FailureClass { case cannotConnect, tlsRefused, dropped, stalled, other }

    private static func classify(_ failure: CurlFailure) -> FailureClass {
        switch failure.code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return .cannotConnect
        case CURLE_OPERATION_TIMEDOUT:
            return failure.connected ? .stalled : .cannotConnect
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_CERTPROBLEM, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return .tlsRefused
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2,
            CURLE_HTTP2_STREAM, CURLE_SEND_FAIL_REWIND:
            return .dropped
        default:
            return .other
        }
    }

    private func tlsError(_ failure: CurlFailure, _ what: String) -> CloudError {
        if failure.code == CURLE_SSL_CACERT_BADFILE {
            return CloudError(.offline, "the ca_file \(settings.caFile ?? "") cannot be used to check \(server) "
                + "(\(failure.detail)); point ca_file at a readable PEM file of CA certificates")
        }
        let remedy = settings.caFile == nil
            ? "if the server uses a self-signed certificate, set ca_file to the certificate of the CA that signed it"
            : "check that ca_file (\(settings.caFile ?? "")) holds the CA that signed the server's certificate"
        return CloudError(.offline, "the TLS connection to \(server) was refused while \(what): \(failure.detail); \(remedy)")
    }

    private func pause(_ seconds: Double) async throws {
        guard seconds > 0 else { return }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
    }

    /// An HTTP date (RFC 9110: IMF-fixdate, RFC 850 or asctime), or nil.
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
