// The shared HTTP layer on its own, against the fault proxy as a bare fake server and a real
// rclone server: Retry-After (seconds, dates, the cap), throttling and 5xx retries counted,
// dropped connections retried only where a request may be repeated, stalls that time out,
// cancellation, refused connections, and streaming uploads from a range of a file.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class HTTPTests: XCTestCase {
    // MARK: Retry-After

    func testRetryDelayHonoursSecondsAndDatesAndIsCapped() {
        var settings = HTTPSettings()
        settings.backoff = 0.5
        let client = HTTPClient(server: "http://x", settings: settings)
        func response(_ retryAfter: String?) -> HTTPResponse {
            HTTPResponse(status: 429, headers: retryAfter.map { ["retry-after": $0] } ?? [:], body: Data())
        }
        XCTAssertEqual(client.retryDelay(response("3"), retry: 0), 3)
        XCTAssertEqual(client.retryDelay(response("3600"), retry: 0), 10, "capped at 10 s")
        XCTAssertEqual(client.retryDelay(response(nil), retry: 0), 0.5)
        XCTAssertEqual(client.retryDelay(response(nil), retry: 2), 2)
        XCTAssertEqual(client.retryDelay(response("soon"), retry: 1), 1, "an unreadable value falls back to the backoff")
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let inFive = HTTPClient.httpDate("Tue, 14 Nov 2023 22:13:25 GMT")
        XCTAssertEqual(inFive?.timeIntervalSince1970, 1_700_000_005)
        XCTAssertEqual(client.retryDelay(response("Tue, 14 Nov 2023 22:13:25 GMT"), retry: 0, now: now), 5, accuracy: 0.001)
        XCTAssertEqual(client.retryDelay(response("Tue, 14 Nov 2023 22:00:00 GMT"), retry: 0, now: now), 0,
                       "a date in the past means now")
    }

    // MARK: Retries against a fake server

    func testThrottlingIsRetriedThreeTimesThenTransport() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", times: 10, .status(429, headers: ["Retry-After": "0"]))
        let client = makeClient(proxy)
        do {
            _ = try await client.send("testing", repeatable: true) { request(proxy) }
            XCTFail("throttled for good, yet it succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("429") && error.message.contains("127.0.0.1:\(proxy.port)"), error.message)
        }
        XCTAssertEqual(proxy.log().count, 4)
    }

    func testRetryAfterIsWaitedBeforeTheRetry() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", .status(503, headers: ["Retry-After": "1"]))
        proxy.add("*", .status(200, body: "fine"))
        let start = Date()
        let response = try await makeClient(proxy).send("testing", repeatable: false) { request(proxy) }
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "fine")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 1)
    }

    func testServerErrorsAreRetriedOnlyForRepeatableRequests() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", times: 10, .status(502))
        let repeated = try await makeClient(proxy).send("testing", repeatable: true) { request(proxy) }
        XCTAssertEqual(repeated.status, 502)
        XCTAssertEqual(proxy.log().count, 3, "one try and two retries")
        proxy.clear()
        proxy.add("*", times: 10, .status(502))
        _ = try await makeClient(proxy).send("testing", repeatable: false) { request(proxy) }
        XCTAssertEqual(proxy.log().count, 1)
    }

    func testDroppedConnectionsAreRetriedOnlyForRepeatableRequests() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", times: 2, .drop)
        proxy.add("*", .status(204))
        let response = try await makeClient(proxy).send("testing", repeatable: true) { request(proxy) }
        XCTAssertEqual(response.status, 204)
        XCTAssertEqual(proxy.log().count, 3)

        proxy.clear()
        proxy.add("*", .drop)
        do {
            _ = try await makeClient(proxy).send("posting once", repeatable: false) { request(proxy) }
            XCTFail("a dropped one-shot request succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("posting once"), error.message)
        }
        XCTAssertEqual(proxy.log().count, 1)
    }

    func testAStalledResponseTimesOut() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", times: 5, .stall(seconds: 60))
        var settings = HTTPSettings()
        settings.stallTimeout = 1
        settings.stallRetries = 0
        let start = Date()
        do {
            _ = try await HTTPClient(server: proxy.address, settings: settings).send("waiting", repeatable: true) {
                request(proxy)
            }
            XCTFail("a stalled response succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("stopped responding"), error.message)
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
    }

    func testCancellingATaskStopsItsTransferPromptly() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", .stall(seconds: 60))
        let client = makeClient(proxy)
        let url = proxy.address + "/thing"
        let task = Task { try await client.send("waiting", repeatable: true) { HTTPRequest(method: "GET", url: url) } }
        try await Task.sleep(nanoseconds: 300_000_000)
        let start = Date()
        task.cancel()
        let result = await task.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertLessThan(Date().timeIntervalSince(start), 2.5)
    }

    func testARefusedConnectionIsOffline() async throws {
        let port = try RcloneServer.freePort()
        do {
            _ = try await HTTPClient(server: "http://127.0.0.1:\(port)", settings: HTTPSettings())
                .send("connecting", repeatable: true) { HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/") }
            XCTFail("nothing listens, yet it succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .offline)
        }
    }

    func testAnUnresolvableHostIsOffline() async throws {
        do {
            _ = try await HTTPClient(server: "http://no-such-host.invalid", settings: HTTPSettings())
                .send("connecting", repeatable: true) { HTTPRequest(method: "GET", url: "http://no-such-host.invalid/") }
            XCTFail("an unresolvable host answered")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .offline)
            XCTAssertTrue(error.message.contains("no-such-host.invalid"), error.message)
        }
    }

    // MARK: Streaming against a real server

    func testUploadsARangeOfAFileAndDownloadsIntoAFile() async throws {
        let dir = try TempDir("http-stream")
        addTeardownBlock { dir.cleanup() }
        try dir.makeFolder("served")
        let server = try RcloneServer(.webdav, root: dir.path("served"))
        addTeardownBlock { server.stop() }
        let data = StorageContract.randomData(count: 5 << 20)
        let source = try dir.write("source.bin", data)
        let fd = open(source, O_RDONLY)
        defer { close(fd) }
        let client = HTTPClient(server: server.address, settings: HTTPSettings())
        let auth = (user: server.user, password: server.secret)
        let put = try await client.send("uploading", repeatable: true) {
            HTTPRequest(method: "PUT", url: server.address + "/range.bin",
                        body: .file(fd: fd, path: source, offset: 1_000_000, length: 3_000_000), basicAuth: auth)
        }
        XCTAssertEqual(put.status, 201)
        let target = open(dir.path("target.bin"), O_RDWR | O_CREAT, 0o600)
        defer { close(target) }
        let get = try await client.send("downloading", repeatable: true) {
            HTTPRequest(method: "GET", url: server.address + "/range.bin", sink: .file(fd: target, path: "target"), basicAuth: auth)
        }
        XCTAssertEqual(get.status, 200)
        XCTAssertTrue(get.body.isEmpty, "a body sent to a file is not also kept in memory")
        let downloaded = try Data(contentsOf: URL(fileURLWithPath: dir.path("target.bin")))
        XCTAssertTrue(downloaded == data[1_000_000..<4_000_000], "the range did not round-trip")
    }

    func testAnUnreadableUploadSourceIsALocalFileError() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", .status(201))
        let dir = try TempDir("http-local")
        addTeardownBlock { dir.cleanup() }
        let source = try dir.write("short.bin", Data(count: 10))
        let fd = open(source, O_RDONLY)
        defer { close(fd) }
        do {
            _ = try await makeClient(proxy).send("uploading", repeatable: true) {
                HTTPRequest(method: "PUT", url: proxy.address + "/x", body: .file(fd: fd, path: source, offset: 0, length: 100))
            }
            XCTFail("an upload of more bytes than the file has succeeded")
        } catch let error as LocalFileError {
            XCTAssertEqual(error.path, source)
            XCTAssertTrue(error.message.contains("shorter"), error.message)
        }
    }

    // MARK: Helpers

    func testAnErrorBodyIsKeptOnlyUpTo64KiB() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", .status(400, body: String(repeating: "e", count: 1 << 20)))
        let response = try await makeClient(proxy).send("testing", repeatable: false) { request(proxy) }
        XCTAssertEqual(response.status, 400)
        XCTAssertEqual(response.body.count, 64 << 10, "a 1 MiB error body, kept for its message")
    }

    func testAStreamedBodyIsFedInChunksAndItsRefusalIsTransport() async throws {
        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("*", .propfindEntries(count: 3000, padding: 100, prefix: "/f"))
        let stream = MultistatusStream(endpoint: WebDAVEndpoint(secure: false, host: "127.0.0.1", port: proxy.port, folder: ["f"]))
        let response = try await makeClient(proxy).send("testing", repeatable: false) {
            HTTPRequest(method: "PROPFIND", url: proxy.address + "/f/", sink: .stream(stream))
        }
        XCTAssertEqual(response.status, 207)
        XCTAssertEqual(response.body.count, 0, "nothing of a streamed body is kept")
        XCTAssertEqual(stream.entries.count, 3001, "the folder and its files")
        XCTAssertEqual(stream.entries.last?.remoteId, "\"e2999\"")

        proxy.add("*", .status(200, body: "<html><body>a login page</body></html>"))
        do {
            _ = try await makeClient(proxy).send("listing f", repeatable: false) {
                HTTPRequest(method: "PROPFIND", url: proxy.address + "/f/", sink: .stream(stream))
            }
            XCTFail("an HTML page was taken for a multistatus")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("listing f") && error.message.contains("not WebDAV XML"), error.message)
        }
    }

    private func makeClient(_ proxy: FaultProxy) -> HTTPClient {
        var settings = HTTPSettings()
        settings.backoff = 0.05
        return HTTPClient(server: proxy.address, settings: settings)
    }

    private func request(_ proxy: FaultProxy) -> HTTPRequest {
        HTTPRequest(method: "GET", url: proxy.address + "/thing")
    }
}
