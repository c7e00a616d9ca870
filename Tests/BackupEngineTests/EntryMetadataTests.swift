// The restore record's text form of a file's metadata reads back exactly, and refuses what it
// does not write.

import BackupEngine
import XCTest

final class EntryMetadataTests: XCTestCase {
    func testRecordTextRoundTripsEveryValue() {
        let cases = [
            EntryMetadata(mode: 0o644, mtimeNanoseconds: 981_173_106_123_456_789, uid: 1000, gid: 1000, user: "alice", group: "staff"),
            EntryMetadata(mode: 0o7777, mtimeNanoseconds: -1, uid: 0, gid: 0),
            EntryMetadata(mode: 0, mtimeNanoseconds: .min, uid: .max, gid: .max, user: "a b", group: nil),
            EntryMetadata(mode: 0o4755, mtimeNanoseconds: .max, uid: 65534, gid: 65534, user: nil, group: "domain users"),
        ]
        for metadata in cases {
            XCTAssertEqual(EntryMetadata(recordText: metadata.recordText), metadata, metadata.recordText)
        }
    }

    func testRecordTextIsTheNumbersThenTheNames() {
        let metadata = EntryMetadata(mode: 0o644, mtimeNanoseconds: -1_500, uid: 1000, gid: 0, user: "élise", group: "staff")
        XCTAssertEqual(metadata.recordText, "420 -1500 1000 0\télise\tstaff")
        XCTAssertEqual(EntryMetadata(mode: 0, mtimeNanoseconds: 0, uid: 0, gid: 0).recordText, "0 0 0 0\t\t")
    }

    /// A name holding a tab or a line feed byte is not kept, even where that byte is one
    /// Character with the mark after it (which a search by Character does not find).
    func testRecordTextLeavesOutANameWithATabOrLineFeedByte() {
        for name in ["a\tb", "a\nb", "\t\u{301}x", "x\n\u{308}"] {
            let metadata = EntryMetadata(mode: 0o600, mtimeNanoseconds: 7, uid: 1, gid: 2, user: name, group: name)
            XCTAssertEqual(metadata.recordText, "384 7 1 2\t\t", String(reflecting: name))
            XCTAssertEqual(EntryMetadata(recordText: metadata.recordText), EntryMetadata(mode: 0o600, mtimeNanoseconds: 7, uid: 1, gid: 2))
        }
    }

    func testRecordTextRefusesWhatItDoesNotWrite() {
        for text in ["", "644 1 2 3", "644 1 2\t\t", "99999 1 2 3\t\t", "644 x 2 3\t\t", "644 1 2 3 4\t\t", "644 1 -2 3\t\t",
                     "644 99999999999999999999 2 3\t\t", "644 1 2 3\ta", "644  1 2 3\t\t"] {
            XCTAssertNil(EntryMetadata(recordText: text), String(reflecting: text))
        }
    }
}
