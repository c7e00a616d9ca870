// `backup profiles`: every profile with its source, remote, last sync and how its last run
// ended (a refused run too), and the hold; nothing is touched on a remote.

import BackupTestSupport
import Foundation
import XCTest

final class ProfilesCommandTests: XCTestCase {
    func testEveryProfileIsListedWithHowItsLastRunEnded() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let empty = try f.run("profiles", "--json")
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual((empty.result?["profiles"] as? [Any])?.count, 0)
        XCTAssertTrue(try f.run("profiles").stdout.contains("backup init"))

        try f.write("a.txt", "a")
        let other = try f.dir.makeFolder("other-remote")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("init", "--profile", "photos", "--source", f.source, "--remote", other).status, 0)
        XCTAssertEqual(try f.run("init", "--profile", "never", "--source", f.source, "--remote", f.dir.path("third")).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        XCTAssertEqual(try f.run("sync", "--profile", "photos").status, 3, "the first sync without --yes is refused")
        XCTAssertEqual(try f.run("hold", "set", "--profile", "photos", "moving house").status, 0)
        let before = try f.tree(other)

        let listing = try f.run("profiles", "--json")
        XCTAssertEqual(listing.status, 0, listing.stdout + listing.stderr)
        let profiles = try XCTUnwrap(listing.result?["profiles"] as? [[String: Any]])
        XCTAssertEqual(profiles.compactMap { $0["name"] as? String }, ["default", "photos", "never"])
        let byName = Dictionary(uniqueKeysWithValues: profiles.map { ($0["name"] as? String ?? "", $0) })
        XCTAssertEqual((byName["default"]?["last_outcome"] as? [String: Any])?["status"] as? String, "completed")
        XCTAssertNotNil(byName["default"]?["last_sync"] as? String)
        XCTAssertEqual((byName["photos"]?["last_outcome"] as? [String: Any])?["status"] as? String, "unavailable")
        XCTAssertEqual(byName["photos"]?["hold"] as? String, "moving house")
        XCTAssertEqual(byName["photos"]?["remote"] as? String, other)
        XCTAssertTrue(byName["never"]?["last_outcome"] is NSNull)

        let human = try f.run("profiles")
        XCTAssertEqual(human.status, 0)
        XCTAssertTrue(human.stdout.contains("never synced"), human.stdout)
        XCTAssertTrue(human.stdout.contains("moving house"), human.stdout)
        XCTAssertTrue(human.stdout.contains("not synced"), human.stdout)
        XCTAssertEqual(try f.tree(other), before, "listing the profiles wrote to a remote")
    }
}
