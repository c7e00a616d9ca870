// zlib compression for the marker: deflate of a whole buffer or of pieces, and a bounded
// inflate, so a hostile or damaged marker cannot make restore allocate without limit.

import CZlib
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Why a zlib operation failed.
public enum ZlibError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The compressed stream stops before its end.
    case truncated
    /// The compressed stream is not valid zlib data; the detail is zlib's own message.
    case corrupt(String)
    /// Bytes follow the end of the compressed stream.
    case trailingData
    /// The decompressed data would exceed the caller's limit.
    case tooLarge(limit: Int)
    /// zlib itself failed (out of memory, bad level); the detail names the call and code.
    case failed(String)

    public var description: String {
        switch self {
        case .truncated: return "compressed data is truncated"
        case .corrupt(let detail): return "compressed data is corrupt (\(detail))"
        case .trailingData: return "unexpected bytes after the end of the compressed data"
        case .tooLarge(let limit): return "decompressed data is larger than the limit of \(limit) bytes"
        case .failed(let detail): return "zlib failed: \(detail)"
        }
    }
}

/// Whole-buffer zlib (RFC 1950) compression.
public enum Zlib {
    /// The default bound on decompressed output: 1 GiB.
    public static let defaultMaxOutputSize = 1 << 30

    // Output grows in chunks this size; small enough not to waste memory on small inputs.
    static let chunkSize = 256 * 1024
    // avail_in is a 32-bit field, so larger inputs are fed in slices.
    private static let maxInputSlice = 1 << 30

    /// `data` compressed at `level` (0...9, or -1 for zlib's default, 6).
    ///
    /// The output is a pure function of the input and level for a given zlib build.
    public static func compress(_ data: Data, level: Int32 = Z_DEFAULT_COMPRESSION) throws(ZlibError) -> Data {
        let deflater = try Deflater(level: level)
        let fed: Result<Void, ZlibError> = data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            var offset = 0
            while offset < bytes.count {
                let slice = min(bytes.count - offset, maxInputSlice)
                do throws(ZlibError) {
                    try deflater.write(UnsafeBufferPointer(rebasing: bytes[offset..<offset + slice]))
                } catch {
                    return .failure(error)
                }
                offset += slice
            }
            return .success(())
        }
        try fed.get()
        return try deflater.finish()
    }

    /// `data` decompressed, refusing to produce more than `maxOutputSize` bytes.
    ///
    /// The whole input must be exactly one zlib stream: a stream that stops early is
    /// `.truncated`, bytes after its end are `.trailingData`.
    public static func decompress(_ data: Data, maxOutputSize: Int = defaultMaxOutputSize) throws(ZlibError) -> Data {
        var output = Data()
        try inflate(data, maxOutputSize: maxOutputSize) { piece in
            if let base = piece.baseAddress { output.append(base, count: piece.count) }
            return true
        }
        return output
    }

    /// Decompresses `data` piece by piece: `body` gets each piece of output as it is made
    /// (at most one chunk, valid only during the call) and returns false to stop there (then
    /// this returns without an error: the caller knows why it stopped). The same checks as
    /// `decompress`: at most `maxOutputSize` bytes in all, one whole stream and nothing after it.
    public static func inflate(
        _ data: Data, maxOutputSize: Int = defaultMaxOutputSize, _ body: (UnsafeBufferPointer<UInt8>) -> Bool
    ) throws(ZlibError) {
        var stream = z_stream()
        let initCode = backup_inflate_init(&stream)
        guard initCode == Z_OK else { throw .failed("inflateInit returned \(initCode)") }
        defer { inflateEnd(&stream) }

        let chunk = UnsafeMutablePointer<UInt8>.allocate(capacity: chunkSize)
        defer { chunk.deallocate() }
        var total = 0
        let result: Result<Void, ZlibError> = data.withUnsafeBytes { raw in
            let base = raw.bindMemory(to: UInt8.self).baseAddress
            var offset = 0
            while true {
                if stream.avail_in == 0 && offset < raw.count {
                    let slice = min(raw.count - offset, maxInputSlice)
                    stream.next_in = base.map { UnsafeMutablePointer(mutating: $0 + offset) }
                    stream.avail_in = UInt32(slice)
                    offset += slice
                }
                stream.next_out = chunk
                stream.avail_out = UInt32(chunkSize)
                let code = CZlib.inflate(&stream, Z_NO_FLUSH)
                let produced = chunkSize - Int(stream.avail_out)
                switch code {
                case Z_OK, Z_STREAM_END, Z_BUF_ERROR:
                    // Checked before it is handed on, so a bomb never gets past the limit.
                    if produced > maxOutputSize - total { return .failure(.tooLarge(limit: maxOutputSize)) }
                    total += produced
                    if produced > 0 && !body(UnsafeBufferPointer(start: chunk, count: produced)) { return .success(()) }
                    if code == Z_STREAM_END {
                        let rest = Int(stream.avail_in) + (raw.count - offset)
                        return rest == 0 ? .success(()) : .failure(.trailingData)
                    }
                    // Output space left over with every input byte consumed and no stream end:
                    // inflate is waiting for input that does not exist.
                    if stream.avail_out > 0 && stream.avail_in == 0 && offset == raw.count {
                        return .failure(.truncated)
                    }
                case Z_NEED_DICT:
                    return .failure(.corrupt("the stream needs a preset dictionary"))
                case Z_DATA_ERROR:
                    return .failure(.corrupt(stream.msg.map { String(cString: $0) } ?? "invalid data"))
                case Z_MEM_ERROR:
                    return .failure(.failed("inflate ran out of memory"))
                default:
                    return .failure(.failed("inflate returned \(code)"))
                }
            }
        }
        try result.get()
    }
}

/// zlib (RFC 1950) compression of input fed in pieces: a marker of a large tree is compressed
/// as its lines are made, never held whole. For one zlib build the output is the same bytes
/// `Zlib.compress` makes of the pieces joined.
final class Deflater {
    // zlib's state points back at its z_stream, so the stream lives at a fixed address.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let chunkSize = Zlib.chunkSize
    private let chunk = UnsafeMutablePointer<UInt8>.allocate(capacity: Zlib.chunkSize)
    private var output = Data()
    /// Where the output goes instead of `output`: an open file (not closed here).
    private let file: Int32?
    private var open = false

    /// - Parameters:
    ///   - prefix: bytes the output starts with (a frame's header), before the compressed ones.
    ///   - file: a descriptor the output is written to as it is made, rather than kept.
    init(level: Int32, prefix: [UInt8] = [], file: Int32? = nil) throws(ZlibError) {
        self.file = file
        stream.initialize(to: z_stream())
        // A failure throws before `open`, and deinit frees the buffers.
        if !prefix.isEmpty { try prefix.withUnsafeBufferPointer { bytes throws(ZlibError) in try emit(bytes) } }
        let code = backup_deflate_init(stream, level)
        // On a failure deinit still runs (every property is set): it frees the buffers.
        guard code == Z_OK else { throw .failed("deflateInit (level \(level)) returned \(code)") }
        open = true
    }

    deinit {
        if open { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        chunk.deallocate()
    }

    /// Compresses `bytes` (less than 1 GiB at a time).
    func write(_ bytes: UnsafeBufferPointer<UInt8>) throws(ZlibError) {
        guard !bytes.isEmpty else { return }
        try run(bytes, flush: Z_NO_FLUSH)
    }

    /// Ends the stream and returns the prefix and everything compressed (nothing when the
    /// output went to a file).
    func finish() throws(ZlibError) -> Data {
        try run(UnsafeBufferPointer(start: nil, count: 0), flush: Z_FINISH)
        deflateEnd(stream)
        open = false
        return output
    }

    private func emit(_ bytes: UnsafeBufferPointer<UInt8>) throws(ZlibError) {
        guard let file else {
            output.append(bytes)
            return
        }
        var done = 0
        while done < bytes.count, let base = bytes.baseAddress {
            let count = Glibc.write(file, base + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                throw .failed("cannot write the compressed output: \(String(cString: strerror(errno)))")
            }
            done += count
        }
    }

    private func run(_ bytes: UnsafeBufferPointer<UInt8>, flush: Int32) throws(ZlibError) {
        // zlib never writes through next_in; the mutable type is a quirk of its header.
        stream.pointee.next_in = bytes.baseAddress.map { UnsafeMutablePointer(mutating: $0) }
        stream.pointee.avail_in = UInt32(bytes.count)
        var code: Int32
        repeat {
            stream.pointee.next_out = chunk
            stream.pointee.avail_out = UInt32(chunkSize)
            code = deflate(stream, flush)
            if code == Z_STREAM_ERROR { throw .failed("deflate returned Z_STREAM_ERROR") }
            try emit(UnsafeBufferPointer(start: chunk, count: chunkSize - Int(stream.pointee.avail_out)))
        } while stream.pointee.avail_out == 0
        if flush == Z_FINISH && code != Z_STREAM_END { throw .failed("deflate ended with code \(code)") }
    }
}
