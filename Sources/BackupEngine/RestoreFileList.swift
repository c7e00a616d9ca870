// The files of a restore held compactly: each file's fields packed into one byte buffer (its
// paths as bytes, its hash as 32 bytes, numbers as variable-length integers), the names that
// repeat from file to file (groups, owners) held once. A RestoreFile as a struct of Strings
// takes about 260 bytes and two allocations; packed it takes about 80 and none of its own.
// A group of a million files is offered to placement as one of these.

/// Files of a restore in order, packed; read as `RestoreFile` values.
public struct RestoreFileList: RandomAccessCollection, Sendable, Equatable, ExpressibleByArrayLiteral {
    private var bytes: [UInt8] = []
    /// Where each file's bytes start.
    private var starts: [Int] = []
    /// The group, user and group names the files name, each once.
    private var names: [String] = []
    private var nameIndex: [String: Int] = [:]

    public init() {}

    public init(_ files: some Sequence<RestoreFile>) {
        for file in files { append(file) }
    }

    public init(arrayLiteral files: RestoreFile...) {
        self.init(files)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { starts.count }

    public subscript(position: Int) -> RestoreFile {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, at: starts[position])
            return reader.file(names: names)
        }
    }

    public mutating func reserveCapacity(_ files: Int) {
        starts.reserveCapacity(files)
        bytes.reserveCapacity(files * 80)
    }

    public mutating func append(_ file: RestoreFile) {
        starts.append(bytes.count)
        var flags: UInt8 = 0
        if file.required { flags |= Flag.required }
        if file.digest != nil { flags |= Flag.digest }
        if file.size != nil { flags |= Flag.size }
        if file.metadata != nil { flags |= Flag.metadata }
        let samePlace = file.placePath.utf8.elementsEqual(file.remotePath.utf8)
        if !samePlace { flags |= Flag.placePath }
        if file.hardLinkTo != nil { flags |= Flag.hardLink }
        if file.group != nil { flags |= Flag.group }
        bytes.append(flags)
        appendText(file.remotePath)
        if !samePlace { appendText(file.placePath) }
        if let group = file.group { appendVarint(UInt64(intern(group))) }
        file.digest?.withUnsafeBytes { bytes.append(contentsOf: $0) }
        if let size = file.size { appendVarint(zigzag(size)) }
        if let meta = file.metadata {
            appendVarint(UInt64(meta.mode))
            appendVarint(zigzag(meta.mtimeNanoseconds))
            appendVarint(UInt64(meta.uid))
            appendVarint(UInt64(meta.gid))
            appendVarint(meta.user.map { UInt64(intern($0)) + 1 } ?? 0)
            appendVarint(meta.group.map { UInt64(intern($0)) + 1 } ?? 0)
        }
        if let link = file.hardLinkTo { appendText(link) }
    }

    public static func == (lhs: RestoreFileList, rhs: RestoreFileList) -> Bool {
        lhs.elementsEqual(rhs)
    }

    // MARK: Packing

    private enum Flag {
        static let required: UInt8 = 1 << 0
        static let digest: UInt8 = 1 << 1
        static let size: UInt8 = 1 << 2
        static let metadata: UInt8 = 1 << 3
        static let placePath: UInt8 = 1 << 4
        static let hardLink: UInt8 = 1 << 5
        static let group: UInt8 = 1 << 6
    }

    private mutating func intern(_ name: String) -> Int {
        if let known = nameIndex[name] { return known }
        nameIndex[name] = names.count
        names.append(name)
        return names.count - 1
    }

    private mutating func appendText(_ text: String) {
        appendVarint(UInt64(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
    }

    private mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private func zigzag(_ value: Int64) -> UInt64 {
        UInt64(bitPattern: (value << 1) ^ (value >> 63))
    }

    /// Reads back what `append` wrote (only ever bytes it wrote: no check is needed).
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at: Int

        mutating func file(names: [String]) -> RestoreFile {
            let flags = bytes[at]
            at += 1
            let remotePath = text()
            let placePath = flags & Flag.placePath != 0 ? text() : remotePath
            let group = flags & Flag.group != 0 ? names[Int(varint())] : nil
            var digest: SHA256Digest?
            if flags & Flag.digest != 0 {
                digest = SHA256Digest(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[at..<at + 32])))
                at += 32
            }
            let size = flags & Flag.size != 0 ? unzigzag(varint()) : nil
            var metadata: EntryMetadata?
            if flags & Flag.metadata != 0 {
                let mode = UInt32(truncatingIfNeeded: varint())
                let mtime = unzigzag(varint())
                let uid = UInt32(truncatingIfNeeded: varint())
                let gid = UInt32(truncatingIfNeeded: varint())
                let user = varint()
                let owner = varint()
                metadata = EntryMetadata(
                    mode: mode, mtimeNanoseconds: mtime, uid: uid, gid: gid,
                    user: user == 0 ? nil : names[Int(user - 1)], group: owner == 0 ? nil : names[Int(owner - 1)])
            }
            let hardLinkTo = flags & Flag.hardLink != 0 ? text() : nil
            return RestoreFile(
                remotePath: remotePath, placePath: placePath, required: flags & Flag.required != 0, group: group,
                digest: digest, size: size, metadata: metadata, hardLinkTo: hardLinkTo)
        }

        private mutating func text() -> String {
            let count = Int(varint())
            defer { at += count }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[at..<at + count]), as: UTF8.self)
        }

        private mutating func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = bytes[at]
                at += 1
                value |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }

        private func unzigzag(_ value: UInt64) -> Int64 {
            Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
        }
    }
}
