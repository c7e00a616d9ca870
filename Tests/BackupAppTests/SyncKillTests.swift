// A sync killed with SIGKILL at random instants, to a folder, WebDAV and S3: after every kill
// the remote still holds every file it held before (the old bytes or the new), and the sync
// state claims nothing the remote lacks. The instants come from a seeded generator, printed,
// so a failure can be replayed (BACKUP_KILL_SEED=<seed>).

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class SyncKillTests: XCTestCase {
    private enum Provider: String { case folder, webdav, s3 }

    func testKilledSyncsToAFolderNeverLoseAFileNorClaimWhatTheRemoteLacks() throws {
        try killRounds(.folder, seed: 0x5EED_0001, maxDelay: 150)
    }

    func testKilledSyncsToWebDAVNeverLoseAFileNorClaimWhatTheRemoteLacks() throws {
        try killRounds(.webdav, seed: 0x5EED_0002, maxDelay: 500)
    }

    func testKilledSyncsToS3NeverLoseAFileNorClaimWhatTheRemoteLacks() throws {
        try killRounds(.s3, seed: 0x5EED_0003, maxDelay: 500)
    }

    /// The files of a remote folder on disk, without the tool's own files and temporaries.
    private func held(_ f: CLIFixture, _ root: String) throws -> [String: Data] {
        try f.tree(root).filter { path, _ in
            !path.split(separator: "/").contains { $0.hasPrefix(".backup") } && !path.contains(".rclone")
        }
    }

    private func killRounds(_ provider: Provider, seed defaultSeed: UInt64, maxDelay: UInt64, rounds: Int = 20) throws {
        let seed = ProcessInfo.processInfo.environment["BACKUP_KILL_SEED"].flatMap { UInt64($0) } ?? defaultSeed
        print("SyncKillTests \(provider.rawValue): seed \(seed) (replay with BACKUP_KILL_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }

        let remoteURL: String
        let remoteRoot: String
        switch provider {
        case .folder:
            remoteURL = f.remote
            remoteRoot = f.remote
        case .webdav, .s3:
            let server = try RcloneServer(provider == .webdav ? .webdav : .s3, root: try f.dir.makeFolder("served"))
            addTeardownBlock { server.stop() }
            if provider == .webdav {
                remoteRoot = server.root + "/backup"
                remoteURL = "webdav://\(server.user)@127.0.0.1:\(server.port)/backup"
                f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
            } else {
                remoteRoot = server.root + "/bucket/laptop"
                remoteURL = "s3://bucket/laptop"
                f.extraEnvironment = [
                    "AWS_ACCESS_KEY_ID": server.user, "AWS_SECRET_ACCESS_KEY": server.secret,
                    "AWS_ENDPOINT_URL": server.address, "AWS_REGION": "us-east-1",
                ]
            }
            try FileManager.default.createDirectory(atPath: remoteRoot, withIntermediateDirectories: true)
        }

        func content(_ length: Int) -> String {
            String(repeating: String(UInt64.random(in: 0 ... .max, using: &random), radix: 36), count: length / 12 + 1)
        }
        var next = 0
        for _ in 0..<150 {
            try f.write("d\(next % 10)/f\(next).bin", content(Int.random(in: 2_000...40_000, using: &random)))
            next += 1
        }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remoteURL).status, 0)
        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)
        let statePath = f.dir.path("state/backup/default/sync.db")

        for round in 0..<rounds {
            let before = try held(f, remoteRoot)
            // Changes of a working day: some files rewritten, some added, a couple deleted.
            var paths = try f.tree(f.source).keys.sorted()
            for _ in 0..<12 {
                guard let path = paths.randomElement(using: &random) else { break }
                try f.write(path, content(Int.random(in: 2_000...40_000, using: &random)))
            }
            for _ in 0..<4 {
                try f.write("d\(next % 10)/f\(next).bin", content(Int.random(in: 2_000...40_000, using: &random)))
                next += 1
            }
            for _ in 0..<2 {
                guard let index = paths.indices.randomElement(using: &random) else { break }
                try FileManager.default.removeItem(atPath: f.source + "/" + paths.remove(at: index))
            }
            let source = try f.tree(f.source)

            let delay = UInt64.random(in: 0...maxDelay, using: &random)
            let (process, out, _) = try f.process(["sync", "--json"])
            try process.run()
            usleep(UInt32(delay * 1000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            _ = out.fileHandleForReading.readDataToEndOfFile()
            let context = "\(provider.rawValue), seed \(seed), round \(round), killed after \(delay) ms"

            let after = try held(f, remoteRoot)
            for (path, old) in before {
                guard let new = source[path] else { continue }  // deleted locally: the remote may drop it
                let now = after[path]
                XCTAssertTrue(now == old || now == new, "\(context): \(path) lost (\(now.map { "\($0.count) B of neither version" } ?? "gone"))")
            }
            let state = try StateStore(path: statePath)
            for (path, entry) in try state.entries() {
                guard let data = after[path] else {
                    XCTFail("\(context): the state records \(path), which the remote lacks")
                    continue
                }
                XCTAssertEqual(Int64(data.count), entry.size, "\(context): \(path) has another size than the state records")
                if let hash = entry.hash {
                    XCTAssertEqual(SHA256Hasher.hex(data), hash, "\(context): \(path) holds other bytes than the state records")
                }
            }
        }

        let last = try f.run("sync", "--json")
        XCTAssertEqual(last.status, 0, last.stdout + last.stderr)
        XCTAssertEqual(try held(f, remoteRoot), try f.tree(f.source), "\(provider.rawValue): the last sync did not catch up")
    }
}
