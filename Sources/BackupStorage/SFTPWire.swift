// The SFTP protocol, version 3 (draft-ietf-secsh-filexfer-02, the version OpenSSH speaks), as
// bytes: the packets this provider sends and the replies it reads, with OpenSSH's extensions
// (posix-rename, fsync, statvfs, hardlink). Everything a server sends is untrusted: a reply is
// read through `SFTPReader`, which never reads past its end and throws on a short or oversized
// field instead.

import BackupEngine

/// Packet types and constants of SFTP version 3.
enum SFTP {
    static let initPacket: UInt8 = 1, version: UInt8 = 2, open: UInt8 = 3, close: UInt8 = 4, read: UInt8 = 5
    static let write: UInt8 = 6, lstat: UInt8 = 7, fstat: UInt8 = 8, setstat: UInt8 = 9, fsetstat: UInt8 = 10
    static let opendir: UInt8 = 11, readdir: UInt8 = 12, remove: UInt8 = 13, mkdir: UInt8 = 14, rmdir: UInt8 = 15
    static let realpath: UInt8 = 16, stat: UInt8 = 17, rename: UInt8 = 18, readlink: UInt8 = 19, symlink: UInt8 = 20
    static let status: UInt8 = 101, handle: UInt8 = 102, data: UInt8 = 103, name: UInt8 = 104, attrs: UInt8 = 105
    static let extended: UInt8 = 200, extendedReply: UInt8 = 201

    // Open flags.
    static let openRead: UInt32 = 0x01, openWrite: UInt32 = 0x02, openCreate: UInt32 = 0x08
    static let openTruncate: UInt32 = 0x10, openExclusive: UInt32 = 0x20

    // Status codes.
    static let ok: UInt32 = 0, eof: UInt32 = 1, noSuchFile: UInt32 = 2, permissionDenied: UInt32 = 3
    static let failure: UInt32 = 4, opUnsupported: UInt32 = 8

    // Attribute flags.
    static let attrSize: UInt32 = 0x1, attrOwner: UInt32 = 0x2, attrPermissions: UInt32 = 0x4
    static let attrTimes: UInt32 = 0x8, attrExtended: UInt32 = 0x8000_0000

    /// The largest packet this client accepts from a server (OpenSSH sends at most 256 KiB).
    static let maxPacket = 4 << 20
}

/// A file's attributes as SFTP carries them (times in whole seconds: version 3 has no more).
struct SFTPAttributes: Sendable, Equatable {
    var size: UInt64?
    var uid: UInt32?
    var gid: UInt32?
    /// `st_mode`: the type bits and the permission bits.
    var permissions: UInt32?
    var atime: UInt32?
    var mtime: UInt32?

    var isRegularFile: Bool { permissions.map { $0 & 0o170000 == 0o100000 } ?? false }
    var isFolder: Bool { permissions.map { $0 & 0o170000 == 0o040000 } ?? false }
    var isSymlink: Bool { permissions.map { $0 & 0o170000 == 0o120000 } ?? false }

    func encode(into packet: inout SFTPPacket) {
        var flags: UInt32 = 0
        if size != nil { flags |= SFTP.attrSize }
        if uid != nil && gid != nil { flags |= SFTP.attrOwner }
        if permissions != nil { flags |= SFTP.attrPermissions }
        if atime != nil && mtime != nil { flags |= SFTP.attrTimes }
        packet.u32(flags)
        if let size { packet.u64(size) }
        if let uid, let gid { packet.u32(uid); packet.u32(gid) }
        if let permissions { packet.u32(permissions) }
        if let atime, let mtime { packet.u32(atime); packet.u32(mtime) }
    }

    static func decode(_ reader: inout SFTPReader) throws(SFTPProtocolError) -> SFTPAttributes {
        var attributes = SFTPAttributes()
        let flags = try reader.u32()
        if flags & SFTP.attrSize != 0 { attributes.size = try reader.u64() }
        if flags & SFTP.attrOwner != 0 { attributes.uid = try reader.u32(); attributes.gid = try reader.u32() }
        if flags & SFTP.attrPermissions != 0 { attributes.permissions = try reader.u32() }
        if flags & SFTP.attrTimes != 0 { attributes.atime = try reader.u32(); attributes.mtime = try reader.u32() }
        if flags & SFTP.attrExtended != 0 {
            let count = try reader.u32()
            guard count <= 1024 else { throw SFTPProtocolError("an attribute block claims \(count) extensions") }
            for _ in 0..<count {
                _ = try reader.string()
                _ = try reader.string()
            }
        }
        return attributes
    }
}

/// A reply that does not follow the protocol: the server (or what stands for it) is broken or
/// hostile. Always a Transport failure.
struct SFTPProtocolError: Error, Sendable, CustomStringConvertible {
    let reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { "the server's SFTP reply is malformed (\(reason))" }
}

/// An outgoing packet: the 4-byte length is filled in by `finished()`.
struct SFTPPacket {
    private(set) var bytes: [UInt8]

    init(type: UInt8, id: UInt32?) {
        bytes = [0, 0, 0, 0, type]
        bytes.reserveCapacity(64)
        if let id { u32(id) }
    }

    mutating func u32(_ value: UInt32) {
        bytes.append(UInt8(value >> 24)); bytes.append(UInt8(value >> 16 & 0xff))
        bytes.append(UInt8(value >> 8 & 0xff)); bytes.append(UInt8(value & 0xff))
    }

    mutating func u64(_ value: UInt64) {
        u32(UInt32(value >> 32))
        u32(UInt32(value & 0xffff_ffff))
    }

    mutating func string<C: Collection>(_ value: C) where C.Element == UInt8 {
        u32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) { string(Array(value.utf8)) }

    /// Appends a string header for `count` bytes the caller sends right after this packet.
    mutating func stringHeader(count: Int) { u32(UInt32(count)) }

    /// The packet with its length; `trailing` bytes sent after it are counted in.
    func finished(trailing: Int = 0) -> [UInt8] {
        var out = bytes
        let length = UInt32(out.count - 4 + trailing)
        out[0] = UInt8(length >> 24); out[1] = UInt8(length >> 16 & 0xff)
        out[2] = UInt8(length >> 8 & 0xff); out[3] = UInt8(length & 0xff)
        return out
    }
}

/// Reads the fields of one received packet, bounds-checked.
struct SFTPReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    mutating func u8() throws(SFTPProtocolError) -> UInt8 {
        guard remaining >= 1 else { throw SFTPProtocolError("a packet ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u32() throws(SFTPProtocolError) -> UInt32 {
        guard remaining >= 4 else { throw SFTPProtocolError("a packet ends early") }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    mutating func u64() throws(SFTPProtocolError) -> UInt64 {
        let high = try u32()
        return UInt64(high) << 32 | UInt64(try u32())
    }

    /// A string's bytes, as a range of `bytes` (no copy).
    mutating func stringRange() throws(SFTPProtocolError) -> Range<Int> {
        let count = Int(try u32())
        guard count <= remaining else { throw SFTPProtocolError("a string is longer than its packet") }
        defer { offset += count }
        return offset..<offset + count
    }

    mutating func string() throws(SFTPProtocolError) -> [UInt8] {
        Array(bytes[try stringRange()])
    }

    mutating func text() throws(SFTPProtocolError) -> String {
        String(decoding: try string(), as: UTF8.self)
    }
}

/// A reply of type STATUS: its code and the server's message (untrusted text, shown through
/// `TerminalSafe` by whoever prints it).
struct SFTPStatus: Error, Sendable {
    let code: UInt32
    let message: String

    var isNoSuchFile: Bool { code == SFTP.noSuchFile }
    var isUnsupported: Bool { code == SFTP.opUnsupported }

    var summary: String {
        let name: String =
            switch code {
            case SFTP.ok: "ok"
            case SFTP.eof: "end of file"
            case SFTP.noSuchFile: "no such file"
            case SFTP.permissionDenied: "permission denied"
            case SFTP.failure: "failure"
            case SFTP.opUnsupported: "not supported by the server"
            default: "status \(code)"
            }
        let said = message.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.prefix(200)
        return said.isEmpty ? name : "\(name): \(String(String.UnicodeScalarView(said)))"
    }
}
