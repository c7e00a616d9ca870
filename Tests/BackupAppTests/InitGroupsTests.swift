// A new profile for a remote that already holds a backup takes that backup's groups from its
// marker (unless groups are given), so its first sync does not erase them; the marker is
// untrusted, and groups a profile could not hold are refused with a note.

@testable import BackupApp
import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class InitGroupsTests: XCTestCase {
    private func backedUp() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("papers/tax.txt", "tax")
        try f.write("photos/beach.jpg", "sand")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote,
                                 "--group", "papers=papers/,required", "--group", "photos=photos/").status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        return f
    }

    private func config(_ f: CLIFixture) throws -> String {
        try String(contentsOfFile: f.dir.path("config/backup/config"), encoding: .utf8)
    }

    func testANewProfileForABackedUpRemoteTakesTheMarkersGroups() throws {
        let f = try backedUp()
        let source = try f.dir.makeFolder("new-machine")
        let made = try f.run("init", "--profile", "laptop", "--source", source, "--remote", f.remote)
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertTrue(made.stdout.contains("took the groups of the backup on \(f.remote) from its marker: papers (required), photos"), made.stdout)
        let written = try config(f)
        let section = written.components(separatedBy: "[laptop]").last ?? ""
        XCTAssertTrue(section.contains("papers"), written)
        XCTAssertTrue(section.contains("photos/"), written)

        // A restore then a sync of the new profile keep them in the marker.
        XCTAssertEqual(try f.run("restore", "--profile", "laptop", "--place", "all").status, 0)
        XCTAssertEqual(try f.run("sync", "--profile", "laptop", "--yes").status, 0)
        let marker = try XCTUnwrap(FileManager.default.contents(atPath: f.remote + "/" + SyncEngine.defaultMarkerPath))
        let groups = try Marker.header(marker).groups
        XCTAssertEqual(groups.map(\.name), ["papers", "photos"])
        XCTAssertEqual(groups.map(\.required), [true, false])
    }

    func testGroupsGivenToInitAreKeptAndAnEmptyRemoteGivesNone() throws {
        let f = try backedUp()
        let source = try f.dir.makeFolder("other")
        let given = try f.run("init", "--profile", "mine", "--source", source, "--remote", f.remote, "--group", "all=*")
        XCTAssertFalse(given.stdout.contains("took the groups"), given.stdout)
        let empty = try f.dir.makeFolder("empty-remote")
        let none = try f.run("init", "--profile", "fresh", "--source", source, "--remote", empty)
        XCTAssertEqual(none.status, 0, none.stderr)
        XCTAssertFalse(none.stdout.contains("groups"), none.stdout)
    }

    func testAMarkersGroupAProfileCannotHoldIsRefusedWithANote() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "alpha")
        // A marker another tool (or a hostile server) wrote: a group name with a line break in it.
        let writer = try Marker.Writer(groups: [MarkerGroup(name: "evil\nwriter = x", required: true, patterns: ["*"], order: 0)], writer: nil)
        try writer.append(path: "a.txt", entry: MarkerEntry(kind: .file, size: 5, metadata: EntryMetadata(mode: 0o644, mtimeNanoseconds: 0, uid: 0, gid: 0)), hash: nil)
        try writer.finish().write(to: URL(fileURLWithPath: f.remote + "/" + SyncEngine.defaultMarkerPath))
        try Data("alpha".utf8).write(to: URL(fileURLWithPath: f.remote + "/a.txt"))
        let made = try f.run("init", "--source", f.source, "--remote", f.remote)
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertTrue(made.stdout.contains("has groups this profile could not take"), made.stdout)
        XCTAssertFalse(made.stdout.contains("\n writer"), made.stdout)
        let written = try config(f)
        XCTAssertFalse(written.contains("evil"), written)
    }
}
