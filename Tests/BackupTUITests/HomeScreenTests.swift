// The home screen: profiles with their last sync and hold, the selected one in detail, and
// its keys opening the other screens.

@testable import BackupTUI
import BackupApp
import BackupEngine
import BackupTerminal
import XCTest

final class HomeScreenTests: XCTestCase {
    private func fixture() throws -> TUIFixture {
        let f = try TUIFixture()
        addTeardownBlock { f.dir.cleanup() }
        return f
    }

    private func overviews() -> [ProfileOverview] {
        var documents = ProfileOverview(profile: Profile(name: "documents", source: "/home/alice/Documents", remote: "/mnt/backup/documents"))
        documents.lastSync = Date(timeIntervalSince1970: 1_796_036_520)
        documents.files = 12_345
        documents.bytes = 3_500_000
        var photos = ProfileOverview(profile: Profile(name: "photos", source: "/home/alice/Pictures", remote: "s3://alice-backup/photos"))
        photos.hold = .held(reason: "moving the NAS")
        photos.unfinishedRestore = true
        return [documents, photos]
    }

    func testListsProfilesAndShowsTheSelectedOne() throws {
        let f = try fixture()
        let rows = overviews()
        let home = HomeScreen(context: f.context, load: { _ in rows })
        assertScreen(f.frame([home]), """
             backup · profiles                                   ? help

             ▸ documents  synced 2026-11-30 11:02
               photos     never synced · held · restore unfinished

             ──────────────────────────────────────────────────────────
             Source     /home/alice/Documents
             Remote     /mnt/backup/documents
             Last sync  2026-11-30 11:02
             Backed up  12,345 files (3.3 MiB)
             Hold       none








             s sync  d dry run  r restore  c resume  ? help  q quit
            """)
    }

    func testPageKeysEndsAndSlashMoveThroughALongList() throws {
        let f = try fixture()
        let rows = (0..<40).map { index in
            ProfileOverview(profile: Profile(name: String(format: "p%02d", index), source: "/data/\(index)", remote: index == 27 ? "s3://vault/tax" : "/mnt/b/\(index)"))
        }
        let home = HomeScreen(context: f.context, load: { _ in rows })
        let (loop, buffer) = f.loop([home])
        func selected() -> String { buffer.lines.first { $0.hasPrefix(" ▸ ") }.map { String($0.dropFirst(3).prefix(3)) } ?? "" }
        f.press([.end], loop, buffer)
        XCTAssertEqual(selected(), "p39")
        f.press([.pageUp], loop, buffer)
        let page = buffer.lines.filter { $0.hasPrefix("   p") || $0.hasPrefix(" ▸ p") }.count
        XCTAssertGreaterThan(page, 1)
        XCTAssertEqual(selected(), String(format: "p%02d", 39 - page), "a page up is the rows the list shows")
        f.press([.home], loop, buffer)
        XCTAssertEqual(selected(), "p00")
        f.press([.pageDown], loop, buffer)
        XCTAssertEqual(selected(), String(format: "p%02d", page))
        // "/" finds by the remote too, and the same text again finds the next one.
        f.press([.character("/")] + TUIFixture.type("VAULT") + [.enter], loop, buffer)
        XCTAssertEqual(selected(), "p27")
        f.press([.character("/"), .control("u")] + TUIFixture.type("p3") + [.enter], loop, buffer)
        XCTAssertEqual(selected(), "p30")
        f.press([.character("/"), .enter], loop, buffer)
        XCTAssertEqual(selected(), "p31")
        f.press([.character("/"), .control("u")] + TUIFixture.type("nowhere") + [.enter], loop, buffer)
        XCTAssertEqual(selected(), "p31")
        XCTAssertTrue(buffer.text.contains("No profile's name, source or remote contains \"nowhere\""), buffer.text)
    }

    func testSelectingTheNextProfileShowsItsHoldAndUnfinishedRestore() throws {
        let f = try fixture()
        let rows = overviews()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context, load: { _ in rows })])
        f.press([.down], loop, buffer)
        XCTAssertTrue(buffer.lines[3].hasPrefix(" ▸ photos"), buffer.text)
        XCTAssertEqual(buffer.style(row: 3, column: 1), .selection)
        XCTAssertTrue(buffer.text.contains("Hold       set: moving the NAS"), buffer.text)
        XCTAssertTrue(buffer.text.contains("Restore    unfinished: press c to see and continue it"), buffer.text)
    }

    func testKeysOpenTheirScreens() throws {
        let f = try fixture()
        let profile = try f.profile()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context)])
        f.press([.character("s")], loop, buffer)
        XCTAssertTrue(loop.top is SyncScreen)
        XCTAssertEqual(f.syncs.map(\.profile.name), ["default"])
        XCTAssertFalse(f.syncs[0].job.request.consent, "a sync from home does not consent by itself")

        f.syncs[0].job.finish(.failure(AppError(.unavailable, "busy")))
        f.press([.escape, .character("h")], loop, buffer)
        XCTAssertTrue(loop.top is HoldScreen)
        f.press([.escape, .character("r")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("Restore \"default\""), "the target question is up:\n\(buffer.text)")
        XCTAssertTrue(buffer.text.contains(profile.source), "it offers the profile's source")
        f.press([.control("u")] + TUIFixture.type("/tmp/elsewhere") + [.enter], loop, buffer)
        // The groups are chosen first; this remote holds no backup, so there are none to tick.
        XCTAssertTrue(loop.top is GroupPickScreen)
        eventually("the remote was looked at") {
            f.press([], loop, buffer)
            return buffer.text.contains("No groups to choose from here")
        }
        XCTAssertTrue(f.restores.isEmpty, "nothing is downloaded before the groups are chosen")
        f.press([.enter], loop, buffer)
        XCTAssertTrue(loop.top is RestoreScreen)
        XCTAssertEqual(f.restores.last?.job.request.target, "/tmp/elsewhere")
        XCTAssertEqual(f.restores.last?.job.request.overwrite, false, "a differing local file is asked about at the prompt, never replaced unasked")
        XCTAssertEqual(f.restores.last?.placeAll, false, "every group is asked about")
    }

    func testAConfigThatCannotBeReadIsShownWithWhatToDo() throws {
        let f = try fixture()
        try f.dir.write("config/backup/config", Data("[default]\nsource = /x\n".utf8))
        let text = f.frame([HomeScreen(context: f.context)])
        XCTAssertTrue(text.contains("The config cannot be read:"), text)
        XCTAssertTrue(text.contains("has no \"remote\" key"), text)
        XCTAssertTrue(text.contains("press g to read it again"), text)
    }
}
