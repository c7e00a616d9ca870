// The SFTP requests the provider makes, each one call on an SFTPConnection: paths are raw
// bytes (a Linux name is any bytes), failures are an `SFTPStatus` (the server said no) or a
// CloudError (the connection or the reply failed). Reads and writes are pipelined: up to
// `window` requests of `chunk` bytes in flight, as OpenSSH's own sftp client does, so a
// transfer is not one round trip per 64 KiB.

import BackupEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension SFTPConnection {
    static let chunk = 64 << 10
    static let window = 24

    func attributes(_ path: [UInt8], followLinks: Bool = false) throws -> SFTPAttributes {
        try expectAttributes(call({ $0.string(path) }, type: followLinks ? SFTP.stat : SFTP.lstat))
    }

    /// The attributes, or nil when nothing is at `path`.
    func attributesIfPresent(_ path: [UInt8]) throws -> SFTPAttributes? {
        do {
            return try attributes(path)
        } catch let status as SFTPStatus where status.isNoSuchFile {
            return nil
        }
    }

    func open(_ path: [UInt8], flags: UInt32, attributes: SFTPAttributes = SFTPAttributes()) throws -> [UInt8] {
        try expectHandle(call({ packet in
            packet.string(path)
            packet.u32(flags)
            attributes.encode(into: &packet)
        }, type: SFTP.open))
    }

    func closeHandle(_ handle: [UInt8]) throws {
        try expectOK(call({ $0.string(handle) }, type: SFTP.close))
    }

    /// Closes without reporting (a failed transfer's handle).
    func closeQuietly(_ handle: [UInt8]) {
        guard !broken else { return }
        _ = try? closeHandle(handle)
    }

    func setAttributes(_ path: [UInt8], _ attributes: SFTPAttributes) throws {
        try expectOK(call({ packet in
            packet.string(path)
            attributes.encode(into: &packet)
        }, type: SFTP.setstat))
    }

    /// lsetstat@openssh.com: a link's own times (SETSTAT would follow it). False when the
    /// server lacks the extension.
    func setLinkTimes(_ path: [UInt8], seconds: UInt32) throws -> Bool {
        guard extensions.contains("lsetstat@openssh.com") else { return false }
        try expectOK(call({ packet in
            packet.string("lsetstat@openssh.com")
            packet.string(path)
            SFTPAttributes(atime: seconds, mtime: seconds).encode(into: &packet)
        }, type: SFTP.extended))
        return true
    }

    func setAttributes(handle: [UInt8], _ attributes: SFTPAttributes) throws {
        try expectOK(call({ packet in
            packet.string(handle)
            attributes.encode(into: &packet)
        }, type: SFTP.fsetstat))
    }

    func handleAttributes(_ handle: [UInt8]) throws -> SFTPAttributes {
        try expectAttributes(call({ $0.string(handle) }, type: SFTP.fstat))
    }

    /// fsync@openssh.com: the file's bytes on the server's disk.
    func fsync(_ handle: [UInt8]) throws {
        guard extensions.contains("fsync@openssh.com") else { return }
        try expectOK(call({ packet in
            packet.string("fsync@openssh.com")
            packet.string(handle)
        }, type: SFTP.extended))
    }

    /// The names in the folder `path` with their attributes ("." and ".." left out, and any
    /// name no POSIX folder can hold: empty, or with a "/" or a NUL in it, which a hostile
    /// server could send to pass a path of several components off as one name).
    func folderEntries(_ path: [UInt8]) throws -> [(name: [UInt8], attributes: SFTPAttributes)] {
        let handle = try expectHandle(call({ $0.string(path) }, type: SFTP.opendir))
        defer { closeQuietly(handle) }
        var entries: [(name: [UInt8], attributes: SFTPAttributes)] = []
        while true {
            var (type, reader) = try call({ $0.string(handle) }, type: SFTP.readdir)
            if type == SFTP.status {
                let status = try status((type, reader))
                if status.code == SFTP.eof { return entries }
                throw status
            }
            guard type == SFTP.name else { throw CloudError(.transport, "\(server): a folder listing's reply is of type \(type)") }
            do throws(SFTPProtocolError) {
                let count = try reader.u32()
                for _ in 0..<count {
                    let name = try reader.string()
                    _ = try reader.stringRange()
                    let attributes = try SFTPAttributes.decode(&reader)
                    if name == [0x2e] || name == [0x2e, 0x2e] || name.isEmpty || name.contains(0x2f) || name.contains(0) { continue }
                    entries.append((name, attributes))
                }
            } catch {
                throw CloudError(.transport, "\(server): \(error.description)")
            }
        }
    }

    func remove(_ path: [UInt8]) throws {
        try expectOK(call({ $0.string(path) }, type: SFTP.remove))
    }

    func makeFolder(_ path: [UInt8], mode: UInt32 = 0o755) throws {
        try expectOK(call({ packet in
            packet.string(path)
            SFTPAttributes(permissions: mode).encode(into: &packet)
        }, type: SFTP.mkdir))
    }

    func removeFolder(_ path: [UInt8]) throws {
        try expectOK(call({ $0.string(path) }, type: SFTP.rmdir))
    }

    /// SSH_FXP_RENAME: OpenSSH refuses it when `to` exists (it links, then unlinks).
    func renameRefusingExisting(_ from: [UInt8], _ to: [UInt8]) throws {
        try expectOK(call({ packet in
            packet.string(from)
            packet.string(to)
        }, type: SFTP.rename))
    }

    var hasPosixRename: Bool { extensions.contains("posix-rename@openssh.com") }

    /// posix-rename@openssh.com: `rename(2)` on the server, replacing `to` in one step.
    func posixRename(_ from: [UInt8], _ to: [UInt8]) throws {
        try expectOK(call({ packet in
            packet.string("posix-rename@openssh.com")
            packet.string(from)
            packet.string(to)
        }, type: SFTP.extended))
    }

    var hasHardlink: Bool { extensions.contains("hardlink@openssh.com") }

    /// hardlink@openssh.com: `link(2)` on the server; refused when `to` exists.
    func hardlink(_ from: [UInt8], _ to: [UInt8]) throws {
        try expectOK(call({ packet in
            packet.string("hardlink@openssh.com")
            packet.string(from)
            packet.string(to)
        }, type: SFTP.extended))
    }

    /// A symbolic link at `link` with the text `target`. OpenSSH takes the two in the order
    /// opposite to the draft (target first), and so do the servers written against it.
    func symlink(target: [UInt8], at link: [UInt8]) throws {
        try expectOK(call({ packet in
            packet.string(target)
            packet.string(link)
        }, type: SFTP.symlink))
    }

    func readLink(_ path: [UInt8]) throws -> [UInt8] {
        try expectName(call({ $0.string(path) }, type: SFTP.readlink))
    }

    func realPath(_ path: [UInt8]) throws -> [UInt8] {
        try expectName(call({ $0.string(path) }, type: SFTP.realpath))
    }

    /// statvfs@openssh.com of `path`: the bytes free to an unprivileged user, or nil when the
    /// server has no such extension or did not answer.
    func freeBytes(_ path: [UInt8]) -> UInt64? {
        guard extensions.contains("statvfs@openssh.com"), !broken,
              let answer = try? call({ packet in
                  packet.string("statvfs@openssh.com")
                  packet.string(path)
              }, type: SFTP.extended),
              answer.0 == SFTP.extendedReply
        else { return nil }
        // f_bsize, f_frsize, f_blocks, f_bfree, f_bavail, …
        var reader = answer.1
        guard (try? reader.u64()) != nil, let fragmentSize = try? reader.u64(), (try? reader.u64()) != nil,
              (try? reader.u64()) != nil, let available = try? reader.u64()
        else { return nil }
        let (bytes, overflow) = available.multipliedReportingOverflow(by: fragmentSize)
        return overflow ? .max : bytes
    }

    // MARK: Transfers

    /// Writes `count` bytes, which `read(offset, buffer)` supplies, into `handle` from offset
    /// 0, with up to `window` writes in flight. `read` returns the bytes it put in the buffer
    /// (0 only at its end). Returns the bytes written.
    func writePipelined(
        _ handle: [UInt8], onBytes: (Int64) -> Void, read: (Int64, UnsafeMutableRawBufferPointer) throws -> Int
    ) throws -> Int64 {
        var buffer = [UInt8](repeating: 0, count: Self.chunk)
        var offset: Int64 = 0
        var acknowledged: Int64 = 0
        var inFlight: [(id: UInt32, count: Int)] = []
        var finished = false
        var firstFailure: Error?
        while !finished || !inFlight.isEmpty {
            while !finished && inFlight.count < Self.window && firstFailure == nil {
                let count = try buffer.withUnsafeMutableBytes { try read(offset, $0) }
                if count == 0 {
                    finished = true
                    break
                }
                let id = makeId()
                var packet = SFTPPacket(type: SFTP.write, id: id)
                packet.string(handle)
                packet.u64(UInt64(offset))
                packet.stringHeader(count: count)
                try send(packet.finished(trailing: count))
                try buffer.withUnsafeBytes { try send(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                inFlight.append((id, count))
                offset += Int64(count)
            }
            guard let oldest = inFlight.first else { break }
            inFlight.removeFirst()
            do {
                try expectOK(reply(to: oldest.id))
                acknowledged += Int64(oldest.count)
                onBytes(acknowledged)
            } catch let status as SFTPStatus {
                // Keep reading the replies in flight, so the channel stays in step.
                firstFailure = firstFailure ?? status
                finished = true
            }
        }
        if let firstFailure { throw firstFailure }
        return offset
    }

    /// Reads `handle` from offset 0 to its end, giving each piece to `write(offset, bytes)` in
    /// order, with up to `window` reads in flight. With `limit`, at most `limit` bytes are
    /// given and one byte past it is asked for, to tell a longer file; returns the bytes read
    /// (`limit + 1` when the file was longer).
    func readPipelined(
        _ handle: [UInt8], limit: Int64?, write: (Int64, ArraySlice<UInt8>) throws -> Void
    ) throws -> Int64 {
        var nextOffset: Int64 = 0
        var delivered: Int64 = 0
        var inFlight: [(id: UInt32, offset: Int64, count: Int)] = []
        var atEnd = false
        var longer = false
        func request(_ offset: Int64, _ count: Int) throws {
            let id = makeId()
            var packet = SFTPPacket(type: SFTP.read, id: id)
            packet.string(handle)
            packet.u64(UInt64(offset))
            packet.u32(UInt32(count))
            try send(packet.finished())
            inFlight.append((id, offset, count))
        }
        while true {
            while !atEnd && inFlight.count < Self.window {
                if let limit, nextOffset > limit { break }
                var count = Self.chunk
                if let limit { count = Int(min(Int64(count), limit + 1 - nextOffset)) }
                try request(nextOffset, count)
                nextOffset += Int64(count)
            }
            guard let oldest = inFlight.first else { return longer ? delivered + 1 : delivered }
            inFlight.removeFirst()
            var (type, reader) = try reply(to: oldest.id)
            if type == SFTP.status {
                let status = try status((type, reader))
                guard status.code == SFTP.eof else { throw status }
                atEnd = true
                continue
            }
            guard type == SFTP.data else { throw CloudError(.transport, "\(server): a read's reply is of type \(type)") }
            let range: Range<Int>
            do {
                range = try reader.stringRange()
            } catch {
                throw CloudError(.transport, "\(server): \(error.description)")
            }
            guard range.count <= oldest.count, oldest.offset == delivered else {
                throw CloudError(.transport, "\(server) sent a read's bytes out of order or more than were asked for")
            }
            var piece = reader.bytes[range]
            if let limit, delivered + Int64(piece.count) > limit {
                piece = piece.prefix(Int(limit - delivered))
                longer = true
            }
            if !piece.isEmpty { try write(delivered, piece) }
            delivered += Int64(piece.count)
            if longer {
                atEnd = true
                continue
            }
            if range.count < oldest.count {
                // A short read: the rest of this piece is asked again, and every request after
                // it is read and dropped (their offsets no longer follow on).
                atEnd = false
                for rest in inFlight { _ = try reply(to: rest.id) }
                inFlight.removeAll()
                nextOffset = delivered
            }
        }
    }
}
