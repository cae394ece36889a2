import CZlib

/// gzip for HTTP bodies (`Content-Encoding: gzip`), through zlib.
public enum Gzip {
    /// `bytes` compressed in the gzip format.
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        // 15 window bits + 16: a gzip header and trailer.
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { preconditionFailure("deflateInit2 failed") }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 32)
        var input = bytes
        let produced: Int = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { outp in
                stream.next_in = inp.baseAddress
                stream.avail_in = UInt32(inp.count)
                stream.next_out = outp.baseAddress
                stream.avail_out = UInt32(outp.count)
                let rc = deflate(&stream, Z_FINISH)
                precondition(rc == Z_STREAM_END, "deflate did not finish: \(rc)")
                return outp.count - Int(stream.avail_out)
            }
        }
        out.removeSubrange(produced...)
        return out
    }

    /// The bytes of a gzip (or zlib) stream, at most `limit` of them. Several gzip members one after
    /// the other (RFC 1952 allows it) inflate to their concatenation; anything else after the end of
    /// the stream is refused, not ignored.
    ///
    /// - Throws: ``FormatsError`` when the data is not gzip, has bytes after its end, or (with
    ///   the code ``FormatsError/Code/tooLarge``) inflates beyond `limit`.
    public static func decompress(_ bytes: [UInt8], limit: Int) throws(FormatsError) -> [UInt8] {
        var stream = z_stream()
        // 15 + 32: detect gzip or zlib headers.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw FormatsError(.invalid, "gzip: cannot start inflating")
        }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = bytes
        var rc: Int32 = Z_OK
        var junkAt: Int?
        input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = UInt32(inp.count)
            while rc == Z_OK {
                chunk.withUnsafeMutableBufferPointer { c in
                    stream.next_out = c.baseAddress
                    stream.avail_out = UInt32(c.count)
                    rc = inflate(&stream, Z_NO_FLUSH)
                    out.append(contentsOf: c[0..<(c.count - Int(stream.avail_out))])
                }
                if out.count > limit { rc = Z_MEM_ERROR; break }
                if rc == Z_BUF_ERROR && stream.avail_in == 0 { break }
                if rc == Z_STREAM_END && stream.avail_in > 0 {
                    let at = inp.count - Int(stream.avail_in)
                    // Another gzip member goes on; anything else is junk.
                    if stream.avail_in >= 2 && inp[at] == 0x1F && inp[at + 1] == 0x8B && inflateReset(&stream) == Z_OK {
                        rc = Z_OK
                    } else {
                        junkAt = at
                    }
                }
            }
        }
        if out.count > limit { throw FormatsError(.tooLarge, "body inflates beyond \(limit) bytes") }
        if let junkAt {
            throw FormatsError(
                .invalid,
                "gzip: \(bytes.count - junkAt) bytes that are not gzip after the stream's end, at byte \(junkAt)")
        }
        guard rc == Z_STREAM_END else { throw FormatsError(.invalid, "gzip: the body is not a complete gzip stream") }
        return out
    }
}
