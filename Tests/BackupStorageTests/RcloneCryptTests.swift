// rclone crypt's format against the pinned rclone itself: names as `rclone backend encode` writes
// them (with and without a second passphrase), files as `rclone copy` through a crypt remote
// writes them decrypted by this code, and files this code wrote read back by rclone. A wrong
// passphrase is its own error; sizes follow from sizes.

@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class RcloneCryptTests: XCTestCase {
    private let passphrase = "correct horse battery staple"
    private let second = "a pinch of salt"

    private func rclone(_ arguments: [String]) throws -> String {
        let rclone = try XCTUnwrap(RcloneServer.findRclone(), "rclone is not installed (run .ci/run)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: rclone)
        process.arguments = arguments
        let scratch = try TempDir("rclone-crypt-config")
        addTeardownBlock { scratch.cleanup() }
        process.environment = ["RCLONE_CONFIG": scratch.path + "/rclone.conf", "PATH": "/usr/bin:/bin"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, String(decoding: errors, as: UTF8.self))
        return String(decoding: output, as: UTF8.self)
    }

    /// A `:crypt:` connection string over the local folder `remote` (the passphrases obscured, as rclone takes them).
    private func cryptRemote(_ remote: String, salt: String?) throws -> String {
        let obscured = try rclone(["obscure", passphrase]).trimmingCharacters(in: .whitespacesAndNewlines)
        var spec = ":crypt,remote='\(remote)',password='\(obscured)'"
        if let salt {
            spec += ",password2='\(try rclone(["obscure", salt]).trimmingCharacters(in: .whitespacesAndNewlines))'"
        }
        return spec + ":"
    }

    private let names = [
        "a", "report.txt", "with spaces and, commas", "日本語のファイル名.jpg", "café", "exactly sixteen!",
        "fifteen bytes..", "seventeen bytes..", String(repeating: "long-name-", count: 14), ".hidden", "UPPER lower 123",
    ]

    func testNamesAreWhatRcloneBackendEncodeWrites() throws {
        for salt in [nil, second] {
            let crypt = try RcloneCrypt(passphrase: passphrase, salt: salt)
            let output = try rclone(["backend", "encode", try cryptRemote("/nonexistent", salt: salt)] + names)
            let lines = output.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.count, names.count, output)
            for (name, theirs) in zip(names, lines) {
                XCTAssertEqual(try crypt.encryptSegment(name), theirs, "\(name) with salt \(salt ?? "none")")
                XCTAssertEqual(try crypt.decryptSegment(theirs), name)
            }
            XCTAssertEqual(try crypt.decryptPath(crypt.encryptPath("docs/2025/taxes.pdf")), "docs/2025/taxes.pdf")
        }
    }

    func testFilesRcloneWroteDecryptAndFilesWrittenHereAreReadByRclone() throws {
        let dir = try TempDir("rclone-crypt")
        addTeardownBlock { dir.cleanup() }
        // Around a chunk, and around a batch (the chunks read and written at a time).
        let batch = RcloneCrypt.batch * RcloneCrypt.chunkSize
        let sizes = [0, 1, 100, RcloneCrypt.chunkSize - 1, RcloneCrypt.chunkSize, RcloneCrypt.chunkSize + 1, 3 * RcloneCrypt.chunkSize + 17,
                     batch - 1, batch, batch + 1, 2 * batch + 4000]
        var plain: [String: Data] = [:]
        for size in sizes {
            plain["size \(size).bin"] = StorageContract.randomData(count: size)
        }
        for (name, data) in plain { try dir.write("plain/" + name, data) }
        let crypt = try RcloneCrypt(passphrase: passphrase)

        // rclone writes, this code reads.
        _ = try rclone(["copy", dir.path + "/plain", try cryptRemote(dir.path + "/by-rclone", salt: nil)])
        let written = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/by-rclone")
        XCTAssertEqual(written.count, plain.count)
        for encrypted in written {
            let name = try crypt.decryptSegment(encrypted)
            let data = try Data(contentsOf: URL(fileURLWithPath: dir.path + "/by-rclone/" + encrypted))
            XCTAssertEqual(Int64(data.count), RcloneCrypt.encryptedSize(Int64(try XCTUnwrap(plain[name]).count)), name)
            XCTAssertEqual(RcloneCrypt.plainSize(Int64(data.count)), Int64(plain[name]?.count ?? -1))
            XCTAssertEqual(try crypt.decrypt(data), plain[name], name)
        }

        // The same, streamed between descriptors.
        for encrypted in written {
            let name = try crypt.decryptSegment(encrypted)
            let source = open(dir.path + "/by-rclone/" + encrypted, O_RDONLY)
            let target = open(dir.path + "/streamed-" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            defer { close(source); close(target) }
            XCTAssertEqual(try crypt.decryptFile(from: source, to: target), Int64(plain[name]?.count ?? -1))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/streamed-" + name)), plain[name], name)
        }

        // This code writes (whole, and streamed from a descriptor), rclone reads.
        for (name, data) in plain { try dir.write("by-us/" + (try crypt.encryptSegment(name)), try crypt.encrypt(data)) }
        for name in plain.keys {
            let source = open(dir.path + "/plain/" + name, O_RDONLY)
            try FileManager.default.createDirectory(atPath: dir.path + "/by-us-streamed", withIntermediateDirectories: true)
            let target = open(dir.path + "/by-us-streamed/" + (try crypt.encryptSegment(name)), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            defer { close(source); close(target) }
            XCTAssertEqual(try crypt.encryptFile(from: source, to: target), RcloneCrypt.encryptedSize(Int64(plain[name]?.count ?? 0)))
        }
        _ = try rclone(["copy", try cryptRemote(dir.path + "/by-us-streamed", salt: nil), dir.path + "/read-back-streamed"])
        for (name, data) in plain {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/read-back-streamed/" + name)), data, name)
        }
        _ = try rclone(["copy", try cryptRemote(dir.path + "/by-us", salt: nil), dir.path + "/read-back"])
        for (name, data) in plain {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/read-back/" + name)), data, name)
        }
    }

    func testAWrongPassphraseIsItsOwnError() throws {
        let right = try RcloneCrypt(passphrase: passphrase)
        let wrong = try RcloneCrypt(passphrase: passphrase + "!")
        let name = try right.encryptSegment("secret.txt")
        XCTAssertThrowsError(try wrong.decryptSegment(name)) { XCTAssertEqual(($0 as? CryptError)?.kind, .wrongKeyOrDamaged) }
        let body = try right.encrypt(Data("the secret".utf8))
        XCTAssertThrowsError(try wrong.decrypt(body)) { XCTAssertEqual(($0 as? CryptError)?.kind, .wrongKeyOrDamaged) }
        var damaged = body
        damaged[damaged.count - 1] ^= 1
        XCTAssertThrowsError(try right.decrypt(damaged)) { XCTAssertEqual(($0 as? CryptError)?.kind, .wrongKeyOrDamaged) }
        XCTAssertThrowsError(try right.decrypt(Data("plain text".utf8))) { XCTAssertEqual(($0 as? CryptError)?.kind, .notEncrypted) }
        XCTAssertThrowsError(try right.decryptSegment("not base32hex!")) { XCTAssertEqual(($0 as? CryptError)?.kind, .wrongKeyOrDamaged) }
    }

    func testANameTooLongEncryptedIsRefusedByName() throws {
        let crypt = try RcloneCrypt(passphrase: passphrase)
        XCTAssertNoThrow(try crypt.encryptSegment(String(repeating: "x", count: 143)))
        XCTAssertThrowsError(try crypt.encryptSegment(String(repeating: "x", count: 160))) { error in
            XCTAssertEqual((error as? CryptError)?.kind, .nameTooLong)
            XCTAssertTrue(String(describing: error).contains("160 bytes"), "\(error)")
        }
    }

    func testSizesAndTheNonce() {
        for size: Int64 in [0, 1, 65_535, 65_536, 65_537, 1 << 30] {
            XCTAssertEqual(RcloneCrypt.plainSize(RcloneCrypt.encryptedSize(size)), size)
        }
        XCTAssertEqual(RcloneCrypt.encryptedSize(0), 32)
        XCTAssertEqual(RcloneCrypt.encryptedSize(65_537), 32 + 65_552 + 17)
        XCTAssertNil(RcloneCrypt.plainSize(31))
        XCTAssertNil(RcloneCrypt.plainSize(32 + 16), "a chunk of no bytes is never written")
        var nonce: [UInt8] = [0xFF, 0xFF, 0x01] + [UInt8](repeating: 0, count: 21)
        RcloneCrypt.increment(&nonce)
        XCTAssertEqual(Array(nonce.prefix(3)), [0x00, 0x00, 0x02])
    }
}
