// The tree comes back, not only the files: through each provider (a folder, `rclone serve
// webdav`, `rclone serve s3`, OpenSSH's sshd over SFTP), as root and as an unprivileged user, a restore gives every
// entry the type, permission bits, modification time (to the nanosecond), owner, link target
// and hard-link pairing the source had, empty folders and folder modes included. A change of
// metadata alone uploads no file, and the sync after it uploads nothing.

import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class TreeMetadataEndToEndTests: XCTestCase {
    private enum Provider { case folder, webdav, s3, sftp }

    /// What a restore must reproduce of one entry (`lstat`, never following links).
    private struct Entry: Equatable, CustomStringConvertible {
        var type: mode_t
        var mode: mode_t
        var mtime: Int64
        var uid: uid_t
        var gid: gid_t
        var target: String?
        /// For a file with other names: the first of them in path order (the pair shares an inode).
        var firstName: String?

        var description: String {
            "type \(String(type, radix: 8)) mode \(String(mode, radix: 8)) mtime \(mtime) owner \(uid):\(gid)"
                + (target.map { " -> \($0)" } ?? "") + (firstName.map { " = \($0)" } ?? "")
        }
    }

    /// Every entry below `root` (the root itself excluded), by relative path.
    private func entries(_ root: String) -> [String: Entry] {
        var result: [String: Entry] = [:]
        var inodes: [UInt64: String] = [:]
        func walk(_ relative: String) {
            let path = relative.isEmpty ? root : root + "/" + relative
            guard let dir = opendir(path) else { return }
            var names: [String] = []
            while let item = readdir(dir) {
                let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            for name in names.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                let child = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(root + "/" + child, &info) == 0 else { continue }
                var entry = Entry(
                    type: info.st_mode & S_IFMT, mode: info.st_mode & 0o7777,
                    mtime: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                    uid: info.st_uid, gid: info.st_gid)
                switch info.st_mode & S_IFMT {
                case S_IFLNK:
                    var buffer = [CChar](repeating: 0, count: 4096)
                    let count = readlink(root + "/" + child, &buffer, buffer.count)
                    entry.target = String(decoding: buffer.prefix(max(0, count)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    entry.mode = 0  // a link's own mode means nothing on Linux
                case S_IFREG where info.st_nlink > 1:
                    let inode = UInt64(info.st_ino)
                    if let first = inodes[inode] { entry.firstName = first } else { inodes[inode] = child }
                default:
                    break
                }
                result[child] = entry
                if info.st_mode & S_IFMT == S_IFDIR { walk(child) }
            }
        }
        walk("")
        return result
    }

    private static let old: Int64 = 981_173_106_123_456_789  // 2001-02-03 04:05:06.123456789 UTC

    private func setTimes(_ path: String, _ nanoseconds: Int64) {
        let times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2),
                     timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))]
        XCTAssertEqual(utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW), 0, path)
    }

    /// The source tree of the issue: 0600 and 0755 files, an old mtime, relative and absolute
    /// symbolic links, a dangling one, one to a folder, an empty folder, a 0700 folder, a
    /// hard-linked pair; as root, one file owned by nobody.
    private func makeTree(_ f: CLIFixture, owner: (uid_t, gid_t)?) throws {
        let s = f.source
        try f.write("ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----")
        try f.write("bin/run.sh", "#!/bin/sh\necho run\n")
        try f.write("photos/old.jpg", String(repeating: "jpeg", count: 300))
        try f.write("private/diary.txt", "dear diary")
        try f.write("a.txt", "one file, two names")
        try FileManager.default.createDirectory(atPath: s + "/hard", withIntermediateDirectories: true)
        XCTAssertEqual(link(s + "/a.txt", s + "/hard/b.txt"), 0)
        try FileManager.default.createDirectory(atPath: s + "/empty", withIntermediateDirectories: true)
        XCTAssertEqual(symlink("bin/run.sh", s + "/rel"), 0)
        XCTAssertEqual(symlink("/etc/hostname", s + "/abs"), 0)
        XCTAssertEqual(symlink("nowhere/at/all", s + "/dangling"), 0)
        XCTAssertEqual(symlink("bin", s + "/dirlink"), 0)
        chmod(s + "/ssh/id_ed25519", 0o600)
        chmod(s + "/bin/run.sh", 0o755)
        chmod(s + "/photos/old.jpg", 0o644)
        chmod(s + "/private", 0o700)
        chmod(s + "/ssh", 0o700)
        if let (uid, gid) = owner {
            for path in ["", "ssh", "ssh/id_ed25519", "bin", "bin/run.sh", "photos", "photos/old.jpg", "private", "private/diary.txt",
                         "a.txt", "hard", "empty"] {
                XCTAssertEqual(chown(s + (path.isEmpty ? "" : "/" + path), uid, gid), 0, path)
            }
            for link in ["rel", "abs", "dangling", "dirlink"] { XCTAssertEqual(lchown(s + "/" + link, uid, gid), 0, link) }
        } else {
            XCTAssertEqual(chown(s + "/photos/old.jpg", 65534, 65534), 0)
        }
        setTimes(s + "/photos/old.jpg", Self.old)
        for (offset, path) in ["ssh/id_ed25519", "bin/run.sh", "private/diary.txt", "a.txt", "rel", "abs", "dangling", "dirlink"].enumerated() {
            setTimes(s + "/" + path, Self.old + Int64(offset + 1) * 86_400_000_000_007)
        }
        for (offset, path) in ["ssh", "bin", "photos", "private", "hard", "empty"].enumerated() {
            setTimes(s + "/" + path, Self.old - Int64(offset + 1) * 3_600_000_000_011)
        }
    }

    /// `mirror`: `target` is a folder remote, which holds the tool's own files too and keeps
    /// the two names of a hard link as two files (as `rsync -a` does).
    /// `server`: `target` is what an SFTP server holds, whose times are whole seconds and whose
    /// files keep the owner sshd gave them.
    private func assertSameTree(_ source: String, _ target: String, mirror: Bool = false, server: Bool = false,
                                file: StaticString = #filePath, line: UInt = #line) {
        var expected = entries(source), restored = entries(target)
        if mirror {
            restored = restored.filter { !$0.key.hasPrefix(".backup") }
            for key in expected.keys { expected[key]?.firstName = nil }
            for key in restored.keys { restored[key]?.firstName = nil }
        }
        if server {
            for (key, entry) in expected {
                expected[key]?.mtime = entry.mtime / 1_000_000_000 * 1_000_000_000
                expected[key]?.uid = 0
                expected[key]?.gid = 0
                if entry.type != S_IFDIR && entry.type != S_IFLNK { expected[key]?.mode = entry.mode & 0o777 }
            }
        }
        XCTAssertEqual(Set(restored.keys), Set(expected.keys), "the restored tree has other entries", file: file, line: line)
        for (path, entry) in expected.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(restored[path], entry, path, file: file, line: line)
        }
    }

    private func roundTrip(_ provider: Provider, asNobody: Bool) throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let remoteURL: String
        var sftpRoot: String?
        switch provider {
        case .folder:
            remoteURL = f.remote
        case .sftp:
            let sftp = try servedSFTP(f)
            remoteURL = sftp.url
            sftpRoot = sftp.root
        case .webdav, .s3:
            let server = try RcloneServer(provider == .webdav ? .webdav : .s3, root: try f.dir.makeFolder("served"))
            addTeardownBlock { server.stop() }
            if provider == .webdav {
                try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
                remoteURL = "webdav://\(server.user)@127.0.0.1:\(server.port)/backup"
                f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
            } else {
                try FileManager.default.createDirectory(atPath: server.root + "/bucket", withIntermediateDirectories: true)
                remoteURL = "s3://bucket/laptop"
                f.extraEnvironment = [
                    "AWS_ACCESS_KEY_ID": server.user, "AWS_SECRET_ACCESS_KEY": server.secret,
                    "AWS_ENDPOINT_URL": server.address, "AWS_REGION": "us-east-1",
                ]
            }
        }
        let nobody = asNobody && geteuid() == 0
        if nobody {
            f.asNobody = true
            for folder in ["", "home", "remote"] { chmod(f.dir.path(folder), 0o777) }
            // The SSH key and the trusted host key are nobody's own, as they would be.
            if provider == .sftp { try SSHServer.shell(["chown", "-R", "65534:65534", f.dir.path("home"), f.dir.path("config")]) }
        }
        try makeTree(f, owner: nobody ? (65534, 65534) : nil)

        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remoteURL).status, 0)
        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)
        XCTAssertEqual(first.result?["uploaded"] as? Int, 6, "files, each name of the hard-linked pair included: \(first.stdout)")
        // A folder remote is a mirror of the tree itself, as `rsync -a` would leave it.
        if provider == .folder { assertSameTree(f.source, f.remote, mirror: true) }
        if let sftpRoot { assertSameTree(f.source, sftpRoot, mirror: true, server: true) }
        let target = f.dir.path("restored")
        let restore = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        assertSameTree(f.source, target)

        // Metadata alone: a chmod, a touch with the same content, a link retargeted.
        chmod(f.source + "/bin/run.sh", 0o700)
        setTimes(f.source + "/a.txt", Self.old + 42)
        unlink(f.source + "/rel")
        XCTAssertEqual(symlink("photos/old.jpg", f.source + "/rel"), 0)
        if nobody { lchown(f.source + "/rel", 65534, 65534) }
        setTimes(f.source + "/rel", Self.old)
        let changed = try f.run("sync", "--json")
        XCTAssertEqual(changed.status, 0, changed.stdout + changed.stderr)
        XCTAssertEqual(changed.result?["uploaded"] as? Int, 0, "a metadata change uploaded a file: \(changed.stdout)")
        XCTAssertEqual(changed.result?["marker_uploaded"] as? Bool, true, changed.stdout)
        XCTAssertEqual(changed.result?["metadata_updated"] as? Int, 3, "the chmod, and the touch of a file with two names: \(changed.stdout)")
        if provider == .folder { assertSameTree(f.source, f.remote, mirror: true) }
        if let sftpRoot { assertSameTree(f.source, sftpRoot, mirror: true, server: true) }
        let after = try f.run("sync", "--json")
        XCTAssertEqual(after.result?["uploaded"] as? Int, 0, after.stdout)
        XCTAssertEqual(after.result?["marker_uploaded"] as? Bool, false, after.stdout)
        let again = f.dir.path("restored-again")
        let second = try f.run("restore", "--to", again, "--json")
        XCTAssertEqual(second.status, 0, second.stdout + second.stderr)
        assertSameTree(f.source, again)
    }

    func testAFolderRemoteRestoresTheTreeAsRoot() throws { try roundTrip(.folder, asNobody: false) }
    func testAFolderRemoteRestoresTheTreeAsAnUnprivilegedUser() throws { try roundTrip(.folder, asNobody: true) }
    func testWebDAVRestoresTheTreeAsRoot() throws { try roundTrip(.webdav, asNobody: false) }
    func testWebDAVRestoresTheTreeAsAnUnprivilegedUser() throws { try roundTrip(.webdav, asNobody: true) }
    func testS3RestoresTheTreeAsRoot() throws { try roundTrip(.s3, asNobody: false) }
    func testS3RestoresTheTreeAsAnUnprivilegedUser() throws { try roundTrip(.s3, asNobody: true) }
    func testSFTPRestoresTheTreeAndTheServerHoldsItAsRoot() throws { try roundTrip(.sftp, asNobody: false) }
    func testSFTPRestoresTheTreeAsAnUnprivilegedUser() throws { try roundTrip(.sftp, asNobody: true) }

    // MARK: A link where files of the backup lie below it

    /// A hand-made folder remote whose marker has a link `a` (to a folder outside the target)
    /// and a file `a/x`: the file is placed in a real folder `a`, the link is refused by name
    /// (exit 5), and nothing is written outside the target.
    private func linkOverFiles(asNobody: Bool) throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let outside = try f.dir.makeFolder("outside")
        try f.dir.write("remote/a/x", Data("x".utf8))
        try f.dir.write("remote/b.txt", Data("b".utf8))
        let meta = EntryMetadata(mode: 0o644, mtimeNanoseconds: Self.old, uid: 65534, gid: 65534)
        var marker = Marker(hashes: ["a/x": SHA256Hasher.hex(Data("x".utf8)), "b.txt": SHA256Hasher.hex(Data("b".utf8))])
        marker.entries = [
            "a": MarkerEntry(kind: .symlink(target: outside), metadata: meta),
            "a/x": MarkerEntry(kind: .file, size: 1, metadata: meta),
            "b.txt": MarkerEntry(kind: .file, size: 1, metadata: meta),
        ]
        try marker.encoded().write(to: URL(fileURLWithPath: f.remote + "/" + SyncEngine.defaultMarkerPath))
        if asNobody && geteuid() == 0 {
            f.asNobody = true
            for folder in ["", "home", "remote", "remote/a"] { chmod(f.dir.path(folder), 0o777) }
        }
        let target = f.dir.path("restored")
        let result = try f.run("restore", "--remote", f.remote, "--to", target, "--json")
        XCTAssertEqual(result.status, 5, result.stdout + result.stderr)
        XCTAssertTrue(result.jsonLines.contains { $0["event"] as? String == "note" && $0["path"] as? String == "a" }, result.stdout)
        var info = stat()
        XCTAssertEqual(lstat(target + "/a", &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR, "the link was made where files of the backup lie below it")
        XCTAssertEqual(try String(contentsOfFile: target + "/a/x", encoding: .utf8), "x")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside), [], "something was written outside the target")
    }

    func testALinkWhereFilesOfTheBackupLieBelowItIsRefusedAsRoot() throws { try linkOverFiles(asNobody: false) }
    func testALinkWhereFilesOfTheBackupLieBelowItIsRefusedAsAnUnprivilegedUser() throws { try linkOverFiles(asNobody: true) }

    // MARK: Markers of earlier versions

    /// The format 1 marker an earlier version wrote (committed as a fixture, with a name that
    /// is not UTF-8) restores its files, byte-exact, with the defaults of new files.
    func testAFormat1MarkerWrittenByAnEarlierVersionRestores() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/marker-format1.bin")
        try Data(contentsOf: fixture).write(to: URL(fileURLWithPath: f.remote + "/" + SyncEngine.defaultMarkerPath))
        let latin1 = FileName.string(fromBytes: Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        let files = ["docs/report.txt": "report", "photos/a.jpg": "a.jpg", "notes.md": "notes", latin1: "café"]
        for (path, text) in files {
            try FileManager.default.createDirectory(atPath: (f.remote + "/" + path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            let fd = FileName.withCString(f.remote + "/" + path) { open($0, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
            XCTAssertGreaterThanOrEqual(fd, 0, path)
            XCTAssertEqual(write(fd, text, text.utf8.count), text.utf8.count)
            close(fd)
        }
        let target = f.dir.path("restored")
        let result = try f.run("restore", "--remote", f.remote, "--to", target, "--json")
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertEqual(result.result?["placed"] as? Int, 4, result.stdout)
        XCTAssertEqual(try f.tree(target), files.mapValues { Data($0.utf8) })
    }

    // MARK: What the scan cannot see, and dates out of range

    /// Folders and links below a folder that cannot be read now stay in the marker (a
    /// permission problem never deletes): a marker written meanwhile keeps them, and a restore
    /// makes them.
    func testLinksBelowAFolderThatCannotBeReadStayInTheMarker() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to run the binary as nobody") }
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        f.asNobody = true
        for folder in ["", "home", "source", "remote"] { chmod(f.dir.path(folder), 0o777) }
        try f.write("open/a.txt", "a")
        try f.write("private/notes.txt", "notes")
        try FileManager.default.createDirectory(atPath: f.source + "/private/empty", withIntermediateDirectories: true)
        XCTAssertEqual(symlink("notes.txt", f.source + "/private/link"), 0)
        for path in ["", "/open", "/open/a.txt", "/private", "/private/notes.txt", "/private/empty"] {
            XCTAssertEqual(chown(f.source + path, 65534, 65534), 0, path)
        }
        XCTAssertEqual(lchown(f.source + "/private/link", 65534, 65534), 0)
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes", "--json").status, 0)

        chmod(f.source + "/private", 0o000)
        addTeardownBlock { chmod(f.source + "/private", 0o755) }
        try f.write("open/b.txt", "b")
        chown(f.source + "/open/b.txt", 65534, 65534)
        let second = try f.run("sync", "--json")
        XCTAssertEqual(second.result?["marker_uploaded"] as? Bool, true, second.stdout + second.stderr)

        f.asNobody = false
        let target = f.dir.path("restored")
        let restore = try f.run("restore", "--remote", f.remote, "--to", target, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        var info = stat()
        XCTAssertEqual(lstat(target + "/private/link", &info), 0, "the link below the unreadable folder was dropped")
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFLNK)
        XCTAssertEqual(lstat(target + "/private/empty", &info), 0, "the empty folder below the unreadable folder was dropped")
        XCTAssertEqual(try String(contentsOfFile: target + "/open/b.txt", encoding: .utf8), "b")
    }

    /// A file dated past what nanoseconds since 1970 hold in 64 bits (2262) syncs, is not
    /// uploaded again, and restores (at the latest date that fits).
    func testAFileDatedFarInTheFutureSyncsOnceAndRestores() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("future.txt", "from the future")
        let times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), timespec(tv_sec: 10_413_792_000, tv_nsec: 5)]  // 2300-01-01
        XCTAssertEqual(utimensat(AT_FDCWD, f.source + "/future.txt", times, 0), 0)
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)
        let second = try f.run("sync", "--json")
        XCTAssertEqual(second.status, 0, second.stdout + second.stderr)
        XCTAssertEqual(second.result?["uploaded"] as? Int, 0, second.stdout)
        let target = f.dir.path("restored")
        let restore = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        XCTAssertEqual(try String(contentsOfFile: target + "/future.txt", encoding: .utf8), "from the future")
    }

    /// A staging folder in the target that belongs to another user is refused: nobody else
    /// may plant files where downloads wait.
    func testAStagingFolderOfAnotherUserIsRefused() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to make a folder of another user") }
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes", "--json").status, 0)
        let target = try f.dir.makeFolder("restored")
        try FileManager.default.createDirectory(atPath: target + "/.backup-staging", withIntermediateDirectories: true)
        XCTAssertEqual(chown(target + "/.backup-staging", 65534, 65534), 0)
        let restore = try f.run("restore", "--to", target, "--json")
        XCTAssertNotEqual(restore.status, 0, restore.stdout)
        XCTAssertTrue((restore.stdout + restore.stderr).contains("belongs to another user"), restore.stdout + restore.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/a.txt"))
    }
}
