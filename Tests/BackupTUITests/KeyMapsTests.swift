// The key tables: help is built from them and lists every binding, no key means two things
// on one screen, and the footer's hints come from the same tables.

@testable import BackupTUI
import BackupApp
import BackupTerminal
import XCTest

final class KeyMapsTests: XCTestCase {
    func testNoKeyIsBoundTwiceInOneTable() {
        for map in KeyMaps.all {
            var seen: [Key: Action] = [:]
            for binding in map.bindings {
                for key in binding.keys {
                    XCTAssertNil(seen[key], "\(map.name): \(key.label) is bound to \(seen[key].map { "\($0)" } ?? "") and \(binding.action)")
                    seen[key] = binding.action
                }
            }
        }
    }

    func testHelpListsEveryBindingOfTheScreenAndTheGlobalOnes() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let profile = Profile(name: "p", source: "/s", remote: "/r")
        let screens: [any Screen] = [
            HomeScreen(context: f.context), FirstRunScreen(context: f.context, takenNames: []),
            SyncScreen(context: f.context, profile: profile, request: SyncRequest()),
            RestoreScreen(context: f.context, profile: profile, request: RestoreRequest()),
            ResumeScreen(context: f.context, profile: profile, request: RestoreRequest()),
            HoldScreen(context: f.context, profile: profile),
        ]
        for screen in screens {
            let help = HelpScreen(for: screen)
            let text = help.lines(width: 300).map(\.0).joined(separator: "\n")
            for map in [screen.keys, KeyMaps.global] {
                XCTAssertTrue(text.contains(map.name), "\(type(of: screen)): section \(map.name)")
                for binding in map.bindings {
                    XCTAssertTrue(text.contains(binding.keyLabel), "\(type(of: screen)): \(binding.keyLabel)")
                    XCTAssertTrue(text.contains(binding.summary), "\(type(of: screen)): \(binding.summary)")
                }
            }
        }
    }

    func testTheFooterShowsHintsFromTheTable() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let text = f.frame([HoldScreen(context: f.context, profile: Profile(name: "p", source: "/s", remote: "/r"))], columns: 80)
        let footer = text.split(separator: "\n").last.map(String.init) ?? ""
        for action in [Action.setHold, .back, .help, .quit] {
            let binding = try XCTUnwrap(KeyMaps.hold.binding(action) ?? KeyMaps.global.binding(action))
            XCTAssertTrue(footer.contains("\(binding.keys[0].label) \(binding.hint ?? "?")"), footer)
        }
    }
}
