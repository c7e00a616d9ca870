// A remote for an end-to-end test: the fixture's folder, or a real server (`rclone serve
// webdav|s3`, or OpenSSH's sshd for SFTP; stopped at the test's end) with its credentials in
// the fixture's environment or, for SFTP, its key where ssh keeps it and its host key trusted.

import BackupTestSupport
import Foundation
import XCTest

enum ServedKind { case folder, webdav, s3, sftp }

extension XCTestCase {
    /// The remote's URL for `backup init`, the folder on disk that holds its files, and what
    /// to wait after a sync before looking again (rclone's directory cache).
    func servedRemote(_ kind: ServedKind, _ f: CLIFixture) throws -> (url: String, root: String, settle: () -> Void) {
        let settle = { Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 5) }
        switch kind {
        case .folder:
            return (f.remote, f.remote, {})
        case .webdav:
            let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("served"))
            addTeardownBlock { server.stop() }
            try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
            f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
            return ("webdav://\(server.user)@127.0.0.1:\(server.port)/backup", server.root + "/backup", settle)
        case .s3:
            let server = try RcloneServer(.s3, root: try f.dir.makeFolder("served"))
            addTeardownBlock { server.stop() }
            try FileManager.default.createDirectory(atPath: server.root + "/bucket", withIntermediateDirectories: true)
            f.extraEnvironment = [
                "AWS_ACCESS_KEY_ID": server.user, "AWS_SECRET_ACCESS_KEY": server.secret,
                "AWS_ENDPOINT_URL": server.address, "AWS_REGION": "us-east-1",
            ]
            return ("s3://bucket/laptop", server.root + "/bucket/laptop", settle)
        case .sftp:
            let sftp = try servedSFTP(f)
            return (sftp.url, sftp.root, {})
        }
    }
}

/// An sshd for one end-to-end test, reached as root with the server's client key.
struct ServedSFTP {
    let server: SSHServer
    /// `sftp://root@127.0.0.1:PORT/…/backup`.
    let url: String
    /// That folder on this machine's disk.
    let root: String
    /// The tool's own known_hosts file in the fixture's config folder.
    var knownHosts: String
}

extension XCTestCase {
    /// Starts sshd and makes its `backup` folder; with `trust`, the host key is in the tool's
    /// own known_hosts; with `defaultKey`, the client key is the fixture's `~/.ssh/id_ed25519`
    /// (found as ssh finds it), else the caller names it with `--identity-file`.
    func servedSFTP(_ f: CLIFixture, trust: Bool = true, defaultKey: Bool = true) throws -> ServedSFTP {
        let server = try SSHServer(folder: try f.dir.makeFolder("sshd"))
        addTeardownBlock { server.stop() }
        let root = try f.dir.makeFolder("sftp-root/backup")
        let knownHosts = f.dir.path("config/backup/known_hosts")
        try FileManager.default.createDirectory(atPath: f.dir.path("config/backup"), withIntermediateDirectories: true)
        if trust { try server.knownHostsLine.write(toFile: knownHosts, atomically: true, encoding: .utf8) }
        if defaultKey {
            try FileManager.default.createDirectory(atPath: f.dir.path("home/.ssh"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: server.clientKey, toPath: f.dir.path("home/.ssh/id_ed25519"))
            chmod(f.dir.path("home/.ssh/id_ed25519"), 0o600)
        }
        return ServedSFTP(server: server, url: "sftp://root@127.0.0.1:\(server.port)\(root)", root: root, knownHosts: knownHosts)
    }
}
