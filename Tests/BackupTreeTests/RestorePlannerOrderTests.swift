// The planner takes the listing in byte order: each group's files come out sorted, a path
// listed twice is planned once (its first entry), and two names that differ only in Unicode
// normalisation are two files.

import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class RestorePlannerOrderTests: XCTestCase {
    func testTheListingIsPlannedInByteOrderOncePerPathAndNamesDifferingInNormalisationStayTwoFiles() throws {
        let dir = try TempDir("planner-order")
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        XCTAssertEqual(composed, decomposed, "Swift takes them for one String")
        let listing = [
            RemoteFile(path: "z/last", size: 1), RemoteFile(path: decomposed, size: 2), RemoteFile(path: "a", size: 3),
            RemoteFile(path: composed, size: 4), RemoteFile(path: "a", size: 99), RemoteFile(path: SyncEngine.defaultMarkerPath, size: 5),
            RemoteFile(path: "m/é", size: 6),
        ]
        let marker = Marker(groups: [MarkerGroup(name: "zed", required: true, patterns: ["z/"], order: 0)])
        let planned = RestorePlanner.plan(
            marker: marker, source: SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f"), files: listing,
            target: RestoreTarget(root: dir.path("t")))
        XCTAssertEqual(planned.refused, [])
        let paths = planned.plan.files.map { Array($0.remotePath.utf8) }
        // The required group first; then the other files in byte order ("cafe\u{301}" sorts
        // before "caf\u{E9}": 0x65 < 0xC3).
        XCTAssertEqual(paths, [Array("z/last".utf8), Array("a".utf8), Array(decomposed.utf8), Array(composed.utf8), Array("m/é".utf8)])
        XCTAssertEqual(planned.plan.files.first { $0.remotePath == "a" }?.size, 3, "the first entry of a path listed twice")
    }

    /// The planner reads the marker as a stream; from the same marker decoded first it
    /// makes the very same plan (files, order, hashes, metadata, links, tree and refusals).
    func testAStreamedMarkerAndADecodedOneMakeTheSamePlan() throws {
        let dir = try TempDir("planner-stream")
        let meta = EntryMetadata(mode: 0o640, mtimeNanoseconds: 7, uid: 1, gid: 2, user: "u", group: "g")
        var entries: [String: MarkerEntry] = [:]
        var hashes: [String: String] = [:]
        var listing: [RemoteFile] = []
        for index in 0..<300 {
            let path = "d\(index % 7)/f\(index).\(index % 3 == 0 ? "txt" : "jpg")"
            entries[path] = MarkerEntry(kind: .file, size: Int64(index), metadata: meta)
            if index % 2 == 0 { hashes[path] = SHA256Hasher.hex(Data(path.utf8)) }
            listing.append(RemoteFile(path: path, size: Int64(index)))
        }
        for folder in 0..<7 { entries["d\(folder)"] = MarkerEntry(kind: .folder, size: 0, metadata: meta) }
        entries["d1/f1.jpg.link"] = MarkerEntry(kind: .hardLink(to: "d1/f1.jpg"), size: 1, metadata: meta)
        listing.append(RemoteFile(path: "d1/f1.jpg.link", size: 1))
        entries["d2/sym"] = MarkerEntry(kind: .symlink(target: "../x"), size: 0, metadata: meta)
        entries["d0"] = MarkerEntry(kind: .symlink(target: "elsewhere"), size: 0, metadata: meta)  // files lie below it: refused
        listing.append(RemoteFile(path: "stray/not-in-marker", size: 5))
        listing.append(RemoteFile(path: "../escape", size: 5))
        listing.shuffle()
        let marker = Marker(
            groups: [
                MarkerGroup(name: "text", required: true, patterns: ["*.txt"], order: 1),
                MarkerGroup(name: "pictures", required: false, patterns: ["*.jpg"], order: 0),
            ],
            hashes: hashes, entries: entries, writer: "w@h")
        let source = SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f")
        let target = RestoreTarget(root: dir.path("t"))
        let decoded = RestorePlanner.plan(marker: marker, source: source, files: listing, target: target)
        let streamed = try RestorePlanner.plan(marker: try marker.encoded(), source: source, files: listing, target: target)
        XCTAssertEqual(streamed, decoded)
        XCTAssertEqual(streamed.plan.tree.map(\.path), ["d1", "d2", "d2/sym", "d3", "d4", "d5", "d6"])
        XCTAssertEqual(streamed.refused.map(\.remotePath), ["../escape", "d0"])
        XCTAssertEqual(streamed.plan.files.first?.group, "text", "the required group first")
        XCTAssertEqual(streamed.plan.files.count, 302)
        XCTAssertEqual(streamed.plan.files.first { $0.remotePath == "d1/f1.jpg.link" }?.hardLinkTo, "d1/f1.jpg")
        XCTAssertEqual(streamed.plan.files.first { $0.remotePath == "d0/f0.txt" }?.sha256, hashes["d0/f0.txt"])
        XCTAssertNil(streamed.plan.files.first { $0.remotePath == "stray/not-in-marker" }?.metadata)
        // A hard link to a file this restore does not place (not in --only) is made a copy.
        let others = try RestorePlanner.plan(
            marker: try marker.encoded(), source: source, files: listing, target: target, only: [RestorePlanner.otherFilesGroup])
        XCTAssertEqual(others.plan.files.map(\.remotePath), ["d1/f1.jpg.link", "stray/not-in-marker"])
        XCTAssertNil(others.plan.files.first?.hardLinkTo)
        let onlyLinks = try RestorePlanner.plan(
            marker: try marker.encoded(), source: source, files: listing.filter { $0.path != "d1/f1.jpg" }, target: target)
        XCTAssertNil(onlyLinks.plan.files.first { $0.remotePath == "d1/f1.jpg.link" }?.hardLinkTo)
    }
}
