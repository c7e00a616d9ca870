// An encrypted profile's passphrase typed into the interface, in the real binary in tmux: with
// no BACKUP_CRYPT_PASSWORD and no crypt_password_command the sync ends saying so and offers `p`;
// a wrong passphrase typed there is refused (nothing written) and offered again; the right one
// runs the sync; none of them is drawn or written anywhere.

import BackupTestSupport
import Foundation
import XCTest

final class TUIPassphraseTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home


    func testAPassphraseTypedInTheInterfaceIsCheckedRunsTheSyncAndIsWrittenNowhere() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let passphrase = "tui passphrase 42"
        try home.write("notes.txt", "first words")
        let made = ["BACKUP_CRYPT_PASSWORD": passphrase]
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote, "--encrypt"], extra: made), 0)
        XCTAssertEqual(try home.scripted(["sync", "--yes"], extra: made), 0)
        try home.write("more.txt", "second words")
        let before = try FileManager.default.subpathsOfDirectory(atPath: home.remote).sorted()

        var environment = home.environment
        environment["BACKUP_CRYPT_PASSWORD"] = ""
        let tui = try Tmux(width: 100, height: 30, arguments: ["sync"], environment: environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        let missing = try tui.waitAll(["no passphrase for the encrypted remote", "p password"])
        XCTAssertFalse(missing.contains("Completed"), missing)

        // A wrong one: refused before anything is written, and offered again.
        try tui.press("p")
        try tui.wait(for: "Passphrase of the encrypted backup")
        try tui.type("not it")
        let dots = try tui.wait(for: "••••••")
        XCTAssertFalse(dots.contains("not it"), "a passphrase is never drawn: \(dots)")
        try tui.press("Enter")
        let refused = try tui.waitAll(["wrong passphrase", "p password"], timeout: 60)
        XCTAssertFalse(refused.contains("not it"), refused)
        XCTAssertEqual(try FileManager.default.subpathsOfDirectory(atPath: home.remote).sorted(), before, "a wrong passphrase wrote")

        // The right one runs the sync.
        try tui.press("p")
        try tui.wait(for: "Passphrase of the encrypted backup")
        try tui.type(passphrase)
        try tui.press("Enter")
        let synced = try tui.wait(for: "Completed: 1 file uploaded", timeout: 60)
        XCTAssertFalse(synced.contains(passphrase), synced)
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)
        XCTAssertEqual(try home.scripted(["restore", "--to", home.dir.path("out")], extra: made), 0)
        XCTAssertEqual(try String(contentsOfFile: home.dir.path("out/more.txt"), encoding: .utf8), "second words")

        for folder in ["config", "state", "home"] {
            let written = home.everything(under: folder)
            XCTAssertFalse(written.contains(passphrase), "the passphrase is in \(folder)")
            XCTAssertFalse(written.contains("not it"), "the wrong passphrase is in \(folder)")
        }
    }

    func testANewEncryptedProfileMadeInTheFormAsksThePassphraseTwiceAndWritesItNowhere() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let remote = home.dir.path("encrypted-remote")
        var environment = home.environment
        environment["BACKUP_CRYPT_PASSWORD"] = ""
        let tui = try Tmux(width: 100, height: 40, arguments: [], environment: environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        try tui.wait(for: "▸ default")
        try tui.press("n")
        try tui.wait(for: "new profile")
        try tui.type("secret")
        try tui.press("Tab")
        try tui.type(home.source)
        try tui.press("Tab")
        try tui.type(remote)
        for _ in 0..<9 { try tui.press("Tab") }  // to Encrypt
        try tui.wait(for: "rclone crypt")
        try tui.type("yes")
        try tui.press("Tab")
        try tui.type("form passphrase")
        try tui.press("Tab")
        try tui.type("form passphrasf")
        for _ in 0..<2 { try tui.press("Tab") }  // to [ Save ]
        try tui.wait(for: "Enter saves the profile")
        try tui.press("Enter")
        try tui.wait(for: "The two passphrases differ")
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote + "/.backup-encrypted"))
        // Focus is on Again: type it right, then save.
        for _ in 0..<15 { try tui.press("BSpace") }
        try tui.type("form passphrase")
        for _ in 0..<2 { try tui.press("Tab") }
        try tui.press("Enter")
        let saved = try tui.waitAll(["Saved profile", "a lost passphrase means a lost backup"])
        XCTAssertFalse(saved.contains("form passphrase"), saved)
        XCTAssertTrue(FileManager.default.fileExists(atPath: remote + "/.backup-encrypted"), "the key file was not written")
        let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertTrue(config.contains("encrypt = yes"), config)
        try tui.press("Escape")
        try tui.wait(for: "the profile list") { !$0.contains("new profile") }
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)
        // The passphrase it was made with opens it; another does not.
        XCTAssertEqual(try home.scripted(["sync", "--profile", "secret", "--yes"], extra: ["BACKUP_CRYPT_PASSWORD": "form passphrase"]), 0)
        XCTAssertEqual(try home.scripted(["sync", "--profile", "secret"], extra: ["BACKUP_CRYPT_PASSWORD": "form passphrasf"]), 2)
        for folder in ["config", "state", "home"] {
            XCTAssertFalse(home.everything(under: folder).contains("form passphrase"), "the passphrase is in \(folder)")
        }
    }

    /// `backup init --encrypt` on a terminal, with no passphrase in the environment, asks on the
    /// terminal with echo off, twice; two that differ are asked again; the key file is written
    /// with the one typed, which a later run must give.
    func testInitOnATerminalAsksThePassphraseTwiceWithoutEchoingIt() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.write("notes.txt", "words")
        var environment = home.environment
        environment["BACKUP_CRYPT_PASSWORD"] = ""
        let tui = try Tmux(width: 100, height: 30, arguments: ["init", "--source", home.source, "--remote", home.remote, "--encrypt"],
                           environment: environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        try tui.wait(for: "passphrase for the encrypted remote")
        try tui.type("typed at init")
        try tui.press("Enter")
        try tui.wait(for: "the same passphrase again")
        try tui.type("typed at inti")
        try tui.press("Enter")
        try tui.wait(for: "the prompt again") { $0.components(separatedBy: "passphrase for the encrypted remote").count == 3 }
        try tui.type("typed at init")
        try tui.press("Enter")
        try tui.wait(for: "the second prompt again") { $0.components(separatedBy: "the same passphrase again").count == 3 }
        try tui.type("typed at init")
        try tui.press("Enter")
        let done = try tui.waitAll(["this backup is encrypted", "[backup exited 0]"])
        XCTAssertFalse(done.contains("typed at"), "the passphrase was echoed: \(done)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: home.remote + "/.backup-encrypted"))
        XCTAssertEqual(try home.scripted(["sync", "--yes"], extra: ["BACKUP_CRYPT_PASSWORD": "typed at inti"]), 2)
        XCTAssertEqual(try home.scripted(["sync", "--yes"], extra: ["BACKUP_CRYPT_PASSWORD": "typed at init"]), 0)
    }
}
