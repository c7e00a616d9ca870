// `backup` against a real OpenSSH sshd (started per test on 127.0.0.1) from the command line:
// init creates the remote folder; an unknown host key is refused with its fingerprint and the
// flag that trusts it, which writes the key to the tool's own known_hosts; a changed key is
// refused loudly and trusted again only by the new fingerprint; --identity-file is kept in the
// profile; a password login works and a wrong password fails fast, never printed; a new
// machine restores with `restore --remote … --accept-host-key`.

import BackupTestSupport
import Foundation
import XCTest

final class SFTPEndToEndTests: XCTestCase {
    private func profileText(_ f: CLIFixture) -> String {
        (try? String(contentsOfFile: f.dir.path("config/backup/config"), encoding: .utf8)) ?? ""
    }

    func testAnUnknownHostKeyIsRefusedByInitWithItsFingerprintAndTheFlagTrustsIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let sftp = try servedSFTP(f, trust: false)
        try f.write("a.txt", "a")
        let url = sftp.url + "/laptop"

        let refused = try f.run("init", "--source", f.source, "--remote", url)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains(sftp.server.fingerprint), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--accept-host-key \(sftp.server.fingerprint)"), refused.stderr)
        XCTAssertEqual(profileText(f), "", "a profile was written for a server that is not trusted")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sftp.root + "/laptop"), "something was done on the server")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sftp.knownHosts))

        let malformed = try f.run("init", "--source", f.source, "--remote", url, "--accept-host-key", "yes")
        XCTAssertEqual(malformed.status, 2, malformed.stderr)
        XCTAssertTrue(malformed.stderr.contains("--accept-host-key"), malformed.stderr)
        let other = "SHA256:" + String(repeating: "A", count: 43)
        let wrong = try f.run("init", "--source", f.source, "--remote", url, "--accept-host-key", other)
        XCTAssertEqual(wrong.status, 1, wrong.stderr)
        XCTAssertTrue(wrong.stderr.contains(sftp.server.fingerprint) && wrong.stderr.contains(other), wrong.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sftp.knownHosts), "a key was trusted on a wrong fingerprint")

        let accepted = try f.run("init", "--source", f.source, "--remote", url, "--accept-host-key", sftp.server.fingerprint)
        XCTAssertEqual(accepted.status, 0, accepted.stderr)
        XCTAssertTrue(accepted.stdout.contains("created the remote folder"), accepted.stdout)
        let known = try String(contentsOfFile: sftp.knownHosts, encoding: .utf8)
        let hostKey = try String(contentsOfFile: sftp.server.hostKeyPublic, encoding: .utf8).split(separator: " ")
        XCTAssertEqual(known, "[127.0.0.1]:\(sftp.server.port) \(hostKey[0]) \(hostKey[1])\n")
        var info = stat()
        XCTAssertEqual(stat(sftp.knownHosts, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        // Trusted from now on, without the flag.
        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        XCTAssertEqual(try String(contentsOfFile: sftp.root + "/laptop/a.txt", encoding: .utf8), "a")
    }

    func testAChangedHostKeyIsRefusedLoudlyAndOnlyTheNewFingerprintTrustsIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let sftp = try servedSFTP(f)
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", sftp.url).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)

        // The key trusted before is another one now: the server's was replaced, or someone is
        // in between.
        let old = f.dir.path("old_host_key")
        _ = try SSHServer.shell(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", old])
        let oldKey = try String(contentsOfFile: old + ".pub", encoding: .utf8).split(separator: " ")
        try "[127.0.0.1]:\(sftp.server.port) \(oldKey[0]) \(oldKey[1])\n".write(toFile: sftp.knownHosts, atomically: true, encoding: .utf8)
        let oldFingerprint = String(try SSHServer.shell(["ssh-keygen", "-l", "-E", "sha256", "-f", old + ".pub"]).split(separator: " ")[1])
        try f.write("a.txt", "a, changed")
        let marker = try Data(contentsOf: URL(fileURLWithPath: sftp.root + "/.backup-marker"))

        let sync = try f.run("sync", "--json")
        XCTAssertEqual(sync.status, 1, sync.stdout + sync.stderr)
        XCTAssertTrue(sync.stdout.contains("CHANGED"), sync.stdout)
        XCTAssertTrue(sync.stdout.contains(sftp.server.fingerprint), sync.stdout)
        XCTAssertEqual(sync.result?["error"] as? String, "authRevoked", sync.stdout)
        XCTAssertEqual(try String(contentsOfFile: sftp.root + "/a.txt", encoding: .utf8), "a", "a server not trusted was written to")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: sftp.root + "/.backup-marker")), marker)

        // The fingerprint trusted before does not trust the new key; the new one does.
        let withOld = try f.run("probe", "--accept-host-key", oldFingerprint)
        XCTAssertNotEqual(withOld.status, 0, withOld.stdout + withOld.stderr)
        XCTAssertTrue(try String(contentsOfFile: sftp.knownHosts, encoding: .utf8).contains(String(oldKey[1])))
        let withNew = try f.run("probe", "--accept-host-key", sftp.server.fingerprint)
        XCTAssertEqual(withNew.status, 0, withNew.stdout + withNew.stderr)
        let known = try String(contentsOfFile: sftp.knownHosts, encoding: .utf8)
        XCTAssertFalse(known.contains(String(oldKey[1])), "the old key is still trusted")
        let again = try f.run("sync", "--json")
        XCTAssertEqual(again.status, 0, again.stdout + again.stderr)
        XCTAssertEqual(try String(contentsOfFile: sftp.root + "/a.txt", encoding: .utf8), "a, changed")
    }

    func testTheIdentityFileIsKeptInTheProfileAndAnUnreadableOneIsRefused() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let sftp = try servedSFTP(f, defaultKey: false)
        try f.write("a.txt", "a")
        let missing = try f.run("init", "--source", f.source, "--remote", sftp.url, "--identity-file", f.dir.path("no-such-key"))
        XCTAssertEqual(missing.status, 2, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("no-such-key"), missing.stderr)
        XCTAssertEqual(profileText(f), "")
        // Without a key, an agent or a password there is no way in: nothing is touched.
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", sftp.url).status, 0)
        let none = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(none.status, 3, none.stdout + none.stderr)
        XCTAssertEqual(none.result?["reason"] as? String, "noAccount", none.stdout)

        let initialized = try f.run("init", "--force", "--source", f.source, "--remote", sftp.url, "--identity-file", sftp.server.clientKey)
        XCTAssertEqual(initialized.status, 0, initialized.stderr)
        XCTAssertTrue(profileText(f).contains("identity_file = \(sftp.server.clientKey)\n"), profileText(f))
        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        XCTAssertEqual(try String(contentsOfFile: sftp.root + "/a.txt", encoding: .utf8), "a")
    }

    func testAPasswordLoginWorksAndAWrongPasswordFailsFastUnprinted() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let sftp = try servedSFTP(f, defaultKey: false)
        chmod(f.dir.path, 0o755)
        let home = try f.dir.makeFolder("user-home")
        let user = try ThrowawayUser(home: home)
        addTeardownBlock { user.remove() }
        try f.write("docs/a.txt", "a")
        let url = "sftp://\(user.name)@127.0.0.1:\(sftp.server.port)/~/backup"
        f.extraEnvironment = ["BACKUP_PASSWORD": user.password]
        let initialized = try f.run("init", "--source", f.source, "--remote", url)
        XCTAssertEqual(initialized.status, 0, initialized.stderr)
        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        XCTAssertEqual(try String(contentsOfFile: home + "/backup/docs/a.txt", encoding: .utf8), "a")

        let wrong = "wrong-\(UUID().uuidString)"
        f.extraEnvironment = ["BACKUP_PASSWORD": wrong]
        try f.write("docs/a.txt", "a, changed")
        let started = Date()
        let refused = try f.run("sync", "--json")
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "a refused password was retried instead of failing at once")
        XCTAssertEqual(refused.status, 1, refused.stdout + refused.stderr)
        XCTAssertEqual(refused.result?["error"] as? String, "authRevoked", refused.stdout)
        XCTAssertTrue(refused.stdout.contains(user.name), refused.stdout)
        for output in [initialized, sync, refused] {
            XCTAssertFalse((output.stdout + output.stderr).contains(user.password), "the password was printed")
            XCTAssertFalse((output.stdout + output.stderr).contains(wrong), "the wrong password was printed")
        }
        XCTAssertFalse(profileText(f).contains(user.password))
    }

    func testANewMachineRestoresWithTheRemoteAndTheFingerprint() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let sftp = try servedSFTP(f)
        try f.write("docs/report.txt", "quarterly")
        try f.write("photos/日本 beach.jpg", String(repeating: "jpeg", count: 5000))
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", sftp.url, "--group", "docs=docs/,required").status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)

        // A new machine: no config, no trusted key; the same login key.
        try FileManager.default.removeItem(atPath: f.dir.path("config"))
        try FileManager.default.removeItem(atPath: f.dir.path("state"))
        let target = f.dir.path("restored")
        let refused = try f.run("restore", "--remote", sftp.url, "--to", target)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertTrue((refused.stdout + refused.stderr).contains("--accept-host-key \(sftp.server.fingerprint)"), refused.stdout + refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/docs"))
        let restore = try f.run("restore", "--remote", sftp.url, "--to", target, "--accept-host-key", sftp.server.fingerprint, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
    }
}
