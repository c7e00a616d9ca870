// One HTTP exchange on libcurl, and the single thread that drives them all. Owns the easy
// handles, the multi handle (whose connection cache gives keep-alive reuse across requests),
// the C callbacks that stream request bodies from open files and response bodies into them,
// and the per-attempt curl options: timeouts, TLS verification, buffers. Retries, Retry-After
// and the meaning of statuses live one level up, in HTTPClient.swift.

import BackupEngine
import CCurl
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a request sends.
enum HTTPBody: Sendable {
    case empty
    case data(Data)
    /// `length` bytes of the open file `fd` from `offset`, read with pread so that a retry (or a
    /// rewind libcurl asks for) can start over; `path` names the file in errors.
    case file(fd: Int32, path: String, offset: Int64, length: Int64)

    var length: Int64 {
        switch self {
        case .empty: return 0
        case .data(let data): return Int64(data.count)
        case .file(_, _, _, let length): return length
        }
    }
}

/// Where a successful (2xx) response body goes; any other body is kept in memory for the
/// error message, its first `errorBodyLimit` bytes only.
enum HTTPSink: Sendable {
    /// In memory, up to `limit` bytes: a longer body stops the transfer (`BodyTooLarge`), so a
    /// server can never make this process allocate more than the caller allowed.
    case memory(limit: Int)
    /// The open file `fd`, truncated at the start of each attempt; `path` names it in errors.
    /// With a `limit`, the transfer stops at the first byte past it (`SinkOverflow`).
    /// `onBytes` gets the bytes written so far in this attempt.
    case file(fd: Int32, path: String, limit: Int64? = nil, onBytes: (@Sendable (Int64) -> Void)? = nil)
    /// Fed to `stream` chunk by chunk as it arrives; nothing of it is kept here.
    case stream(any HTTPBodyStream)

    /// The limit of a body nobody reads beyond a few fields (MOVE, MKCOL, PUT answers).
    static let smallBodyLimit = 64 << 10
    /// The most of an error body kept for its message.
    static let errorBodyLimit = 64 << 10
}

/// Takes a 2xx body as libcurl delivers it, on the HTTP thread; the task that sent the
/// request reads what it gathered after the response came back.
protocol HTTPBodyStream: AnyObject, Sendable {
    /// Forgets what an earlier attempt fed it: called before each attempt.
    func reset()
    /// The next bytes of the body; throwing stops the transfer (`HTTPStreamFailure`).
    func consume(_ bytes: UnsafeRawBufferPointer) throws
    /// The body ended; throwing fails the response (a truncated or malformed body).
    func finish() throws
}

/// A 2xx body longer than its memory sink's limit; the transfer was stopped there.
struct BodyTooLarge: Error, Sendable {
    let limit: Int
}

/// A streamed 2xx body its consumer refused; `reason` says why.
struct HTTPStreamFailure: Error, Sendable {
    let reason: String
}

/// A 2xx body that went past its sink's limit; the transfer was stopped there.
struct SinkOverflow: Error, Sendable {
    /// The bytes written before the transfer was stopped (the limit).
    let written: Int64
}

/// One request, ready to send.
struct HTTPRequest: Sendable {
    var method: String
    /// The full URL, already percent-encoded, never carrying credentials.
    var url: String
    var headers: [(String, String)] = []
    var body: HTTPBody = .empty
    var sink: HTTPSink = .memory(limit: HTTPSink.smallBodyLimit)
    /// Told the bytes of `body` sent so far in this attempt, as they go (what libcurl's
    /// progress says went out, not what it read ahead into its buffer).
    var onSent: (@Sendable (Int64) -> Void)?
    /// HTTP Basic credentials, sent with the first request rather than after a challenge.
    var basicAuth: (user: String, password: String)?
}

/// A response of any status.
struct HTTPResponse: Sendable {
    var status: Int
    /// Header values by lowercased name; repeated headers are joined with ", ".
    var headers: [String: String]
    /// The body, unless it went to a file sink.
    var body: Data

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The start of the body as text, for error messages.
    var bodyExcerpt: String {
        let text = String(decoding: body.prefix(2048), as: UTF8.self)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Timeouts, TLS and buffer settings applied to every attempt.
struct CurlSettings: Sendable {
    /// A PEM file of CA certificates to trust (a NAS with a self-signed certificate).
    var caFile: String?
    var connectTimeout: Double
    /// Seconds with no byte moving in either direction before the attempt is abandoned.
    var stallTimeout: Int
}

/// An attempt that got no HTTP response.
struct CurlFailure: Error, Sendable {
    let code: CURLcode
    /// libcurl's detailed message for this failure.
    let detail: String
    /// Whether a TCP connection was made before it failed.
    let connected: Bool
}

// MARK: The loop

/// The one thread that runs every transfer of the process through one libcurl multi handle.
///
/// Blocking in `curl_easy_perform` on Swift's cooperative threads (two on this machine) would
/// starve every other task; one event loop never blocks them and keeps idle connections in one
/// cache for reuse.
final class CurlLoop: @unchecked Sendable {
    // @unchecked: `multi` and everything in `run()` is touched only by the loop thread; the
    // other threads reach it only through `incoming` (under its Mutex) and curl_multi_wakeup,
    // which libcurl documents as safe to call from any thread.

    static let shared = CurlLoop()

    private let multi: UnsafeMutableRawPointer
    private let incoming = Mutex<[CurlTransfer]>([])

    private init() {
        curl_global_init(backup_curl_global_default())
        // Without a multi handle nothing can be sent; malloc failing here leaves no way on.
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        let thread = Thread { [self] in self.run() }
        thread.name = "backup-http"
        thread.start()
    }

    /// Runs `request` once; throws `CurlFailure`, `LocalFileError` or `CancellationError`.
    func perform(_ request: HTTPRequest, settings: CurlSettings) async throws -> HTTPResponse {
        let transfer = CurlTransfer(request: request, settings: settings)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, Error>) in
                transfer.continuation = continuation
                incoming.withLock { $0.append(transfer) }
                curl_multi_wakeup(multi)
            }
        } onCancel: {
            transfer.cancelled.store(true, ordering: .relaxed)
            curl_multi_wakeup(multi)
        }
    }

    private func run() {
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        var idle: [UnsafeMutableRawPointer] = []
        while true {
            for transfer in incoming.withLock({ queue in defer { queue.removeAll() }; return queue }) {
                guard let easy = idle.popLast() ?? curl_easy_init() else {
                    transfer.finish(.failure(CurlFailure(code: CURLE_OUT_OF_MEMORY, detail: "out of memory",
                                                         connected: false)))
                    continue
                }
                if let failure = transfer.configure(easy) {
                    curl_easy_cleanup(easy)
                    transfer.finish(.failure(failure))
                    continue
                }
                curl_multi_add_handle(multi, easy)
                active[easy] = transfer
            }

            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard backup_curl_msg_is_done(message) != 0, let easy = backup_curl_msg_handle(message) else { continue }
                let code = backup_curl_msg_result(message)
                curl_multi_remove_handle(multi, easy)
                if let transfer = active.removeValue(forKey: easy) {
                    transfer.complete(code, easy)
                }
                // curl_easy_reset keeps the handle's caches; the live connections stay in the
                // multi handle's cache for the next request to the same server. A handle whose
                // transfer failed is not reused: after a failed name lookup, libcurl 7.88 refuses
                // CURLOPT_BUFFERSIZE on it ("bad argument") for every later request.
                if code == CURLE_OK && idle.count < 32 {
                    curl_easy_reset(easy)
                    idle.append(easy)
                } else {
                    curl_easy_cleanup(easy)
                }
            }
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }
}

// MARK: One transfer

/// The state of one attempt, shared with libcurl's callbacks through an unmanaged pointer.
final class CurlTransfer: @unchecked Sendable {
    // @unchecked: the submitting task sets `continuation` before handing the transfer to the
    // loop (through the loop's Mutex, which orders the accesses); from then on only the loop
    // thread touches the mutable fields, until `finish` resumes the task with a Sendable value.
    // `cancelled` is atomic because the cancelling task sets it from another thread.

    let request: HTTPRequest
    let settings: CurlSettings
    var continuation: CheckedContinuation<HTTPResponse, Error>?
    let cancelled = Atomic<Bool>(false)

    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var uploadPosition: Int64 = 0
    /// The most of the body `onSent` was told of.
    private var reportedUpload: Int64 = 0
    private var status = 0
    private var headers: [String: String] = [:]
    private var body = Data()
    private var sinkWritten: Int64 = 0
    private var localError: LocalFileError?
    private var overflowed = false
    private var bodyTooLarge: Int?
    private var streamFailure: HTTPStreamFailure?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    init(request: HTTPRequest, settings: CurlSettings) {
        self.request = request
        self.settings = settings
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Sets every option for this attempt on `easy`; a failure means the attempt cannot start.
    func configure(_ easy: UnsafeMutableRawPointer) -> CurlFailure? {
        if case .file(let fd, let path, _, _) = request.sink, ftruncate(fd, 0) != 0 {
            localError = LocalFileError(path: path, message: "cannot write the local file \(path): \(String(cString: strerror(errno)))")
            return CurlFailure(code: CURLE_WRITE_ERROR, detail: "", connected: false)
        }
        if case .stream(let stream) = request.sink { stream.reset() }
        let me = Unmanaged.passUnretained(self).toOpaque()
        var failed: CURLcode = CURLE_OK
        var failedLine = 0
        func check(_ code: CURLcode, line: Int = #line) {
            if code != CURLE_OK && failed == CURLE_OK { failed = code; failedLine = line }
        }

        check(backup_curl_setopt_string(easy, CURLOPT_URL, request.url))
        check(backup_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        check(backup_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        check(backup_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1))
        check(backup_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        check(backup_curl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
        check(backup_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(settings.connectTimeout * 1000)))
        check(backup_curl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
        check(backup_curl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, settings.stallTimeout)))
        // TLS verification is never turned off; a self-signed server is trusted through ca_file.
        check(backup_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        check(backup_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        if let caFile = settings.caFile { check(backup_curl_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
        check(backup_curl_setopt_long(easy, CURLOPT_BUFFERSIZE, 512 << 10))
        check(backup_curl_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2 << 20))

        switch request.method {
        case "GET": break
        case "HEAD": check(backup_curl_setopt_long(easy, CURLOPT_NOBODY, 1))
        default: check(backup_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
        }
        let sendsBody = request.method == "PUT" || request.method == "POST" || request.body.length > 0
        var headerLines = request.headers.map { "\($0.0): \($0.1)" }
        if sendsBody {
            check(backup_curl_setopt_long(easy, CURLOPT_UPLOAD, 1))
            check(backup_curl_setopt_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(request.body.length)))
            check(backup_curl_setopt_data_callback(easy, CURLOPT_READFUNCTION, curlRead))
            check(backup_curl_setopt_pointer(easy, CURLOPT_READDATA, me))
            check(backup_curl_setopt_seek_callback(easy, curlSeek))
            check(backup_curl_setopt_pointer(easy, CURLOPT_SEEKDATA, me))
            // "Expect: 100-continue" costs a round trip per small file; for a large one it lets
            // the server refuse (401, 507) before the body is sent.
            if request.body.length < 1 << 20 { headerLines.append("Expect:") }
        }
        for line in headerLines { headerList = curl_slist_append(headerList, line) }
        check(backup_curl_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList))
        if let auth = request.basicAuth {
            check(backup_curl_setopt_long(easy, CURLOPT_HTTPAUTH, backup_curl_auth_basic()))
            check(backup_curl_setopt_string(easy, CURLOPT_USERNAME, auth.user))
            check(backup_curl_setopt_string(easy, CURLOPT_PASSWORD, auth.password))
        }
        check(backup_curl_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, curlHeader))
        check(backup_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, me))
        check(backup_curl_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, curlWrite))
        check(backup_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, me))
        check(backup_curl_setopt_long(easy, CURLOPT_NOPROGRESS, 0))
        check(backup_curl_setopt_xferinfo_callback(easy, curlProgress))
        check(backup_curl_setopt_pointer(easy, CURLOPT_XFERINFODATA, me))
        if failed != CURLE_OK {
            return CurlFailure(code: failed, detail: "\(String(cString: curl_easy_strerror(failed))) (setting up the "
                + "request, HTTPTransfer.swift line \(failedLine))", connected: false)
        }
        return nil
    }

    /// Called by the loop when libcurl is done with this attempt.
    func complete(_ code: CURLcode, _ easy: UnsafeMutableRawPointer) {
        if let localError {
            finish(.failure(localError))
        } else if overflowed {
            finish(.failure(SinkOverflow(written: sinkWritten)))
        } else if let bodyTooLarge {
            finish(.failure(BodyTooLarge(limit: bodyTooLarge)))
        } else if let streamFailure {
            finish(.failure(streamFailure))
        } else if cancelled.load(ordering: .relaxed) {
            finish(.failure(CancellationError()))
        } else if code == CURLE_OK {
            if (200..<300).contains(status), case .stream(let stream) = request.sink {
                do {
                    try stream.finish()
                } catch {
                    return finish(.failure(HTTPStreamFailure(reason: String(describing: error))))
                }
            }
            // Answered: the whole body went out, whatever the last progress call saw.
            uploaded(request.body.length)
            finish(.success(HTTPResponse(status: status, headers: headers, body: body)))
        } else {
            // A reused connection reports no connect time, so "connected" is read from the time
            // the transfer itself started.
            var started: curl_off_t = 0
            backup_curl_getinfo_offset(easy, CURLINFO_PRETRANSFER_TIME_T, &started)
            let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            finish(.failure(CurlFailure(code: code, detail: detail,
                                        connected: started > 0 || detail.hasPrefix("Operation too slow"))))
        }
    }

    func finish(_ result: Result<HTTPResponse, Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }

    // MARK: Callbacks (loop thread)

    fileprivate func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        let remaining = request.body.length - uploadPosition
        guard remaining > 0 else { return 0 }
        let wanted = Int(min(Int64(capacity), remaining))
        switch request.body {
        case .empty:
            return 0
        case .data(let data):
            let start = data.startIndex + Int(uploadPosition)
            data.copyBytes(to: UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: UInt8.self),
                           from: start..<(start + wanted))
            uploadPosition += Int64(wanted)
            return wanted
        case .file(let fd, let path, let offset, _):
            while true {
                let count = pread(fd, buffer, wanted, off_t(offset + uploadPosition))
                if count < 0 && errno == EINTR { continue }
                if count < 0 {
                    localError = LocalFileError(
                        path: path, message: "cannot read the local file \(path): \(String(cString: strerror(errno)))")
                    return backup_curl_readfunc_abort()
                }
                if count == 0 {
                    localError = LocalFileError(
                        path: path, message: "cannot read the local file \(path): it became shorter while it was uploaded")
                    return backup_curl_readfunc_abort()
                }
                uploadPosition += Int64(count)
                return count
            }
        }
    }

    /// libcurl's count of the body sent so far: told to `onSent` when it grew.
    fileprivate func uploaded(_ count: Int64) {
        guard let onSent = request.onSent, count > reportedUpload else { return }
        reportedUpload = count
        onSent(count)
    }

    fileprivate func seek(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= request.body.length else { return backup_curl_seekfunc_fail() }
        uploadPosition = offset
        return backup_curl_seekfunc_ok()
    }

    fileprivate func header(_ line: UnsafeBufferPointer<UInt8>) {
        let text = ASCIIText.trimmedString(line)
        if text.hasPrefix("HTTP/") {
            // A new status line (after "100 Continue", or an interim response) starts afresh.
            let fields = text.split(separator: " ", maxSplits: 2)
            status = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
            headers = [:]
        } else if let colon = text.firstIndex(of: ":") {
            let name = ASCIIText.trimmedString(text.utf8[..<colon]).lowercased()
            let value = ASCIIText.trimmedString(text.utf8[text.index(after: colon)...])
            if let existing = headers[name] { headers[name] = existing + ", " + value } else { headers[name] = value }
        }
    }

    fileprivate func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        if (200..<300).contains(status), case .stream(let stream) = request.sink {
            do {
                try stream.consume(bytes)
            } catch {
                streamFailure = HTTPStreamFailure(reason: String(describing: error))
                return 0  // CURLE_WRITE_ERROR: the rest is not read
            }
            return bytes.count
        }
        if (200..<300).contains(status), case .memory(let limit) = request.sink {
            guard bytes.count <= limit - body.count else {
                bodyTooLarge = limit
                return 0  // CURLE_WRITE_ERROR: nothing past the limit is read or kept
            }
            body.append(contentsOf: bytes)
            return bytes.count
        }
        if (200..<300).contains(status), case .file(let fd, let path, let limit, let onBytes) = request.sink {
            if let limit, Int64(bytes.count) > limit - sinkWritten {
                overflowed = true
                return 0  // CURLE_WRITE_ERROR: nothing past the limit is read or written
            }
            var done = 0
            while done < bytes.count {
                guard let base = bytes.baseAddress else { return 0 }
                let count = pwrite(fd, base + done, bytes.count - done, off_t(sinkWritten))
                if count < 0 && errno == EINTR { continue }
                if count <= 0 {
                    localError = LocalFileError(
                        path: path, message: "cannot write the local file \(path): \(String(cString: strerror(errno)))")
                    return 0
                }
                done += count
                sinkWritten += Int64(count)
            }
            onBytes?(sinkWritten)
            return bytes.count
        }
        // Any other body is for the message: its start is kept, the rest read and dropped.
        let room = HTTPSink.errorBodyLimit - body.count
        if room > 0 { body.append(contentsOf: bytes.prefix(room)) }
        return bytes.count
    }
}

// MARK: C entry points

private func transfer(_ userdata: UnsafeMutableRawPointer?) -> CurlTransfer? {
    userdata.map { Unmanaged<CurlTransfer>.fromOpaque($0).takeUnretainedValue() }
}

private func curlRead(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                      _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let transfer = transfer(userdata) else { return backup_curl_readfunc_abort() }
    return transfer.read(into: buffer, capacity: size * count)
}

private func curlSeek(_ userdata: UnsafeMutableRawPointer?, _ offset: curl_off_t, _ origin: Int32) -> Int32 {
    transfer(userdata)?.seek(to: Int64(offset), origin: origin) ?? backup_curl_seekfunc_fail()
}

private func curlHeader(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                        _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let transfer = transfer(userdata) else { return 0 }
    buffer.withMemoryRebound(to: UInt8.self, capacity: size * count) {
        transfer.header(UnsafeBufferPointer(start: $0, count: size * count))
    }
    return size * count
}

private func curlWrite(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                       _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let transfer = transfer(userdata) else { return 0 }
    return transfer.write(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private func curlProgress(_ userdata: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloaded: curl_off_t,
                          _ uploadTotal: curl_off_t, _ uploaded: curl_off_t) -> Int32 {
    guard let transfer = transfer(userdata) else { return 0 }
    if uploaded > 0 { transfer.uploaded(Int64(uploaded)) }
    // Non-zero aborts the transfer with CURLE_ABORTED_BY_CALLBACK: how a cancelled task stops it.
    return transfer.cancelled.load(ordering: .relaxed) ? 1 : 0
}
