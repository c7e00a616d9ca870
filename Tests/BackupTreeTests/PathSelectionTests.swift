// Which paths a restore limited by `--path` takes: a chosen file, everything below a chosen
// folder, and the folders above a chosen path (for their modes and times), nothing beside.

import BackupTree
import XCTest

final class PathSelectionTests: XCTestCase {
    func testAChosenPathCoversItselfAndWhatIsBelowItAndReachesTheFoldersAboveIt() throws {
        let selection = try XCTUnwrap(PathSelection(["/papers/2024/", "notes.txt"]))
        XCTAssertEqual(selection.chosen, ["papers/2024", "notes.txt"], "slashes around a path are dropped")
        for covered in ["papers/2024", "papers/2024/tax.txt", "papers/2024/q1/a.txt", "notes.txt"] {
            XCTAssertTrue(selection.covers(covered), covered)
        }
        for outside in ["papers", "papers/2023/tax.txt", "papers/20245/x", "papers/2024x", "notes.txt.bak", "photos"] {
            XCTAssertFalse(selection.covers(outside), outside)
        }
        XCTAssertTrue(selection.reaches("papers"), "the folder above a chosen one")
        XCTAssertFalse(selection.reaches("photos"))
        XCTAssertFalse(selection.reaches("papers/2023"))
    }

    func testAPathThatIsEmptyOrClimbsIsRefused() {
        for bad in ["", "/", "..", "../etc", "a/../b", "./a", "a//b", "a/."] {
            XCTAssertNil(PathSelection([bad]), bad)
        }
        XCTAssertNil(PathSelection(["good", ".."]), "one bad path refuses the selection")
    }
}
