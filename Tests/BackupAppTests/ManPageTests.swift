// The committed man page: mandoc's lint finds nothing in it, `man` renders it without a
// warning and within 80 columns, and it documents everything a reader needs: every command
// and option of the tree, every config key, every environment variable, every exit status,
// every JSON event and every kind of remote failure. GeneratedFilesTests checks that it is
// what the binary generates; this file checks what it says.

import BackupApp
import BackupCLI
import Foundation
import XCTest

final class ManPageTests: XCTestCase {
    private var source: String { (try? Tools.committed("man/backup.1")) ?? "" }

    func testMandocLintReportsNothing() throws {
        let result = try Tools.run(try tool("mandoc", package: "mandoc"), ["-Tlint", "man/backup.1"])
        XCTAssertEqual(result.stdout + result.stderr, "")
        XCTAssertEqual(result.status, 0)
    }

    func testManRendersThePageWithoutWarnings() throws {
        let result = try Tools.run(
            try tool("man", package: "man-db"), ["--warnings", "./man/backup.1"],
            environment: ["MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80", "LANG": "C.UTF-8"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        for heading in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "CONFIGURATION", "CREDENTIALS", "GUARANTEES AND GUARDS",
                        "RESTORE AND RESUME", "JSON OUTPUT", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES",
                        "DIAGNOSTICS", "SEE ALSO"] {
            XCTAssertTrue(result.stdout.contains("\n\(heading)\n"), "no \(heading) section in the rendered page")
        }
    }

    func testRenderedPageFitsEightyColumns() throws {
        let result = try Tools.run(try tool("mandoc", package: "mandoc"), ["-Tutf8", "-O", "width=80", "man/backup.1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        // Strip the overstrike of bold and underlined text ("x\bx", "_\bx") before counting.
        let plain = result.stdout.replacingOccurrences(of: ".\u{8}", with: "", options: .regularExpression)
        for line in plain.split(separator: "\n") where line.count > 80 {
            XCTFail("wider than 80 columns: \(line)")
        }
    }

    func testEveryCommandAndOptionOfTheTreeIsDocumented() {
        let page = source
        for command in Tools.visibleCommands.dropFirst() {
            XCTAssertTrue(page.contains("\n.Ss \(command.name)\n"), "no subsection for `\(command.name)`")
            XCTAssertTrue(page.contains("\n.Cm \(command.name.dropFirst("backup ".count))\n"), "`\(command.name)` is not in the synopsis")
            for option in command.spec.options {
                XCTAssertTrue(page.contains("\n.It Fl -\(option.name)"), "--\(option.name) of `\(command.name)` is not described")
            }
        }
        for option in CommandTree.globalOptions {
            XCTAssertTrue(page.contains("\n.It Fl -\(option.name)"), "the global --\(option.name) is not described")
        }
    }

    func testTheSynopsisShowsRequiredOptionsWithoutBrackets() {
        XCTAssertTrue(source.contains("\n.Cm init\n.Fl -source Ar DIR\n.Fl -remote Ar URL\n"))
        XCTAssertTrue(source.contains("\n.Op Fl -place Cm all|ask\n"))
        XCTAssertTrue(source.contains("\n.Oo Fl -only Ar GROUP Oc No ...\n"))
    }

    func testEveryConfigKeyIsDescribed() {
        let page = source
        XCTAssertFalse(page.contains("Not yet described"), "a provider key of Profile.providerKeys has no description")
        for key in ["source", "remote", "exclude", "size_compared", "keep_remotely"] + Profile.providerKeys {
            XCTAssertTrue(page.contains("\n.It Cm \(key)\n"), "the config key \(key) is not described")
        }
        XCTAssertTrue(page.contains("\n.It Cm group.\\& Ns Ar NAME\n"))
        XCTAssertTrue(page.contains("\n.It Cm group.\\& Ns Ar NAME Ns Cm .required\n"))
    }

    func testTheConfigExamplesParseAndCoverEveryProvider() throws {
        // The literal block of "Example profiles", as the config parser reads it.
        let start = try XCTUnwrap(source.range(of: ".Ss Example profiles\n"))
        let block = source[start.upperBound...]
        let body = try XCTUnwrap(block.range(of: ".Bd -literal -offset indent\n")).upperBound
        let end = try XCTUnwrap(block.range(of: "\n.Ed\n")).lowerBound
        let text = String(block[body..<end]).replacingOccurrences(of: "\\e", with: "\\").replacingOccurrences(of: "\\&", with: "")
        let config = try Config.parse(text, path: "backup.1")
        let remotes = config.profiles.map(\.remote)
        XCTAssertTrue(remotes.contains { $0.hasPrefix("/") }, "no folder profile: \(remotes)")
        XCTAssertTrue(remotes.contains { $0.hasPrefix("webdav") }, "no WebDAV profile: \(remotes)")
        XCTAssertTrue(remotes.contains { $0.hasPrefix("s3://") }, "no S3 profile: \(remotes)")
    }

    func testEnvironmentVariablesAreDocumented() {
        for name in ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "BACKUP_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                     "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_REGION", "NO_COLOR"] {
            XCTAssertTrue(source.contains("Ev \(name)"), "\(name) is not in ENVIRONMENT")
        }
    }

    func testEveryExitStatusIsDocumented() throws {
        let section = try XCTUnwrap(source.components(separatedBy: ".Sh EXIT STATUS\n").last?.components(separatedBy: "\n.Sh ").first)
        for status in ExitStatus.allCases {
            XCTAssertTrue(section.contains(".It \(status.rawValue)\n"), "exit status \(status.rawValue) is not documented")
        }
    }

    func testEveryJSONEventAndTheBase64TwinsAreDocumented() {
        for event in ["scanned", "note", "progress", "conflict", "status", "result"] {
            XCTAssertTrue(source.contains("\n.It Cm \(event)\n"), "the JSON event \(event) is not documented")
        }
        XCTAssertTrue(source.contains("_base64"))
    }

    func testEveryRemoteFailureHasAMappingRow() {
        for kind in ["storageFull", "transport", "authRevoked", "offline", "notFound", "notAvailable"] {
            XCTAssertTrue(source.contains("\n.It Cm \(kind)\n"), "no error mapping row for \(kind)")
        }
        XCTAssertTrue(source.contains("\n.It folder:\n"))
        XCTAssertTrue(source.contains("\n.It WebDAV:\n"))
        XCTAssertTrue(source.contains("\n.It S3:\n"))
    }

    func testEachGuardSaysHowToLiftIt() {
        for (reason, lift) in [("restorePending", "backup restore"), ("shrinkSuspected", "--allow-shrink"),
                               ("writeHeld", "backup hold clear"), ("needsConsent", "--yes")] {
            // Text lines are wrapped at 80 bytes: read the item as one line.
            let item = (source.components(separatedBy: "Pq Cm \(reason)\n").dropFirst().first?.components(separatedBy: "\n.It ").first ?? "")
                .replacingOccurrences(of: "\n", with: " ")
            XCTAssertTrue(item.contains(lift), "the \(reason) guard does not say how to lift it (\(lift))")
        }
    }

    /// The path of a tool, or a failure that names the Debian package CI must install.
    private func tool(_ name: String, package: String) throws -> String {
        guard let path = Tools.which(name) else {
            throw NotInstalled(description: "\(name) is not installed; .ci/run must install the Debian package \(package)")
        }
        return path
    }

    private struct NotInstalled: Error, CustomStringConvertible {
        let description: String
    }
}
