import CZlib
import Geo

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads an NMEA log in chunks from a file, standard input (`-`), or a gzip file (detected by
/// its magic bytes, whatever its name).
///
/// Streams: memory use is one chunk buffer, whatever the file's size.
public final class NMEAFileReader {
    /// The input's name for messages: the path, or `<stdin>`.
    public let name: String
    /// The file's size in bytes when it is a regular file (compressed size for gzip), for progress.
    public let size: Int64?
    /// Bytes consumed from the file so far (compressed bytes for gzip), for progress.
    public private(set) var position: Int64 = 0
    /// Whether the file is gzip-compressed.
    public let isCompressed: Bool

    private let fd: Int32
    private let ownsDescriptor: Bool
    /// zlib keeps a pointer back to its stream: it must not move, so it lives on the heap.
    private var stream: UnsafeMutablePointer<z_stream>?
    private var input: UnsafeMutableRawBufferPointer?
    private var inputEnd = false
    private var memberOpen = false
    /// Whether a whole gzip member has ended: bytes that are not gzip after it are a junk tail.
    private var memberEnded = false
    private var pushback: [UInt8] = []

    /// Opens `path` (`-` for standard input).
    ///
    /// - Throws: ``NMEAError`` with code ``NMEAError/Code/io`` naming the path and the reason.
    public init(path: String) throws(NMEAError) {
        if path == "-" {
            fd = 0
            ownsDescriptor = false
            name = "<stdin>"
            size = nil
        } else {
            let opened = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
            if opened < 0 {
                let e = errno
                throw NMEAError(
                    .io, "cannot open: \(String(cString: strerror(e)))", file: path, line: 0, byteOffset: 0, errno: e)
            }
            fd = opened
            ownsDescriptor = true
            name = path
            var st = stat()
            if fstat(opened, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG {
                size = Int64(st.st_size)
            } else {
                size = nil
            }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                close(opened)
                throw NMEAError(.io, "is a directory", file: path, line: 0, byteOffset: 0, errno: EISDIR)
            }
        }
        // Sniff the gzip magic (1F 8B) without losing the bytes.
        var magic = [UInt8](repeating: 0, count: 2)
        var got = 0
        let descriptor = fd
        while got < 2 {
            let n = magic.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress! + got, 2 - got) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            got += n
        }
        pushback = Array(magic[0..<got])
        isCompressed = got == 2 && magic[0] == 0x1F && magic[1] == 0x8B
        if isCompressed {
            let s = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            s.initialize(to: z_stream())
            let rc = keeptrack_inflateInit2(s, 15 + 32)
            if rc != Z_OK {
                s.deallocate()
                if ownsDescriptor { close(fd) }
                throw NMEAError(
                    .io, "cannot start gzip decompression (zlib error \(rc))", file: name, line: 0, byteOffset: 0)
            }
            stream = s
            input = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        }
    }

    deinit {
        if let stream {
            inflateEnd(stream)
            stream.deallocate()
        }
        input?.deallocate()
        if ownsDescriptor { close(fd) }
    }

    /// Reads raw bytes from the descriptor, retrying on EINTR.
    private func readRaw(_ buffer: UnsafeMutableRawBufferPointer) throws(NMEAError) -> Int {
        if !pushback.isEmpty {
            let n = min(pushback.count, buffer.count)
            buffer.copyBytes(from: pushback[0..<n])
            pushback.removeFirst(n)
            position += Int64(n)
            return n
        }
        while true {
            let n = systemRead(fd, buffer.baseAddress, buffer.count)
            if n >= 0 {
                position += Int64(n)
                return n
            }
            let e = errno
            if e == EINTR { continue }
            throw NMEAError(
                .io, "read failed: \(String(cString: strerror(e)))", file: name, line: 0, byteOffset: position, errno: e
            )
        }
    }

    /// Whether ``read(into:)`` can go on without waiting for the writer of a pipe or terminal:
    /// always for a regular file or input already buffered, else when the descriptor has data,
    /// an end or an error within `milliseconds` (0: just look).
    public func isReadable(waitingUpTo milliseconds: Int32 = 0) -> Bool {
        if size != nil || !pushback.isEmpty || inputEnd { return true }
        if let stream, stream.pointee.avail_in > 0 { return true }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, milliseconds) != 0
    }

    /// Fills `buffer` with the next bytes of the (decompressed) log.
    ///
    /// - Returns: the number of bytes read; 0 at the end of the input.
    /// - Throws: ``NMEAError`` with code ``NMEAError/Code/io`` on a read error or corrupt gzip data.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(NMEAError) -> Int {
        guard let stream, let input else { return try readRaw(buffer) }
        while true {
            if stream.pointee.avail_in == 0 && !inputEnd {
                let n = try readRaw(input)
                if n == 0 {
                    inputEnd = true
                } else {
                    stream.pointee.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_in = uInt(n)
                }
            }
            stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(buffer.count)
            // The compressed offset of the next byte zlib reads, for error messages.
            let offset = position - Int64(stream.pointee.avail_in)
            let startsMember = !memberOpen
            let rc = inflate(stream, Z_NO_FLUSH)
            let produced = buffer.count - Int(stream.pointee.avail_out)
            if rc == Z_STREAM_END {
                // Concatenated gzip members: go on with the next one.
                memberOpen = false
                memberEnded = true
                inflateReset(stream)
            } else if rc == Z_OK {
                memberOpen = true
            } else if rc != Z_BUF_ERROR {
                let reason = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(rc)"
                if startsMember && memberEnded {
                    throw NMEAError(
                        .io,
                        "bytes after the end of the gzip data are not gzip "
                            + "(\(reason)); everything before them was read", file: name, line: 0, byteOffset: offset)
                }
                let at = position - Int64(stream.pointee.avail_in)
                throw NMEAError(.io, "corrupt gzip data (\(reason))", file: name, line: 0, byteOffset: at)
            }
            if produced > 0 { return produced }
            if inputEnd && stream.pointee.avail_in == 0 {
                if memberOpen {
                    throw NMEAError(
                        .io, "gzip data ends early (truncated file?)", file: name, line: 0, byteOffset: position)
                }
                return 0
            }
        }
    }
}

extension NMEADecoder {
    /// Decodes a whole file (`-` for standard input, gzip accepted) in 256 KiB chunks.
    ///
    /// An I/O error (a read failure, a truncated or corrupt gzip file, junk after the gzip data),
    /// or in strict mode a rejected sentence, loses nothing read before it: every epoch decoded
    /// from the bytes before the error, the one in progress included, is emitted first, then the
    /// error is thrown.
    ///
    /// - Parameters:
    ///   - path: the log to read.
    ///   - progress: called after each chunk with the reader (for its position and size).
    ///   - emit: called with every fix.
    /// - Throws: ``NMEAError``: an I/O error (naming the file and the byte), or in strict mode
    ///   the first rejected sentence.
    public mutating func decodeFile(
        _ path: String, progress: ((NMEAFileReader) -> Void)? = nil, _ emit: (Fix) -> Void
    ) throws(NMEAError) {
        let reader = try NMEAFileReader(path: path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let n: Int
            do {
                n = try reader.read(into: buffer)
            } catch {
                finishAfterInputError(emit)
                throw error
            }
            if n == 0 { break }
            do {
                try decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), emit)
            } catch {
                // Strict mode stops at a rejected sentence: the epoch in progress before it was
                // decoded (often complete, the bad sentence being the next one's first) and is not lost.
                finishAfterInputError(emit)
                throw error
            }
            progress?(reader)
        }
        try finish(emit)
    }

    /// Decodes a complete in-memory input; convenient for tests and small inputs.
    public static func decode(_ bytes: [UInt8], options: Options = Options()) throws(NMEAError)
        -> (fixes: [Fix], statistics: NMEAStatistics)
    {
        var decoder = NMEADecoder(options: options)
        var fixes: [Fix] = []
        var failure: NMEAError?
        bytes.withUnsafeBytes { raw in
            do throws(NMEAError) {
                try decoder.decode(raw) { fixes.append($0) }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        try decoder.finish { fixes.append($0) }
        return (fixes, decoder.statistics)
    }
}

@inline(__always)
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
        Glibc.read(fd, buffer, count)
    #else
        Darwin.read(fd, buffer, count)
    #endif
}
