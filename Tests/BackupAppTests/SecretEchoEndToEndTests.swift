// The built binary against a server that echoes the credentials back in its error bodies (the
// fault proxy answering as a fake WebDAV or S3 server): no form of the password — literal,
// percent-encoded, base64 Basic credentials, JSON- or XML-escaped — reaches stderr, stdout
// or the --json output.

import BackupTestSupport
import Foundation
import XCTest

final class SecretEchoEndToEndTests: XCTestCase {
    private func assertNoForm(_ result: CLIResult, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let message = result.result?["message"] as? String ?? ""
        for (name, form) in EchoedForms.all {
            for (stream, text) in [("stdout", result.stdout), ("stderr", result.stderr), ("the JSON message", message)] {
                XCTAssertFalse(text.contains(form), "\(what): the \(name) form of the password is in \(stream): \(text)", file: file, line: line)
            }
        }
        XCTAssertTrue((result.stdout + result.stderr).contains("***"), "\(what): the echo reached the output, masked: \(result.stdout)\(result.stderr)",
                      file: file, line: line)
    }

    /// Bodies that echo every form, each short enough to show whole in a message.
    private var bodies: [String] {
        var bodies: [String] = [], body = "you sent:"
        for (_, form) in EchoedForms.all {
            if body.count + form.count > 280 {
                bodies.append(body)
                body = "you sent:"
            }
            body += " [" + form + "]"
        }
        return bodies + [body]
    }

    func testAWebDAVServerEchoingThePasswordInA500BodyNeverGetsItPrinted() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let proxy = try FaultProxy(upstreamPort: nil)
        addTeardownBlock { proxy.stop() }
        f.extraEnvironment = ["BACKUP_PASSWORD": EchoedForms.password]
        let remote = "webdav://\(EchoedForms.user)@127.0.0.1:\(proxy.port)/backup"
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remote).status, 0)
        // The first body comes with a 500 (retried with backoff, ~3 s a run), the others with a
        // 400, which the same message path shows at once.
        for (index, body) in bodies.enumerated() {
            proxy.clear()
            proxy.add(times: 100, .status(index == 0 ? 500 : 400, body: body))
            let json = try f.run("probe", "--json")
            XCTAssertEqual(json.result?["error"] as? String, "transport", json.stdout)
            assertNoForm(json, "probe --json")
            assertNoForm(try f.run("probe"), "probe")
        }
    }

    func testAnS3ServerEchoingTheSecretKeyInA403MessageNeverGetsItPrinted() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let proxy = try FaultProxy(upstreamPort: nil)
        addTeardownBlock { proxy.stop() }
        f.extraEnvironment = [
            "AWS_ACCESS_KEY_ID": EchoedForms.user, "AWS_SECRET_ACCESS_KEY": EchoedForms.password,
            "AWS_ENDPOINT_URL": proxy.address, "AWS_REGION": "us-east-1",
        ]
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", "s3://bucket/laptop").status, 0)
        func xml(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        let forms = EchoedForms.all.map { "[" + $0.1 + "]" }.joined(separator: " ")
        proxy.add(times: 100, .status(403, body: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
            + "<Error><Code>AccessDenied</Code><Message>you sent: \(xml(forms))</Message></Error>"))
        let json = try f.run("probe", "--json")
        XCTAssertEqual(json.result?["error"] as? String, "authRevoked", json.stdout)
        assertNoForm(json, "probe --json")
        assertNoForm(try f.run("probe"), "probe")
    }
}
