// rclone crypt's format, written from its documentation and checked against the pinned rclone
// (RcloneCryptTests): keys by scrypt, names by EME over AES-256 (padded, base32hex), contents
// in 64 KiB chunks of NaCl secretbox. A `backup` remote encrypted this way is readable by
// rclone alone (mount, copy, cryptcheck), so nobody is locked in.
//
// Keys: scrypt(passphrase, salt, N = 16384, r = 8, p = 1) gives 80 bytes: the data key (32),
// the name key (32) and the name tweak (16). The salt is the second passphrase's bytes, or
// rclone's default salt without one.
//
// A name: each path segment is padded (PKCS#7 to 16 bytes, always at least one byte),
// encrypted with EME (Halevi and Rogaway's wide-block mode, as rfjakob/eme does it) under the
// name key and tweak, and written in base32hex, lower case, without `=`.
//
// A file: `RCLONE\0\0`, a random 24-byte nonce, then each 64 KiB of plain bytes (the last one
// shorter; none for an empty file) sealed by secretbox (16-byte tag first) under the data key
// with the nonce, which is incremented (little-endian) after every chunk.

import BackupEngine
import CCrypto
import CSodium
import Foundation

/// A failure of rclone crypt's format: a wrong passphrase, a damaged or foreign file.
public struct CryptError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A chunk (or a name) does not open under these keys.
        case wrongKeyOrDamaged
        /// Not a file of this format (no `RCLONE\0\0` header, cut short).
        case notEncrypted
        /// A name too long for its encrypted form (over 255 bytes a segment).
        case nameTooLong
        /// The system refused a call (libsodium, OpenSSL).
        case system
    }

    public let kind: Kind
    public let message: String
    /// The errno of a failed write to the destination (not of a read of the source): the
    /// destination's failure, for the caller to map as its own (a full disk).
    public var writeErrno: Int32?

    public init(_ kind: Kind, _ message: String, writeErrno: Int32? = nil) {
        self.kind = kind
        self.message = message
        self.writeErrno = writeErrno
    }

    public var description: String { message }
}

/// The keys of one crypt remote, and what they do to names and contents.
public struct RcloneCrypt: Sendable {
    /// rclone's salt when no second passphrase is set.
    public static let defaultSalt: [UInt8] = [0xA8, 0x0D, 0xF4, 0x3A, 0x8F, 0xBD, 0x03, 0x08, 0xA7, 0xCA, 0xB8, 0x3E, 0x58, 0x1F, 0x86, 0xB1]
    /// The first bytes of every encrypted file.
    public static let magic: [UInt8] = Array("RCLONE".utf8) + [0, 0]
    public static let nonceSize = 24
    public static let headerSize = magic.count + nonceSize
    /// Plain bytes in one chunk, and what secretbox adds to each.
    public static let chunkSize = 64 << 10
    public static let tagSize = 16
    /// The longest encrypted name segment filesystems and servers take.
    public static let maxEncryptedSegment = 255

    let dataKey: [UInt8]
    let nameKey: [UInt8]
    let nameTweak: [UInt8]

    /// The keys for `passphrase` and the optional second one (rclone's `password2`, the salt).
    public init(passphrase: String, salt: String? = nil) throws(CryptError) {
        guard Self.sodiumReady else { throw CryptError(.system, "libsodium could not be initialised") }
        let saltBytes = salt.map { Array($0.utf8) } ?? Self.defaultSalt
        var key = [UInt8](repeating: 0, count: 80)
        if !passphrase.isEmpty || salt.map({ !$0.isEmpty }) == true {
            let pass = Array(passphrase.utf8)
            let status = pass.withUnsafeBufferPointer { p in
                saltBytes.withUnsafeBufferPointer { s in
                    key.withUnsafeMutableBufferPointer { k in
                        EVP_PBE_scrypt(
                            p.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, p.count,
                            s.baseAddress, s.count, 16384, 8, 1, 64 << 20, k.baseAddress, k.count)
                    }
                }
            }
            guard status == 1 else { throw CryptError(.system, "scrypt failed (OpenSSL EVP_PBE_scrypt)") }
        }
        dataKey = Array(key[0..<32])
        nameKey = Array(key[32..<64])
        nameTweak = Array(key[64..<80])
    }

    private static let sodiumReady: Bool = sodium_init() >= 0

    // MARK: Sizes

    /// The size of the encrypted file for a plain file of `size` bytes.
    public static func encryptedSize(_ size: Int64) -> Int64 {
        let chunks = size / Int64(chunkSize)
        let rest = size % Int64(chunkSize)
        return Int64(headerSize) + chunks * Int64(chunkSize + tagSize) + (rest > 0 ? rest + Int64(tagSize) : 0)
    }

    /// The plain size of an encrypted file of `size` bytes, or nil for a size no encrypted
    /// file has.
    public static func plainSize(_ size: Int64) -> Int64? {
        let body = size - Int64(headerSize)
        guard body >= 0 else { return nil }
        let full = Int64(chunkSize + tagSize)
        let chunks = body / full
        let rest = body % full
        if rest == 0 { return chunks * Int64(chunkSize) }
        guard rest > Int64(tagSize) else { return nil }
        return chunks * Int64(chunkSize) + rest - Int64(tagSize)
    }

    // MARK: Names

    /// A path with each segment encrypted.
    public func encryptPath(_ path: String) throws(CryptError) -> String {
        var out: [String] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: false) {
            out.append(try encryptSegment(String(segment)))
        }
        return out.joined(separator: "/")
    }

    /// A path with each segment decrypted.
    public func decryptPath(_ path: String) throws(CryptError) -> String {
        var out: [String] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: false) {
            out.append(try decryptSegment(String(segment)))
        }
        return out.joined(separator: "/")
    }

    /// One name: padded, EME, base32hex.
    public func encryptSegment(_ name: String) throws(CryptError) -> String {
        if name.isEmpty { return "" }
        var bytes = Array(name.utf8)
        let pad = 16 - bytes.count % 16
        bytes += [UInt8](repeating: UInt8(pad), count: pad)
        let encoded = Base32Hex.encode(try eme(bytes, encrypt: true))
        guard encoded.utf8.count <= Self.maxEncryptedSegment else {
            throw CryptError(.nameTooLong, "the name \(String(reflecting: name)) is \(name.utf8.count) bytes: encrypted it would be "
                + "\(encoded.utf8.count), more than the \(Self.maxEncryptedSegment) a name may have (keep names under about 143 bytes)")
        }
        return encoded
    }

    /// One encrypted name back, or a `.wrongKeyOrDamaged` error for one that is not of these keys.
    public func decryptSegment(_ encoded: String) throws(CryptError) -> String {
        if encoded.isEmpty { return "" }
        guard let bytes = Base32Hex.decode(encoded), !bytes.isEmpty, bytes.count % 16 == 0 else {
            throw CryptError(.wrongKeyOrDamaged, "\(String(reflecting: encoded)) is not an encrypted name")
        }
        let plain = try eme(bytes, encrypt: false)
        guard let pad = plain.last, (1...16).contains(pad), plain.suffix(Int(pad)).allSatisfy({ $0 == pad }),
              let name = String(validating: plain.dropLast(Int(pad)), as: UTF8.self)
        else {
            throw CryptError(.wrongKeyOrDamaged, "\(String(reflecting: encoded)) does not decrypt under this passphrase")
        }
        return name
    }

    /// EME (encrypt-mix-encrypt) over AES-256 with the name key and tweak, as rfjakob/eme.
    private func eme(_ input: [UInt8], encrypt: Bool) throws(CryptError) -> [UInt8] {
        let blocks = input.count / 16
        guard blocks > 0, input.count % 16 == 0, blocks <= 128 else {
            throw CryptError(.wrongKeyOrDamaged, "an encrypted name must be 1 to 128 blocks of 16 bytes")
        }
        let aes = try AESBlock(key: nameKey, encrypt: encrypt)
        var l = try AESBlock(key: nameKey, encrypt: true).apply([UInt8](repeating: 0, count: 16))
        var table: [[UInt8]] = []
        for _ in 0..<blocks {
            l = Self.double(l)
            table.append(l)
        }
        var c = [[UInt8]](repeating: [], count: blocks)
        for j in 0..<blocks {
            c[j] = try aes.apply(Self.xor(Array(input[(j * 16)..<(j * 16 + 16)]), table[j]))
        }
        var mp = Self.xor(c[0], nameTweak)
        for j in 1..<blocks { mp = Self.xor(mp, c[j]) }
        let mc = try aes.apply(mp)
        var m = Self.xor(mp, mc)
        for j in 1..<blocks {
            m = Self.double(m)
            c[j] = Self.xor(c[j], m)
        }
        var first = Self.xor(mc, nameTweak)
        for j in 1..<blocks { first = Self.xor(first, c[j]) }
        c[0] = first
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        for j in 0..<blocks { out += Self.xor(try aes.apply(c[j]), table[j]) }
        return out
    }

    /// Multiplication by 2 in GF(2^128), EME's way (little-endian, x^128 + x^7 + x^2 + x + 1).
    private static func double(_ block: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        out[0] = block[0] << 1
        if block[15] >= 128 { out[0] ^= 135 }
        for j in 1..<16 {
            out[j] = block[j] << 1
            if block[j - 1] >= 128 { out[j] &+= 1 }
        }
        return out
    }

    private static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var out = a
        for i in 0..<min(a.count, b.count) { out[i] ^= b[i] }
        return out
    }

    // MARK: Contents

    /// A new file's header, with a fresh random nonce; returns it and the nonce.
    public static func newHeader() -> (header: [UInt8], nonce: [UInt8]) {
        var nonce = [UInt8](repeating: 0, count: nonceSize)
        nonce.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, nonceSize) }
        }
        return (magic + nonce, nonce)
    }

    /// Seals one chunk (at most `chunkSize` bytes) with `nonce` into `out` (which must hold
    /// `chunk.count + tagSize` bytes), then increments the nonce.
    public func seal(_ chunk: UnsafeRawBufferPointer, nonce: inout [UInt8], into out: UnsafeMutableRawBufferPointer) throws(CryptError) {
        guard chunk.count <= Self.chunkSize, out.count >= chunk.count + Self.tagSize, let target = out.baseAddress else {
            throw CryptError(.system, "a chunk to seal does not fit")
        }
        let empty: UInt8 = 0
        let status: Int32 = withUnsafePointer(to: empty) { nothing in
            let source = chunk.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? nothing
            return nonce.withUnsafeBufferPointer { n in
                dataKey.withUnsafeBufferPointer { k in
                    guard let n = n.baseAddress, let k = k.baseAddress else { return -1 }
                    return crypto_secretbox_easy(target.assumingMemoryBound(to: UInt8.self), source, UInt64(chunk.count), n, k)
                }
            }
        }
        guard status == 0 else { throw CryptError(.system, "secretbox refused a chunk") }
        Self.increment(&nonce)
    }

    /// Opens one sealed chunk (tag first) with `nonce` into `out`, then increments the nonce.
    public func open(_ sealed: UnsafeRawBufferPointer, nonce: inout [UInt8], into out: UnsafeMutableRawBufferPointer) throws(CryptError) {
        guard sealed.count > Self.tagSize, out.count >= sealed.count - Self.tagSize, let source = sealed.baseAddress,
              let target = out.baseAddress
        else {
            throw CryptError(.notEncrypted, "an encrypted chunk is cut short")
        }
        let status: Int32 = nonce.withUnsafeBufferPointer { n in
            dataKey.withUnsafeBufferPointer { k in
                guard let n = n.baseAddress, let k = k.baseAddress else { return -1 }
                return crypto_secretbox_open_easy(target.assumingMemoryBound(to: UInt8.self), source.assumingMemoryBound(to: UInt8.self),
                                                  UInt64(sealed.count), n, k)
            }
        }
        guard status == 0 else {
            throw CryptError(.wrongKeyOrDamaged, "a chunk does not open: the passphrase is wrong, or the file was changed")
        }
        Self.increment(&nonce)
    }

    /// The nonce as a little-endian number, plus one.
    static func increment(_ nonce: inout [UInt8]) {
        for i in nonce.indices {
            nonce[i] &+= 1
            if nonce[i] != 0 { return }
        }
    }

    /// Chunks read, sealed or opened, and written at a time: 1 MiB of plain bytes.
    static let batch = 16

    /// The chunks a batch holds for `expected` bytes of input: no more than it takes (a small
    /// file is sealed without a MiB of buffers made and dropped for it), at most `batch`.
    /// Input that turns out longer is still read whole, a batch at a time.
    static func batchFor(_ expected: Int64, chunk: Int) -> Int {
        Int(min(Int64(batch), max(1, (expected + Int64(chunk) - 1) / Int64(chunk))))
    }
    /// The page size writes are cut to.
    static let page = 4096

    /// Writes `header`, then seals the plain bytes `read` gives, chunk after chunk. `read` fills
    /// the buffer it is given (a batch of chunks) and returns how much it filled: less only at
    /// the end. `write` is given the sealed stream in pieces whose sizes are whole pages, but
    /// for the last: a sealed chunk is 16 bytes past a page multiple, and writes that end inside
    /// a page are far slower than the sealing itself on tmpfs and the page cache (1 GiB in
    /// 65,552-byte writes: 1.7 s; in page multiples: 0.6 s). What is left past the last whole
    /// page (under one page) moves to the front of the buffer for the next batch. Returns the
    /// sealed bytes (the header not counted).
    private func sealChunks(
        header: [UInt8], nonce: inout [UInt8], expected: Int64, read: (UnsafeMutableRawBufferPointer) throws(CryptError) -> Int,
        write: (UnsafeRawBufferPointer) throws(CryptError) -> Void
    ) throws(CryptError) -> Int64 {
        let chunks = Self.batchFor(expected, chunk: Self.chunkSize)
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: chunks * Self.chunkSize, alignment: Self.page)
        let sealed = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Self.page + header.count + chunks * (Self.chunkSize + Self.tagSize), alignment: Self.page)
        defer { plain.deallocate(); sealed.deallocate() }
        header.withUnsafeBytes { sealed.copyMemory(from: $0) }
        var carried = header.count
        var total: Int64 = 0
        var ended = false
        while !ended {
            let count = try read(plain)
            ended = count < plain.count
            var end = carried
            var from = 0
            while from < count {
                let size = min(Self.chunkSize, count - from)
                try seal(UnsafeRawBufferPointer(rebasing: plain[from..<(from + size)]), nonce: &nonce,
                         into: UnsafeMutableRawBufferPointer(rebasing: sealed[end...]))
                end += size + Self.tagSize
                total += Int64(size + Self.tagSize)
                from += size
            }
            let whole = ended ? end : end / Self.page * Self.page
            if whole > 0 { try write(UnsafeRawBufferPointer(rebasing: sealed[0..<whole])) }
            carried = end - whole
            if carried > 0, let base = sealed.baseAddress { base.copyMemory(from: base + whole, byteCount: carried) }
        }
        return total
    }

    /// Opens the sealed chunks `read` gives (a batch at a time; each chunk whole but the last),
    /// handing the plain bytes of each batch to `write` (a whole MiB but the last); returns the
    /// plain bytes.
    private func openChunks(
        nonce: inout [UInt8], expected: Int64, read: (UnsafeMutableRawBufferPointer) throws(CryptError) -> Int,
        write: (UnsafeRawBufferPointer) throws(CryptError) -> Void
    ) throws(CryptError) -> Int64 {
        let sealedChunk = Self.chunkSize + Self.tagSize
        let chunks = Self.batchFor(expected, chunk: sealedChunk)
        let sealed = UnsafeMutableRawBufferPointer.allocate(byteCount: chunks * sealedChunk, alignment: Self.page)
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: chunks * Self.chunkSize, alignment: Self.page)
        defer { sealed.deallocate(); plain.deallocate() }
        var total: Int64 = 0
        var ended = false
        while !ended {
            let count = try read(sealed)
            ended = count < sealed.count
            var from = 0
            var end = 0
            while from < count {
                let size = min(sealedChunk, count - from)
                try open(UnsafeRawBufferPointer(rebasing: sealed[from..<(from + size)]), nonce: &nonce,
                         into: UnsafeMutableRawBufferPointer(rebasing: plain[end...]))
                end += size - Self.tagSize
                from += size
            }
            if end > 0 { try write(UnsafeRawBufferPointer(rebasing: plain[0..<end])) }
            total += Int64(end)
        }
        return total
    }

    /// The nonce of an encrypted file's header, or `.notEncrypted`.
    private static func nonce(ofHeader header: some Collection<UInt8>) throws(CryptError) -> [UInt8] {
        guard header.count >= headerSize, Array(header.prefix(magic.count)) == magic else {
            throw CryptError(.notEncrypted, "not a file of rclone crypt's format (no RCLONE header)")
        }
        return Array(header.dropFirst(magic.count).prefix(nonceSize))
    }

    /// Encrypts what `source` holds from its offset 0 into `destination` (from its current
    /// offset); returns the encrypted bytes written. `source` is read with `pread`, a short read
    /// retried, never taken for the end unless the file ends.
    public func encryptFile(from source: Int32, to destination: Int32) throws(CryptError) -> Int64 {
        let (header, start) = Self.newHeader()
        var nonce = start
        var offset: Int64 = 0
        var info = stat()
        let expected = fstat(source, &info) == 0 ? Int64(info.st_size) : Int64(Self.batch * Self.chunkSize)
        let sealed = try sealChunks(header: header, nonce: &nonce, expected: expected, read: { (buffer) throws(CryptError) in
            let count = try Self.readFully(source, into: buffer, at: offset)
            offset += Int64(count)
            return count
        }, write: { (bytes) throws(CryptError) in try Self.writeAll(destination, bytes) })
        return Int64(header.count) + sealed
    }

    /// Decrypts what `source` holds from offset 0 into `destination`; returns the plain bytes.
    public func decryptFile(from source: Int32, to destination: Int32) throws(CryptError) -> Int64 {
        let header = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.headerSize, alignment: 16)
        defer { header.deallocate() }
        let got = try Self.readFully(source, into: header, at: 0)
        var nonce = try Self.nonce(ofHeader: header.prefix(got))
        var offset = Int64(Self.headerSize)
        var info = stat()
        let expected = fstat(source, &info) == 0 ? Int64(info.st_size) - offset : Int64(Self.batch * Self.chunkSize)
        return try openChunks(nonce: &nonce, expected: expected, read: { (buffer) throws(CryptError) in
            let count = try Self.readFully(source, into: buffer, at: offset)
            offset += Int64(count)
            return count
        }, write: { (bytes) throws(CryptError) in try Self.writeAll(destination, bytes) })
    }

    /// Fills `buffer` from `fd` at `offset` (fewer bytes only at the end of the file).
    private static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(CryptError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let got = pread(fd, buffer.baseAddress?.advanced(by: filled), buffer.count - filled, off_t(offset) + off_t(filled))
            if got < 0 && errno == EINTR { continue }
            if got < 0 { throw CryptError(.system, "reading a file to encrypt or decrypt failed: \(String(cString: strerror(errno)))") }
            if got == 0 { break }
            filled += got
        }
        return filled
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(CryptError) {
        let code = BackupEngine.writeAll(fd, bytes)
        if code != 0 {
            throw CryptError(.system, "writing an encrypted or decrypted file failed: \(String(cString: strerror(code)))", writeErrno: code)
        }
    }

    /// Copies from `bytes` at `offset` into `buffer`, as much as fits; advances `offset`.
    private static func take(_ bytes: [UInt8], _ offset: inout Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, bytes.count - offset)
        if count > 0 {
            bytes.withUnsafeBytes { all in buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: all[offset..<(offset + count)])) }
        }
        offset += count
        return count
    }

    /// A whole plain file encrypted (tests, the marker); `nonce` for a fixed one.
    public func encrypt(_ plain: Data, nonce given: [UInt8]? = nil) throws(CryptError) -> Data {
        var nonce = given ?? Self.newHeader().nonce
        var out = Data()
        let bytes = [UInt8](plain)
        var offset = 0
        _ = try sealChunks(header: Self.magic + nonce, nonce: &nonce, expected: Int64(bytes.count), read: { Self.take(bytes, &offset, into: $0) },
                           write: { out.append(contentsOf: $0) })
        return out
    }

    /// A whole encrypted file decrypted.
    public func decrypt(_ encrypted: Data) throws(CryptError) -> Data {
        let bytes = [UInt8](encrypted)
        var nonce = try Self.nonce(ofHeader: bytes)
        var out = Data()
        var offset = Self.headerSize
        _ = try openChunks(nonce: &nonce, expected: Int64(bytes.count - offset), read: { Self.take(bytes, &offset, into: $0) }, write: { out.append(contentsOf: $0) })
        return out
    }
}

/// One AES-256 key in ECB, a block at a time (OpenSSL EVP, no padding).
private final class AESBlock {
    private let context: OpaquePointer

    init(key: [UInt8], encrypt: Bool) throws(CryptError) {
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptError(.system, "OpenSSL could not make a cipher context") }
        self.context = context
        let ok = key.withUnsafeBufferPointer { k in
            encrypt ? EVP_EncryptInit_ex(context, EVP_aes_256_ecb(), nil, k.baseAddress, nil)
                : EVP_DecryptInit_ex(context, EVP_aes_256_ecb(), nil, k.baseAddress, nil)
        }
        guard ok == 1, EVP_CIPHER_CTX_set_padding(context, 0) == 1 else {
            EVP_CIPHER_CTX_free(context)
            throw CryptError(.system, "OpenSSL refused the AES-256 key")
        }
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    func apply(_ block: [UInt8]) throws(CryptError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: Int32 = 0
        let ok = block.withUnsafeBufferPointer { b in
            out.withUnsafeMutableBufferPointer { o in
                EVP_CipherUpdate(context, o.baseAddress, &length, b.baseAddress, Int32(b.count))
            }
        }
        guard ok == 1, length == 16 else { throw CryptError(.system, "AES-256 failed on a block") }
        return Array(out[0..<16])
    }
}

/// RFC 4648's base32hex alphabet, lower case, without padding, as rclone writes names.
enum Base32Hex {
    private static let alphabet = Array("0123456789abcdefghijklmnopqrstuv".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt64 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt64(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int((buffer >> UInt64(bits)) & 31)])
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt64(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil for a character outside the alphabet (either case) or leftover bits that are not zero.
    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt64 = 0
        var bits = 0
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "v"): value = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "V"): value = character - UInt8(ascii: "A") + 10
            default: return nil
            }
            buffer = (buffer << 5) | UInt64(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt64(bits)) & 0xFF))
            }
        }
        guard bits < 5, buffer & ((1 << UInt64(bits)) - 1) == 0 else { return nil }
        return out
    }
}
