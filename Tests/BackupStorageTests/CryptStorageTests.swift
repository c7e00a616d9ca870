// CryptStorage over a real folder remote: the storage contract as any provider passes it,
// nothing plain on the disk (no name, no byte of a file), and what it wrote read back by
// rclone alone through a `:crypt:` remote, byte for byte.

@testable import BackupStorage
import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class CryptStorageTests: XCTestCase {
    private let passphrase = "correct horse battery staple"

    private func makeRemote() throws -> (storage: CryptStorage, root: String, scratch: String) {
        let dir = try TempDir("crypt-storage")
        addTeardownBlock { dir.cleanup() }
        let root = try dir.makeFolder("remote")
        let scratch = try dir.makeFolder("scratch")
        return (CryptStorage(base: FolderStorage(root: root), crypt: try RcloneCrypt(passphrase: passphrase), scratch: scratch), root, scratch)
    }

    func testTheStorageContractHoldsEncrypted() async throws {
        let (storage, _, scratch) = try makeRemote()
        try await StorageContract.emptyRemoteListsNothing(storage)
        try await StorageContract.writtenFileIsListedWithItsSize(storage)
        try await StorageContract.writeBytesThenReadBytesRoundTrips(storage)
        try await StorageContract.writeFileThenDownloadFileRoundTrips(storage, scratch: scratch)
        try await StorageContract.writeFileHashingTellsTheHashOfWhatItSent(storage, scratch: scratch)
        try await StorageContract.overwriteReplacesContentAndSize(storage)
        try await StorageContract.deleteRemovesTheFile(storage)
        try await StorageContract.deleteOfAbsentPathSucceeds(storage)
        try await StorageContract.readOfAbsentPathThrowsNotFound(storage)
        try await StorageContract.downloadOfAbsentPathThrowsNotFound(storage, scratch: scratch)
        try await StorageContract.spacesAndUnicodeInNamesRoundTrip(storage)
        try await StorageContract.deepFoldersRoundTrip(storage)
        try await StorageContract.identityKeyIsStable { storage }
        try await StorageContract.keptVersionsAreListedApartFromTheTree(storage)
    }

    func testTheRemoteHoldsNoPlainNameNorByteAndRcloneReadsIt() async throws {
        let (storage, root, scratch) = try makeRemote()
        let files: [String: Data] = [
            "docs/tax return 2025.pdf": Data(String(repeating: "income and deductions ", count: 5000).utf8),
            "photos/日本 beach.jpg": StorageContract.randomData(count: RcloneCrypt.chunkSize + 1),
            "empty.txt": Data(),
            "exactly.bin": StorageContract.randomData(count: RcloneCrypt.chunkSize),
        ]
        for (path, data) in files {
            let local = scratch + "/source-" + UUID().uuidString
            try data.write(to: URL(fileURLWithPath: local))
            let written = try await storage.writeFile(path, from: local)
            XCTAssertEqual(written.size, Int64(data.count), path)
        }
        let listed = try await storage.list()
        XCTAssertEqual(Set(listed.map(\.path)), Set(files.keys))
        XCTAssertEqual(Set(listed.map(\.size)), Set(files.values.map { Int64($0.count) }))

        let onDisk = try FileManager.default.subpathsOfDirectory(atPath: root)
        for name in ["docs", "tax", "photos", "beach", "日本", "empty", "exactly"] {
            XCTAssertFalse(onDisk.contains { $0.contains(name) }, "a plain name on the remote: \(name) in \(onDisk)")
        }
        for path in onDisk {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isFolder), !isFolder.boolValue else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: root + "/" + path))
            XCTAssertNil(bytes.range(of: Data("income and deductions".utf8)), "plain content in \(path)")
        }

        // rclone alone reads it.
        let rclone = try XCTUnwrap(RcloneServer.findRclone())
        func run(_ arguments: [String]) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: rclone)
            process.arguments = arguments
            process.environment = ["RCLONE_CONFIG": scratch + "/rclone.conf"]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let obscured = try run(["obscure", passphrase])
        let target = scratch + "/read-by-rclone"
        _ = try run(["copy", ":crypt,remote='\(root)',password='\(obscured)':", target])
        for (path, data) in files {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: target + "/" + path)), data, path)
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch).filter { $0.hasPrefix(".backup-crypt.") }
        XCTAssertEqual(leftovers, [], "temporary encrypted copies were left behind")
    }
}
