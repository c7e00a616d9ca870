// The config parser and writer: CRLF files read like LF ones, a NUL byte is refused, every
// error names FILE:LINE, and no value with a control character is ever written (a line
// break would write a config line of its own).

@testable import BackupApp
import BackupTestSupport
import Foundation
import XCTest

final class ConfigTests: XCTestCase {
    private let lf = """
        # comment
        [default]
        source = /home/alice
        remote = /mnt/backup
        exclude = *.tmp
        group.papers = docs/
        group.papers.required = yes

        [nas]
        source = /home/alice/Documents
        remote = webdavs://alice@nas.example.org/backup
        transfers = 8

        """

    func testACRLFConfigParsesTheSameAsLF() throws {
        let expected = try Config.parse(lf, path: "config")
        XCTAssertEqual(expected.profiles.count, 2)
        let crlf = try Config.parse(lf.replacingOccurrences(of: "\n", with: "\r\n"), path: "config")
        XCTAssertEqual(crlf, expected)
        XCTAssertEqual(crlf.profile("default")?.source, "/home/alice", "no CR is left on a value")
        XCTAssertEqual(crlf.profile("nas")?.settings["transfers"], "8")
    }

    func testALoneCRAtALineEndIsStripped() throws {
        let mixed = try Config.parse("[default]\r\nsource = /a\r\nremote = /b\n", path: "config")
        XCTAssertEqual(mixed.profile("default")?.source, "/a")
        XCTAssertEqual(mixed.profile("default")?.remote, "/b")
    }

    func testALineNumberInACRLFFileCountsLines() {
        XCTAssertThrowsError(try Config.parse("[default]\r\nsource = /a\r\nbogus = 1\r\n", path: "/etc/c")) { error in
            XCTAssertTrue((error as? AppError)?.message.hasPrefix("/etc/c:3: ") == true, "\(error)")
        }
    }

    func testANULByteIsRefusedWithFileAndLine() {
        XCTAssertThrowsError(try Config.parse("[default]\nsource = /a\u{0}\nremote = /b\n", path: "/etc/c")) { error in
            let failure = error as? AppError
            XCTAssertEqual(failure?.status, .usage)
            XCTAssertTrue(failure?.message.hasPrefix("/etc/c:2: ") == true, "\(error)")
            XCTAssertTrue(failure?.message.contains("NUL") == true, "\(error)")
        }
    }

    func testEveryParserErrorNamesFileAndLine() {
        let cases: [(String, Int)] = [
            ("[default\nsource = /a\n", 1),
            ("[]\n", 1),
            ("[bad name]\nsource = /a\n", 1),
            ("[a]\nsource = /a\nremote = /b\n[a]\n", 4),
            ("[a]\nsource = /a\njust words\n", 3),
            ("source = /a\n", 1),
            ("[a]\n\nsource =\n", 3),
            ("[a]\nsource = /a\nsource = /b\n", 3),
            ("[a]\nremote = /a\nremote = /b\n", 3),
            ("[a]\nsource = /a\nremote = /b\ngroup.x.required = maybe\n", 4),
            ("[a]\nsource = /a\nremote = /b\ngroup.bad name = x\n", 4),
            ("[a]\nsource = /a\nremote = /b\nuser = u\nuser = v\n", 5),
            ("[a]\nsource = /a\nremote = /b\ntransfers = 99\n", 4),
            ("[a]\nsource = /a\nremote = /b\ncolour = blue\n", 4),
            ("# c\n[a]\nremote = /b\n", 2),
            ("[a]\nsource = /a\n", 1),
            ("[a]\nsource = /a\nremote = /b\nexclude = x\u{0}\n", 4),
            ("[a]\nsource = /a\nremote = /b\n\nexclude = [a-\n", 5),
            ("[a]\nsource = /a\nremote = /b\nsize_compared = a//b\n", 4),
            ("[a]\nsource = /a\nremote = /b\nkeep_remotely = x\\\n", 4),
            ("[a]\nsource = /a\nremote = /b\ngroup.g = [z-a]\n", 4),
        ]
        for (text, line) in cases {
            XCTAssertThrowsError(try Config.parse(text, path: "/home/a/.config/backup/config"), text.debugDescription) { error in
                let failure = error as? AppError
                XCTAssertEqual(failure?.status, .usage, text.debugDescription)
                XCTAssertTrue(failure?.message.hasPrefix("/home/a/.config/backup/config:\(line): ") == true,
                              "\(text.debugDescription) → \(error)")
            }
        }
    }

    func testAFileThatIsNotUTF8NamesFileAndLine() throws {
        let dir = try TempDir("backup-config")
        defer { dir.cleanup() }
        let path = try dir.write("config", Data("[a]\nsource = /a\nremote = /caf".utf8) + Data([0xE9, 0x0A]))
        XCTAssertThrowsError(try Config.load(path)) { error in
            XCTAssertTrue((error as? AppError)?.message.hasPrefix("\(path):3: ") == true, "\(error)")
        }
    }

    func testSavingAValueWithAControlCharacterWritesNothing() throws {
        let dir = try TempDir("backup-config")
        defer { dir.cleanup() }
        var config = Config(path: dir.path("config"))
        for bad in ["*.tmp\npassword_command = touch /tmp/x", "a\rb", "tab\there", "esc\u{1B}[2J", "del\u{7F}", "csi\u{9B}"] {
            var profile = Profile(name: "default", source: "/a", remote: "/b")
            profile.excludes = [bad]
            XCTAssertThrowsError(try config.save(profile), bad.debugDescription) { error in
                XCTAssertEqual((error as? AppError)?.status, .usage)
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path("config")), "nothing was written")
    }

    func testSavingIntoACRLFFileReplacesOnlyItsOwnSection() throws {
        let dir = try TempDir("backup-config")
        defer { dir.cleanup() }
        let path = try dir.write("config", Data(lf.replacingOccurrences(of: "\n", with: "\r\n").utf8))
        var config = try Config.load(path)
        try config.save(Profile(name: "default", source: "/new", remote: "/mnt/new"))
        let reread = try Config.load(path)
        XCTAssertEqual(reread.profiles.map(\.name).sorted(), ["default", "nas"])
        XCTAssertEqual(reread.profile("default")?.source, "/new", "the old section is gone, not kept beside the new one")
        XCTAssertEqual(reread.profile("nas")?.settings["transfers"], "8")
    }
}
