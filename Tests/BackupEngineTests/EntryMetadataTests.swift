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

    func testRecordTextRefusesWhatItDoesNotWrite() {
        for text in ["", "644 1 2 3", "644 1 2\t\t", "99999 1 2 3\t\t", "644 x 2 3\t\t", "644 1 2 3 4\t\t", "644 1 -2 3\t\t",
                     "644 99999999999999999999 2 3\t\t", "644 1 2 3\ta", "644  1 2 3\t\t"] {
            XCTAssertNil(EntryMetadata(recordText: text), String(reflecting: text))
        }
    }
}
