// The restore side of the tree: plans built from a real probe of a real backup, staging
// inside the target, hash checks, conflicts, and placement that never leaves the target.

import BackupEngine
import BackupStorage
import BackupTestSupport
import BackupTree
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import XCTest

final class RestoreTargetTests: XCTestCase {
    private var dir: TempDir!
    private var storage: FolderStorage!
    private let groups = [
        MarkerGroup(name: "documents", required: true, patterns: ["docs/"], order: 1),
        MarkerGroup(name: "photos", required: false, patterns: ["*.jpg"], order: 2),
        MarkerGroup(name: "settings", required: true, patterns: ["/.config/"], order: 0),
    ]
    private let files: [(String, String)] = [
        ("docs/report.txt", "quarterly"), ("docs/deep/er/notes.txt", "deep"), ("photos/2024/beach.jpg", "sand"),
        ("photos/cat.jpg", "meow"), (".config/app.ini", "[app]"), ("README", "read me"), ("Ünïcødé 日本/ファイル.txt", "wide"),
    ]

    override func setUp() async throws {
        dir = try TempDir("backup-restore")
        try dir.makeFolder("remote")
        storage = FolderStorage(root: dir.path("remote"))
        // A real backup: the sync engine writes the files and a real marker.
        let state = try StateStore(path: dir.path("state.db"))
        let engine = SyncEngine(storage: storage, state: state)
        let marker = Marker(groups: groups, hashes: Dictionary(uniqueKeysWithValues: files.map { ($0.0, SHA256Hasher.hex(Data($0.1.utf8))) }))
        let entries = files.map { file in
            SyncEntry(path: file.0, size: Int64(file.1.utf8.count), hash: SHA256Hasher.hex(Data(file.1.utf8)), source: .bytes(Data(file.1.utf8)))
        }
        guard case .completed = try await engine.sync(SyncSnapshot(entries: SyncEntryList(entries), marker: try marker.encoded())) else {
            return XCTFail("the backup did not complete")
        }
    }

    override func tearDown() {
        dir.cleanup()
    }

    private func found() async throws -> (Data, SourceRef, [RemoteFile]) {
        let state = try StateStore(path: dir.path("state.db"))
        guard case .found(let marker, let source, let listing) = await SyncEngine(storage: storage, state: state).probe() else {
            throw XCTSkip("no backup")
        }
        return (marker, source, Array(listing))
    }

    private func planned(into target: RestoreTarget, extra: [RemoteFile] = [], only: Set<String>? = nil) async throws -> PlannedRestore {
        let (marker, source, listing) = try await found()
        return try RestorePlanner.plan(marker: marker, source: source, files: listing + extra, target: target, only: only)
    }

    func testPlanGroupsByMarkerRequiredFirstOtherFilesLast() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        let result = try await planned(into: target)
        XCTAssertEqual(result.groups.map(\.name), ["settings", "documents", "photos", RestorePlanner.otherFilesGroup])
        XCTAssertEqual(result.groups.map(\.required), [true, true, false, false])
        XCTAssertEqual(result.plan.files.map(\.remotePath), [
            ".config/app.ini", "docs/deep/er/notes.txt", "docs/report.txt", "photos/2024/beach.jpg", "photos/cat.jpg",
            "README", "Ünïcødé 日本/ファイル.txt",
        ])
        XCTAssertFalse(result.plan.files.contains { $0.remotePath == SyncEngine.defaultMarkerPath })
        XCTAssertEqual(result.plan.files[0].sha256, SHA256Hasher.hex(Data("[app]".utf8)))
        XCTAssertEqual(result.plan.files[0].size, 5)
        XCTAssertEqual(result.plan.files[0].placePath, ".config/app.ini")
        XCTAssertEqual(result.plan.target, target.root)
    }

    func testPlanOnlyNamedGroups() async throws {
        let result = try await planned(into: RestoreTarget(root: dir.path("target")), only: ["photos"])
        XCTAssertEqual(result.plan.files.map(\.remotePath), ["photos/2024/beach.jpg", "photos/cat.jpg"])
    }

    func testPlanRefusesPathsThatWouldLeaveTheTarget() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        let hostile = ["/etc/passwd", "../escape.txt", "a/../../b", "a//b", ".backup-staging/x", "./x"].map {
            RemoteFile(path: $0, size: 1, remoteId: nil)
        }
        let result = try await planned(into: target, extra: hostile)
        XCTAssertEqual(Set(result.refused.map(\.remotePath)), Set(hostile.map(\.path)))
        for refused in result.refused {
            XCTAssertTrue(refused.description.contains(refused.remotePath), refused.description)
        }
        XCTAssertEqual(result.plan.files.count, files.count, "nothing planned for a refused path")
    }

    func testANegativeListedSizeIsRefusedByName() async throws {
        let result = try await planned(into: RestoreTarget(root: dir.path("target")), extra: [RemoteFile(path: "neg.txt", size: -1)])
        XCTAssertEqual(result.refused.map(\.remotePath), ["neg.txt"])
        XCTAssertFalse(result.plan.files.contains { $0.remotePath == "neg.txt" })
    }

    func testDuplicateListingEntriesArePlannedOnceAndTheRestoreCompletes() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        let (marker, source, listing) = try await found()
        // The same files listed twice more, the second time with another size: the first wins.
        let doubled = listing + listing + listing.map { RemoteFile(path: $0.path, size: $0.size + 1, remoteId: nil) }
        let result = try RestorePlanner.plan(marker: marker, source: source, files: doubled, target: target)
        XCTAssertEqual(result.plan.files.count, files.count)
        XCTAssertEqual(Set(result.plan.files.map(\.placePath)).count, files.count)
        let engine = RestoreEngine(storage: storage, record: try RestoreRecord(path: dir.path("record.db")), staging: target)
        let outcome = try await engine.start(result.plan, placement: StagedPlacement(target: target))
        guard case .completed = outcome else { return XCTFail("expected completed, got \(outcome)") }
    }

    func testARecordRefusesAPlanThatPlacesTwoFilesAtOnePath() throws {
        let record = try RestoreRecord(path: dir.path("record.db"))
        let source = SourceRef(identityKey: "id", markerRemoteId: nil, markerFingerprint: "f")
        let plan = RestorePlan(source: source, target: dir.path("target"), files: [
            RestoreFile(remotePath: "a.txt"), RestoreFile(remotePath: "old/a.txt", placePath: "a.txt"),
        ])
        XCTAssertThrowsError(try record.begin(plan))
        XCTAssertNil(try record.source(), "a refused plan left a record")
    }

    func testStagingTakesManyDownloadsAtOnceIntoFoldersTheyCreateTogether() async throws {
        // Downloads in flight together create the same new staging folders and temporaries side
        // by side: each lands whole, under its own name, and placement moves them all.
        let remote = try dir.makeFolder("remote-many")
        let many = (0..<60).map { ("a/b/c\($0 % 3)/d\($0 % 2)/f\($0).txt", String(repeating: "\($0) ", count: $0 * 50 + 1)) }
        let marker = Marker(groups: [], hashes: Dictionary(uniqueKeysWithValues: many.map { ($0.0, SHA256Hasher.hex(Data($0.1.utf8))) }))
        let sync = SyncEngine(storage: FolderStorage(root: remote), state: try StateStore(path: dir.path("many.db")), transfers: 4)
        let entries = many.map { SyncEntry(path: $0.0, size: Int64($0.1.utf8.count), hash: SHA256Hasher.hex(Data($0.1.utf8)), source: .bytes(Data($0.1.utf8))) }
        guard case .completed = try await sync.sync(SyncSnapshot(entries: SyncEntryList(entries), marker: try marker.encoded())),
              case .found(let data, let source, let listing) = await sync.probe() else { return XCTFail("the backup did not complete") }
        let storage = FaultyStorage(FolderStorage(root: remote))
        storage.setHook { call, _ in
            if case .download = call { try await Task.sleep(for: .milliseconds(Int.random(in: 0...3))) }
        }
        // A few times over: the folders are made by whichever download comes first.
        for round in 0..<4 {
            let target = RestoreTarget(root: dir.path("target-many-\(round)"))
            let plan = try RestorePlanner.plan(marker: data, source: source, files: listing, target: target).plan
            let record = try RestoreRecord(path: dir.path("many-record-\(round).db"))
            let engine = RestoreEngine(storage: storage, record: record, staging: target, transfers: 8)
            let outcome = try await engine.start(plan, placement: StagedPlacement(target: target))
            guard case .completed = outcome else { return XCTFail("round \(round): \(outcome)") }
            for (path, text) in many {
                XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/" + path), Data(text.utf8), path)
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: target.stagingRoot))
        }
    }

    func testADownloadIsInTheStagingFolderUnderNoNameUntilItIsKept() throws {
        // A download fills a file with no name (nothing of it for a stopped run to leave
        // behind); keeping it links it in whole, over the staged file of an earlier try.
        let target = RestoreTarget(root: dir.path("target-unnamed"))
        try target.createFolder()
        try target.prepare()
        let file = RestoreFile(remotePath: "docs/report.txt", size: 9)
        let folder = target.stagingRoot + "/docs"
        for text in ["first try", "again now"] {
            let write = try target.create(for: file)
            XCTAssertNil(write.temporaryName, "this filesystem has unnamed files: the download should be one")
            XCTAssertEqual(Data(text.utf8).withUnsafeBytes { Glibc.write(write.fd, $0.baseAddress, $0.count) }, 9)
            let whileFilling = try FileManager.default.contentsOfDirectory(atPath: folder)
            XCTAssertEqual(whileFilling, text == "first try" ? [] : ["report.txt"], "while filling \(text)")
            try target.keep(write, for: file)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), ["report.txt"])
            XCTAssertEqual(FileManager.default.contents(atPath: folder + "/report.txt"), Data(text.utf8))
        }
        let discarded = try target.create(for: RestoreFile(remotePath: "docs/other.txt", size: 1))
        target.discard(discarded)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), ["report.txt"])
    }

    func testFullRestoreIsByteIdenticalAndStagingIsRemoved() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        try target.prepare()
        let plan = try await planned(into: target).plan
        let record = try RestoreRecord(path: dir.path("record.db"))
        let engine = RestoreEngine(storage: storage, record: record, staging: target)
        guard case .completed = try await engine.start(plan, placement: StagedPlacement(target: target)) else {
            return XCTFail("restore did not complete")
        }
        for (path, text) in files {
            XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/" + path), Data(text.utf8), path)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.stagingRoot))
    }

    func testDifferentLocalFileRejectsItsGroupWithoutOverwrite() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        try dir.write("target/photos/cat.jpg", Data("a different cat".utf8))
        try dir.write("target/docs/report.txt", Data("quarterly".utf8))  // identical: no conflict
        let plan = try await planned(into: target).plan
        let engine = RestoreEngine(storage: storage, record: try RestoreRecord(path: dir.path("record.db")), staging: target)
        let conflicts = ConflictLog()
        let outcome = try await engine.start(plan, placement: StagedPlacement(target: target, onConflict: conflicts.add))
        XCTAssertEqual(outcome, .partial(pending: ["photos/2024/beach.jpg", "photos/cat.jpg"]))
        XCTAssertEqual(conflicts.all.flatMap(\.conflicts).map(\.remotePath), ["photos/cat.jpg"])
        XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/photos/cat.jpg"), Data("a different cat".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.root + "/photos/2024/beach.jpg"), "the whole group waits")

        // With --overwrite, the resumed run places it.
        let resumed = try await engine.resume(placement: StagedPlacement(target: target, overwrite: true))
        guard case .completed = resumed else { return XCTFail("expected completed, got \(resumed)") }
        XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/photos/cat.jpg"), Data("meow".utf8))
    }

    func testKeepingMyDifferingFilePlacesTheRestAndOffersItAgainNextRun() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        try dir.write("target/photos/cat.jpg", Data("a different cat".utf8))
        let plan = try await planned(into: target).plan
        let engine = RestoreEngine(storage: storage, record: try RestoreRecord(path: dir.path("record.db")), staging: target)
        let offers = Mutex<[PlacementOffer]>([])
        // Asked (someone answers, without --overwrite): the group is offered with its conflict,
        // and the answer keeps the differing local file.
        let keepMine = StagedPlacement(target: target, offersConflicts: true) { offer in
            offers.withLock { $0.append(offer) }
            return .placedKeepingLocal(Set(offer.differing.map(\.remotePath)))
        }
        let outcome = try await engine.start(plan, placement: keepMine)
        XCTAssertEqual(outcome, .partial(pending: ["photos/cat.jpg"]), "only the kept file is still to restore")
        let photos = try XCTUnwrap(offers.withLock { $0 }.first { $0.group.name == "photos" })
        XCTAssertEqual(photos.differing.map(\.remotePath), ["photos/cat.jpg"])
        XCTAssertFalse(photos.overwriteAllowed)
        XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/photos/cat.jpg"), Data("a different cat".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/photos/2024/beach.jpg"), Data("sand".utf8), "the rest of the group is placed")
        let record = try RestoreRecord(path: dir.path("record.db"))
        var attempts: [String: Int] = [:]
        try record.forEachFile(.notDone) { attempts[$0.file.remotePath] = $0.attempts }
        XCTAssertEqual(attempts, ["photos/cat.jpg": 0], "keeping is no failed attempt")

        // The next run offers the kept file alone; overwriting it then completes the restore.
        let again = Mutex<[[String]]>([])
        let overwrite = StagedPlacement(target: target, offersConflicts: true) { offer in
            again.withLock { $0.append(offer.group.files.map(\.remotePath)) }
            return .placed
        }
        let resumed = try await engine.resume(placement: overwrite)
        guard case .completed = resumed else { return XCTFail("expected completed, got \(resumed)") }
        XCTAssertEqual(again.withLock { $0 }, [["photos/cat.jpg"]])
        XCTAssertEqual(FileManager.default.contents(atPath: target.root + "/photos/cat.jpg"), Data("meow".utf8))
    }

    func testPlacementNeverFollowsALinkOutOfTheTarget() async throws {
        let target = RestoreTarget(root: dir.path("target"))
        try dir.makeFolder("outside")
        try dir.makeFolder("target")
        XCTAssertEqual(symlink(dir.path("outside"), dir.path("target/docs")), 0)
        let plan = try await planned(into: target).plan
        let engine = RestoreEngine(storage: storage, record: try RestoreRecord(path: dir.path("record.db")), staging: target)
        let outcome = try await engine.start(plan, placement: StagedPlacement(target: target, overwrite: true))
        guard case .failed = outcome else { return XCTFail("expected the required documents group to fail, got \(outcome)") }
        XCTAssertEqual(try dir.entries(under: "outside"), [], "nothing written through the link")
    }

    func testConflictReportsALinkInTheWay() throws {
        let target = RestoreTarget(root: dir.path("target"))
        try dir.makeFolder("outside")
        try dir.makeFolder("target")
        XCTAssertEqual(symlink(dir.path("outside"), dir.path("target/docs")), 0)
        let file = RestoreFile(remotePath: "docs/report.txt", size: 9)
        XCTAssertEqual(try target.conflict(for: file)?.kind, .notARegularFile)
    }

    func testConflictsOfAGroupWalkEachFolderOnceAndFindWhatEachFileWould() throws {
        let target = RestoreTarget(root: dir.path("target"))
        try dir.makeFolder("outside")
        try dir.makeFolder("target/docs")
        _ = try dir.write("target/docs/a.txt", Data("other".utf8))  // differs (size)
        _ = try dir.write("target/docs/b.txt", Data("bb".utf8))  // the same size: the same file
        try dir.makeFolder("target/docs/c.txt")  // a folder where a file goes
        XCTAssertEqual(symlink(dir.path("outside"), dir.path("target/linked")), 0)
        _ = try dir.write("outside/x.txt", Data("x".utf8))
        _ = try dir.write("target/top.txt", Data("t".utf8))
        let files = [
            RestoreFile(remotePath: "docs/a.txt", size: 1), RestoreFile(remotePath: "docs/b.txt", size: 2),
            RestoreFile(remotePath: "docs/c.txt", size: 3), RestoreFile(remotePath: "docs/new.txt", size: 3),
            RestoreFile(remotePath: "linked/x.txt", size: 1), RestoreFile(remotePath: "linked/y.txt", size: 1),
            RestoreFile(remotePath: "missing/deep/z.txt", size: 1), RestoreFile(remotePath: "top.txt", size: 5),
            RestoreFile(remotePath: "docs/a.txt", placePath: "docs/again.txt", size: 1),
        ]
        let batch = try target.conflicts(for: files)
        XCTAssertEqual(batch, try files.compactMap { try target.conflict(for: $0) })
        XCTAssertEqual(batch.map(\.remotePath), ["docs/a.txt", "docs/c.txt", "linked/x.txt", "linked/y.txt", "top.txt"])
        XCTAssertEqual(batch.map(\.kind), [.differentFile, .notARegularFile, .notARegularFile, .notARegularFile, .differentFile])
        XCTAssertEqual(batch[2].localPath, target.root + "/linked", "the link is named, not what is behind it")
    }
}

/// Collects the offers StagedPlacement rejected for conflicts.
final class ConflictLog: Sendable {
    private let offers = Mutex<[PlacementOffer]>([])
    var all: [PlacementOffer] { offers.withLock { $0 } }
    var add: @Sendable (PlacementOffer) -> Void { { offer in self.offers.withLock { $0.append(offer) } } }
}
