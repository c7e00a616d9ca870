// A remote for an end-to-end test: the fixture's folder, or a real server (`rclone serve
// webdav|s3`, stopped at the test's end) with its credentials in the fixture's environment.

import BackupTestSupport
import Foundation
import XCTest

enum ServedKind { case folder, webdav, s3 }

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
        }
    }
}
