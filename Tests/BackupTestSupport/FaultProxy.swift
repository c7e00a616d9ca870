// The fault proxy of the provider tests: starts Tests/Fixtures/fault_proxy.py on 127.0.0.1
// in front of a real server (or alone, as a fake one) and tells it, per test, which requests
// to answer with 429/503/507/401, drop, cut midway or stall. Stopped on deinit or stop().

import Foundation

/// A running fault proxy and the rules the test gives it.
public final class FaultProxy: Sendable {
    /// One rule: requests whose method and path match get `action` instead of the upstream's answer.
    public enum Action: Sendable {
        /// Answer with this status, headers and body.
        case status(Int, headers: [String: String] = [:], body: String = "")
        /// Close the connection after reading the request head, with no response.
        case drop
        /// Read the request and answer nothing for `seconds`.
        case stall(seconds: Double)
        /// Forward, but break both connections after `bytes` of the request body.
        case cutRequest(afterBytes: Int)
        /// Forward, but break the connection after `bytes` of the response; 0: the server acted
        /// on the request, and the client hears nothing of it (a lost answer).
        case cutResponse(afterBytes: Int)
        /// Answer a 207 multistatus of `count` files under the path `prefix`, each carrying
        /// `padding` bytes of a dead property, generated and streamed as it goes.
        case propfindEntries(count: Int, padding: Int, prefix: String)
        /// Forward, relaying the request's body and the response's at `bytesPerSecond` each.
        case throttle(bytesPerSecond: Int)
    }

    /// One request as the proxy saw it.
    public struct Entry: Sendable, Equatable {
        public let method: String
        public let path: String
        /// "forward", or the action applied.
        public let action: String
    }

    public let port: Int
    private let fixture: PythonFixture

    /// Starts the proxy in front of `upstreamPort` on 127.0.0.1 (or as a bare fake server when
    /// nil); fails the calling test when python3 or the script is missing.
    public init(upstreamPort: Int?, file: StaticString = #filePath, line: UInt = #line) throws {
        fixture = try PythonFixture.start(script: "fault_proxy.py",
                                          arguments: upstreamPort.map { ["--upstream", "127.0.0.1:\($0)"] } ?? [],
                                          what: "fault proxy", file: file, line: line)
        port = fixture.port
    }

    /// "http://127.0.0.1:PORT".
    public var address: String { "http://127.0.0.1:\(port)" }

    /// Applies `action` to the next `times` requests whose method is `method` ("*" for any),
    /// whose path contains `path` and, where `depth` is given, whose Depth header is it.
    public func add(_ method: String = "*", path: String = "", depth: String? = nil, times: Int = 1, _ action: Action) {
        var command: [String: Any] = ["cmd": "add", "method": method, "path": path, "times": times]
        if let depth { command["depth"] = depth }
        switch action {
        case .status(let status, let headers, let body):
            command["action"] = "status"
            command["status"] = status
            command["headers"] = headers
            command["body"] = body
        case .drop:
            command["action"] = "drop"
        case .stall(let seconds):
            command["action"] = "stall"
            command["seconds"] = seconds
        case .cutRequest(let bytes):
            command["action"] = "cut_request"
            command["after"] = bytes
        case .cutResponse(let bytes):
            command["action"] = "cut_response"
            command["after"] = bytes
        case .propfindEntries(let count, let padding, let prefix):
            command["action"] = "propfind_entries"
            command["count"] = count
            command["padding"] = padding
            command["prefix"] = prefix
        case .throttle(let rate):
            command["action"] = "throttle"
            command["rate"] = rate
        }
        fixture.request(command)
    }

    /// Every request the proxy has seen since the start or the last `clear()`.
    public func log() -> [Entry] {
        guard let entries = fixture.request(["cmd": "log"])["log"] as? [[String: Any]] else { return [] }
        return entries.map {
            Entry(method: $0["method"] as? String ?? "", path: $0["path"] as? String ?? "",
                  action: $0["action"] as? String ?? "")
        }
    }

    /// Removes every rule and the log.
    public func clear() { fixture.request(["cmd": "clear"]) }

    /// Stops the proxy; calling it again does nothing.
    public func stop() { fixture.stop() }
}
