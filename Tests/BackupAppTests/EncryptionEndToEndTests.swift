// Encryption end to end, with the real binary, on a folder remote and on real WebDAV and S3
// servers (`rclone serve`): a tree of awkward names and chunk-edge sizes synced encrypted is
// read back byte for byte by rclone alone through a `:crypt:` remote over the same storage,
// passes `rclone cryptcheck`, restores with its metadata, and leaves no plain name or byte on
// the remote. A wrong passphrase is refused before anything is written (wrongPassphrase, exit
// 2); encryption is never turned on or off for a backup in place (encryptionMismatch); a name too
// long for its encrypted form is reported by name, with exit status 1.

import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class EncryptionEndToEndTests: XCTestCase {
    private let passphrase = "correct horse battery staple"

    /// The awkward tree: spaces, Unicode, a long name (the longest that fits encrypted), deep
    /// folders, an empty file, and files of exactly one chunk and one chunk plus a byte.
    private func writeAwkwardTree(_ f: CLIFixture) throws -> [String] {
        var bytes = [UInt8](repeating: 0, count: 65537)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 7919 &+ index >> 8) }
        let long = String(repeating: "l", count: 139) + ".txt"  // 143 bytes: 255 encrypted
        let files: [(String, Data)] = [
            ("with spaces in it.txt", Data("income and deductions".utf8)),
            ("Ünïcödé/名前 ファイル.txt", Data("unicode body text".utf8)),
            (long, Data("the longest name".utf8)),
            ("a/b/c/d/e/f/g/deep.txt", Data("deep folder body".utf8)),
            ("empty", Data()),
            ("chunk/exactly-64KiB", Data(bytes[0..<65536])),
            ("chunk/64KiB-plus-1", Data(bytes)),
        ]
        for (path, data) in files {
            _ = try f.dir.write("source/" + path, data)
            var times = [timespec(tv_sec: 1_700_000_000 + data.count, tv_nsec: 0), timespec(tv_sec: 1_700_000_000 + data.count, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, f.source + "/" + path, &times, 0), 0, path)
        }
        chmod(f.source + "/with spaces in it.txt", 0o600)
        return files.map(\.0)
    }

    /// Runs the pinned rclone with a config of its own; its standard output.
    private func rclone(_ f: CLIFixture, _ arguments: [String]) throws -> (status: Int32, out: String) {
        let path = try XCTUnwrap(RcloneServer.findRclone())
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ["RCLONE_CONFIG": f.dir.path("rclone.conf"), "PATH": "/usr/bin:/bin"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private func awkwardTreeIsReadByRcloneAlone(_ kind: ServedKind) throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let (url, root, settle) = try servedRemote(kind, f)
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = passphrase
        let names = try writeAwkwardTree(f)
        let initialized = try f.run("init", "--source", f.source, "--remote", url, "--encrypt")
        XCTAssertEqual(initialized.status, 0, initialized.stdout + initialized.stderr)
        XCTAssertTrue(initialized.stdout.contains("a lost passphrase means a lost backup"), initialized.stdout)
        let synced = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(synced.status, 0, synced.stdout + synced.stderr)
        XCTAssertEqual(synced.result?["uploaded"] as? Int, names.count, synced.stdout)
        settle()

        // No plain name and no plain byte on the remote.
        let stored = try f.tree(root)
        XCTAssertFalse(stored.isEmpty)
        for (path, data) in stored {
            for name in names {
                for part in name.split(separator: "/") where part.count > 3 {
                    XCTAssertFalse(path.contains(part), "the plain name \(part) is on the remote as \(path)")
                }
            }
            for sample in ["income and deductions", "unicode body text", "deep folder body", "the longest name"] {
                XCTAssertNil(data.range(of: Data(sample.utf8)), "plain content \(sample) in \(path)")
            }
            XCTAssertTrue(path == ".backup-encrypted" || path == ".backup-volume-id" || data.starts(with: Data("RCLONE\0\0".utf8)),
                          "\(path) is not an rclone crypt file")
        }

        // rclone alone, through a crypt remote over the same storage, reads the tree back.
        let obscured = try rclone(f, ["obscure", passphrase]).out
        let crypt = ":crypt,remote='\(root)',password='\(obscured)':"
        let copied = f.dir.path("read-by-rclone")
        XCTAssertEqual(try rclone(f, ["copy", crypt, copied]).status, 0)
        let source = try f.tree(f.source)
        XCTAssertEqual(try f.tree(copied).filter { !$0.key.hasPrefix(".backup") }, source)
        XCTAssertEqual(try rclone(f, ["cryptcheck", f.source, crypt, "--exclude", ".backup*"]).status, 0, "rclone cryptcheck failed")
        // cryptcheck can fail: a changed byte on the remote is found.
        let victim = try XCTUnwrap(stored.max { $0.value.count < $1.value.count }).key  // the 64 KiB + 1 file
        var damaged = try XCTUnwrap(stored[victim])
        damaged[damaged.count - 1] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: root + "/" + victim))
        XCTAssertNotEqual(try rclone(f, ["cryptcheck", f.source, crypt, "--exclude", ".backup*"]).status, 0)
        try XCTUnwrap(stored[victim]).write(to: URL(fileURLWithPath: root + "/" + victim))
        settle()

        // backup restores the same tree, with its modes and times.
        let target = f.dir.path("restored")
        let restored = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restored.status, 0, restored.stdout + restored.stderr)
        XCTAssertEqual(try f.snapshot(target), try f.snapshot(f.source))
    }

    func testAnAwkwardTreeSyncedEncryptedToAFolderIsReadByRcloneAloneAndRestored() throws {
        try awkwardTreeIsReadByRcloneAlone(.folder)
    }

    func testAnAwkwardTreeSyncedEncryptedOverWebDAVIsReadByRcloneAloneAndRestored() throws {
        try awkwardTreeIsReadByRcloneAlone(.webdav)
    }

    func testAnAwkwardTreeSyncedEncryptedOverS3IsReadByRcloneAloneAndRestored() throws {
        try awkwardTreeIsReadByRcloneAlone(.s3)
    }

    /// A folder remote holding an encrypted backup of one file (a.txt, "first", unless named);
    /// the passphrase in the fixture's environment.
    private func encryptedBackupOfOneFile(_ name: String = "a.txt", _ text: String = "first") throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = passphrase
        _ = try f.write(name, text)
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote, "--encrypt").status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        return f
    }

    func testAWrongPassphraseIsRefusedBeforeAnythingIsWritten() throws {
        let f = try encryptedBackupOfOneFile()
        _ = try f.write("b.txt", "second")
        let before = try f.tree(f.remote)

        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = "not the passphrase"
        for command in [["sync", "--json"], ["restore", "--to", f.dir.path("out"), "--json"], ["verify", "--json"], ["versions", "--json"]] {
            let refused = try f.run(command)
            XCTAssertEqual(refused.status, 2, "\(command): " + refused.stdout + refused.stderr)
            XCTAssertEqual(refused.result?["error"] as? String, "wrongPassphrase", "\(command): " + refused.stdout)
            XCTAssertTrue((refused.result?["message"] as? String ?? "").contains("wrong passphrase"), refused.stdout)
            XCTAssertFalse(refused.stdout.contains("not the passphrase") || refused.stderr.contains("not the passphrase"))
        }
        XCTAssertEqual(try f.tree(f.remote), before, "a run with a wrong passphrase wrote to the remote")
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("out/a.txt")))
        let text = try f.run("sync")
        XCTAssertTrue(text.stderr.contains("wrong passphrase for the encrypted remote \(f.remote)"), text.stderr)

        // Without a passphrase (and no terminal to ask on): said, exit 2; the probe still works.
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = ""
        let none = try f.run("sync")
        XCTAssertEqual(none.status, 2, none.stderr)
        XCTAssertTrue(none.stderr.contains("no passphrase for the encrypted remote"), none.stderr)
        let probe = try f.run("probe", "--json")
        XCTAssertEqual(probe.status, 0, probe.stdout + probe.stderr)
        XCTAssertEqual(probe.result?["probe"] as? String, "found", probe.stdout)
        XCTAssertEqual(probe.result?["encrypted"] as? Bool, true, probe.stdout)
        XCTAssertTrue(try f.run("probe").stdout.contains("found, encrypted"))

        // A second passphrase the backup was not made with is wrong too.
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = passphrase
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD2"] = "a salt it never had"
        XCTAssertEqual(try f.run("sync", "--json").result?["error"] as? String, "wrongPassphrase")
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD2"] = nil
        XCTAssertEqual(try f.run("sync").status, 0)
    }

    func testEncryptionIsNeverTurnedOnOrOffForABackupInPlace() throws {
        let f = try encryptedBackupOfOneFile()
        let encrypted = try f.tree(f.remote)

        // Off: the profile without encrypt, on a remote that holds an encrypted backup.
        let config = f.dir.path("config/backup/config")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        try text.replacingOccurrences(of: "encrypt = yes\n", with: "").write(toFile: config, atomically: true, encoding: .utf8)
        let off = try f.run("sync", "--json", "--allow-shrink")
        XCTAssertEqual(off.status, 2, off.stdout + off.stderr)
        XCTAssertEqual(off.result?["error"] as? String, "encryptionMismatch", off.stdout)
        XCTAssertEqual(try f.tree(f.remote), encrypted)
        let again = try f.run("init", "--profile", "other", "--source", f.source, "--remote", f.remote)
        XCTAssertEqual(again.status, 2, again.stderr)
        XCTAssertTrue(again.stderr.contains("holds an encrypted backup"), again.stderr)

        // On: an encrypted profile on a remote that holds a plain backup.
        let plainRemote = f.dir.path("plain-remote")
        XCTAssertEqual(try f.run("init", "--profile", "plain", "--source", f.source, "--remote", plainRemote).status, 0)
        XCTAssertEqual(try f.run("sync", "--profile", "plain", "--yes").status, 0)
        let plain = try f.tree(plainRemote)
        let on = try f.run("init", "--profile", "turned", "--source", f.source, "--remote", plainRemote, "--encrypt")
        XCTAssertEqual(on.status, 2, on.stdout + on.stderr)
        XCTAssertTrue(on.stderr.contains("holds a backup that is not encrypted"), on.stderr)
        let plainConfig = try String(contentsOfFile: config, encoding: .utf8)
        try (plainConfig.replacingOccurrences(of: "[plain]\n", with: "[plain]\nencrypt = yes\n"))
            .write(toFile: config, atomically: true, encoding: .utf8)
        let flipped = try f.run("sync", "--profile", "plain", "--json")
        XCTAssertEqual(flipped.status, 2, flipped.stdout + flipped.stderr)
        XCTAssertEqual(flipped.result?["error"] as? String, "encryptionMismatch", flipped.stdout)
        XCTAssertEqual(try f.tree(plainRemote), plain, "the plain backup was written to")
    }

    func testANameTooLongEncryptedIsReportedByNameAndTheRestIsBackedUp() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        f.extraEnvironment["BACKUP_CRYPT_PASSWORD"] = passphrase
        let long = String(repeating: "n", count: 150)
        _ = try f.write("fits.txt", "fits")
        _ = try f.write("docs/" + long, "too long a name")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote, "--encrypt").status, 0)
        let synced = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(synced.status, 1, synced.stdout + synced.stderr)
        XCTAssertEqual(synced.result?["status"] as? String, "partial", synced.stdout)
        XCTAssertEqual(synced.result?["unreadable"] as? [String], ["docs/" + long], synced.stdout)
        XCTAssertEqual(synced.result?["uploaded"] as? Int, 1, synced.stdout)
        let text = try f.run("sync")
        XCTAssertEqual(text.status, 1)
        XCTAssertTrue(text.stdout.contains("docs/\(long): the name"), text.stdout)
        let restored = try f.run("restore", "--to", f.dir.path("out"))
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertEqual(try f.tree(f.dir.path("out")), ["fits.txt": Data("fits".utf8)])
    }

    func testVersionsOfAnEncryptedBackupAreEncryptedAndRestoreAsOf() throws {
        let f = try encryptedBackupOfOneFile("notes.txt", "the first words")
        Thread.sleep(forTimeInterval: 1.1)
        let formatter = ISO8601DateFormatter()
        let first = formatter.string(from: Date())
        Thread.sleep(forTimeInterval: 1.1)
        _ = try f.write("notes.txt", "the second words")
        XCTAssertEqual(try f.run("sync").status, 0)

        let kept = try f.tree(f.remote + "/.backup-versions")
        XCTAssertFalse(kept.isEmpty)
        for (path, data) in kept {
            XCTAssertFalse(path.contains("notes") || path.contains("Z"), "a plain name in the versions: \(path)")
            XCTAssertNil(data.range(of: Data("the first words".utf8)))
        }
        let listing = try f.run("versions", "notes.txt", "--json")
        XCTAssertEqual(listing.status, 0, listing.stdout + listing.stderr)
        XCTAssertEqual((listing.result?["versions"] as? [[String: Any]])?.count, 1, listing.stdout)
        let target = f.dir.path("as-of")
        let restored = try f.run("restore", "--as-of", first, "--to", target)
        XCTAssertEqual(restored.status, 0, restored.stdout + restored.stderr)
        XCTAssertEqual(try f.tree(target), ["notes.txt": Data("the first words".utf8)])
        // rclone reads the versions with a crypt remote rooted in the versions folder.
        let obscured = try rclone(f, ["obscure", passphrase]).out
        let copied = f.dir.path("versions-by-rclone")
        XCTAssertEqual(try rclone(f, ["copy", ":crypt,remote='\(f.remote)/.backup-versions',password='\(obscured)':", copied]).status, 0)
        XCTAssertTrue(try f.tree(copied).contains { $0.key.hasSuffix("/notes.txt") && $0.value == Data("the first words".utf8) })
    }

    func testAnEncryptedFileChangedOnTheRemoteIsFoundByVerifyAndNeverRestored() throws {
        let f = try encryptedBackupOfOneFile()
        _ = try f.write("b.txt", String(repeating: "b", count: 5000))
        XCTAssertEqual(try f.run("sync").status, 0)
        XCTAssertEqual(try f.run("verify", "--read-data").status, 0)
        // One byte of b.txt's sealed copy flipped, at the same size: the size check cannot see it.
        let (name, data) = try XCTUnwrap(try f.tree(f.remote).first { $0.value.count == Int(RcloneCrypt.encryptedSize(5000)) })
        var damaged = data
        damaged[damaged.count / 2] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: f.remote + "/" + name))

        let verified = try f.run("verify", "--read-data", "--json")
        XCTAssertEqual(verified.status, 5, verified.stdout + verified.stderr)
        let findings = verified.result?["damaged"] as? [[String: Any]] ?? []
        XCTAssertEqual(findings.map { $0["path"] as? String }, ["b.txt"], verified.stdout)
        XCTAssertEqual(findings.first?["error"] as? String, "undecryptable", verified.stdout)
        let target = f.dir.path("out")
        let restored = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restored.status, 5, restored.stdout + restored.stderr)
        XCTAssertEqual(try f.tree(target), ["a.txt": Data("first".utf8)], "the changed file was placed")
    }
}
