// The listing walk on several threads finds exactly what the one-thread walk finds: every
// regular file once, at every depth, through a tree under a single folder too, never through
// a link, and without what `skip` leaves out.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class DirectoryWalkerTests: XCTestCase {
    private func makeTree(_ root: String, topFolders: Int) throws -> Set<String> {
        var expected: Set<String> = []
        func file(_ relative: String) throws {
            let path = root + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(relative.utf8).write(to: URL(fileURLWithPath: path))
            if !relative.hasSuffix(".skip") { expected.insert(relative) }
        }
        try file("at the top.txt")
        for top in 0..<topFolders {
            for middle in 0..<7 {
                for leaf in 0..<3 { try file("only/t\(top)/m \(middle)/f\(leaf).dat") }
                try file("only/t\(top)/m \(middle)/deep/er/x.dat")
            }
            try file("only/t\(top)/here.dat")
            try file("only/t\(top)/left out.skip")
        }
        try FileManager.default.createDirectory(atPath: root + "/only/empty", withIntermediateDirectories: true)
        // Links are neither listed nor followed.
        if topFolders > 0 {
            try FileManager.default.createSymbolicLink(atPath: root + "/only/link", withDestinationPath: root + "/only/t0")
            try FileManager.default.createSymbolicLink(atPath: root + "/only/t0/file link", withDestinationPath: root + "/at the top.txt")
        }
        return expected
    }

    func testTheWalkOnSeveralThreadsFindsWhatOneThreadFinds() throws {
        for topFolders in [0, 1, 2, 40] {
            let dir = try TempDir("walker")
            let root = dir.path("tree")
            let expected = try makeTree(root, topFolders: topFolders)
            let walker = DirectoryWalker(rootPath: root) { _, name in name.hasSuffix(".skip") }
            let rootFD = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            XCTAssertGreaterThanOrEqual(rootFD, 0)
            defer { close(rootFD) }
            var single: [String] = []
            try walker.walk(rootFD) { path, _ in single.append(path) }
            XCTAssertEqual(Set(single), expected)
            XCTAssertEqual(single.count, expected.count)
            for workers in [1, 2, 3] {
                let taken = Mutex<[String]>([])
                try walker.walk(rootFD, workers: workers, flushEvery: 5, empty: { [String]() }, visit: { paths, path, status in
                    XCTAssertEqual(status.st_mode & S_IFMT, S_IFREG, path)
                    paths.append(path)
                }, flush: { paths in
                    XCTAssertLessThanOrEqual(paths.count, 5, "a thread held more than it hands over at a time")
                    taken.withLock { $0.append(contentsOf: paths) }
                    paths.removeAll()
                })
                let all = taken.withLock { $0 }
                XCTAssertEqual(all.count, expected.count, "\(workers) workers, \(topFolders) folders: a file was listed twice or not at all")
                XCTAssertEqual(Set(all), expected, "\(workers) workers, \(topFolders) folders")
            }
        }
    }

    func testAnUnreadableFolderFailsTheWalkNamingIt() throws {
        guard geteuid() != 0 else { throw XCTSkip("root reads any folder") }
        let dir = try TempDir("walker")
        let root = dir.path("tree")
        _ = try makeTree(root, topFolders: 12)
        chmod(root + "/only/t5", 0)
        defer { chmod(root + "/only/t5", 0o755) }
        let rootFD = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(rootFD) }
        XCTAssertThrowsError(try DirectoryWalker(rootPath: root) { _, _ in false }.walk(rootFD, workers: 2, empty: { 0 }, visit: { count, _, _ in count += 1 }, flush: { _ in })) { error in
            XCTAssertTrue(String(describing: error).contains("only/t5"), "\(error)")
        }
    }
}
