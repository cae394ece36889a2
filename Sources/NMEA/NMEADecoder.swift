import Geo

/// A streaming NMEA 0183 decoder: bytes in, one ``Fix`` per GNSS epoch out.
///
/// Feed it input in chunks of any size with ``decode(_:_:)``; it frames sentences (`$` or `!` to
/// CR/LF, LF or a lone CR), verifies their `*hh` checksums, decodes GGA, RMC, GLL, GSA, GSV, VTG,
/// GNS, ZDA and GST from any talker, and merges the sentences of each epoch into one fix (see
/// `EpochAssembler` for the rules). Bytes between sentences are skipped and counted;
/// proprietary (`$P…`) and unknown sentences are counted and skipped.
///
/// Rejected sentences (bad checksum, malformed fields, …) are counted in ``statistics`` and
/// passed to ``diagnosticHandler``; with ``Options/strict`` the first one is thrown instead.
///
/// The decoder allocates nothing per sentence in steady state: sentences are parsed in place in
/// the caller's buffer, and only a sentence split across two chunks is copied (into a buffer
/// reused for the decoder's lifetime).
public struct NMEADecoder {
    /// Decoder settings.
    public struct Options: Sendable {
        /// Stop at the first rejected sentence by throwing it. The default is `false` (skip and count).
        public var strict: Bool = false
        /// Longest accepted sentence in bytes, from `$` to the checksum. The default is 1024
        /// (NMEA allows 82; real receivers exceed that).
        public var maxSentenceLength: Int = 1024
        /// Reject sentences without a `*hh` checksum. The default is `true`.
        public var requireChecksum: Bool = true
        /// The date (days since 1970-01-01) given to fixes before the input has told one. The
        /// default is `nil`: such fixes carry a time of day only.
        public var referenceDay: Int32?
        /// The input's name for error messages (a path, `<stdin>`). The default is `nil`.
        public var sourceName: String?

        public init(
            strict: Bool = false, maxSentenceLength: Int = 1024, requireChecksum: Bool = true,
            referenceDay: Int32? = nil, sourceName: String? = nil
        ) {
            self.strict = strict
            self.maxSentenceLength = maxSentenceLength
            self.requireChecksum = requireChecksum
            self.referenceDay = referenceDay
            self.sourceName = sourceName
        }
    }

    enum Phase: UInt8 {
        case seek, body, star1, star2, afterChecksum, discard
    }

    public let options: Options
    /// Counters so far.
    public var statistics: NMEAStatistics {
        var s = stats
        s.fixes = assembler.emitted
        s.positionFixes = assembler.emittedWithPosition
        return s
    }
    var stats = NMEAStatistics()
    /// Called with every sentence rejected in lenient mode. The default is `nil`.
    public var diagnosticHandler: ((NMEAError) -> Void)?
    /// How many rejected sentences at most reach ``diagnosticHandler``; later ones are only counted
    /// in ``statistics``, and no message is built for them. The default is `nil` (every one).
    public var diagnosticLimit: Int?
    /// Rejected sentences passed to ``diagnosticHandler`` so far.
    var diagnosticsPassed = 0

    var phase: Phase = .seek
    var xor: UInt8 = 0
    var stated: UInt8 = 0
    /// Bytes of the sentence in progress, from `$`.
    var sentenceLength = 0
    var sentenceLine = 0
    var sentenceOffset: Int64 = 0
    /// Bytes of a sentence begun in an earlier chunk.
    var carry: [UInt8] = []
    var lineNumber = 1
    var lineHasContent = false
    var assembler: EpochAssembler
    /// The error of the sentence just rejected by ``complete(base:bounds:from:to:bodyEnd:checked:_:)``.
    var rejection: NMEAError?

    public init(options: Options = Options()) {
        self.options = options
        self.assembler = EpochAssembler(referenceDay: options.referenceDay)
        carry.reserveCapacity(options.maxSentenceLength + 8)
    }

    /// Decodes a chunk of input, calling `emit` for every epoch it completes.
    ///
    /// - Throws: the first rejected sentence, in strict mode only. The decoder stays usable: the
    ///   next call resumes after the rejected sentence.
    /// - Complexity: O(n) in the chunk's size.
    public mutating func decode(_ buffer: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(NMEAError) {
        guard buffer.count > 0 else { return }
        // One stack buffer for the field bounds of every sentence in the chunk (at most 100 fields
        // and the two ends), set up once per chunk rather than once per sentence.
        var failure: NMEAError?
        withUnsafeTemporaryAllocation(of: Int16.self, capacity: 102) { bounds in
            do throws(NMEAError) {
                try decodeChunk(buffer, bounds: bounds.baseAddress!, emit)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// The `$` at `offset` of the input begins a sentence on the current line.
    @inline(__always)
    mutating func beginSentence(at offset: Int64) {
        lineHasContent = true
        phase = .body
        xor = 0
        sentenceLength = 1
        sentenceLine = lineNumber
        sentenceOffset = offset
        if !carry.isEmpty { carry.removeAll(keepingCapacity: true) }
    }

    mutating func decodeChunk(
        _ buffer: UnsafeRawBufferPointer, bounds: UnsafeMutablePointer<Int16>,
        _ emit: (Fix) -> Void
    ) throws(NMEAError) {
        guard let raw = buffer.baseAddress, buffer.count > 0 else { return }
        let base = raw.assumingMemoryBound(to: UInt8.self)
        let n = buffer.count
        let chunkOffset = stats.bytes
        stats.bytes += Int64(n)
        var i = 0
        // Where the current sentence's bytes begin in this chunk (0 when it began in an earlier one).
        var sentenceStart = 0
        // A thrown error must leave the decoder consistent: remember it, finish bookkeeping, throw.
        var pendingError: NMEAError?

        scan: while i < n {
            switch phase {
            case .seek:
                var skipped = 0
                var lines = 0
                var content = lineHasContent
                while i < n {
                    let b = base[i]
                    if b == 0x24 || b == 0x21 { break }  // $ !
                    if b == 0x0A {
                        lines += 1
                        content = false
                    } else if b != 0x0D {
                        content = true
                        skipped += 1
                    }
                    i += 1
                }
                lineNumber += lines
                stats.skippedBytes += Int64(skipped)
                lineHasContent = content
                if i == n { break scan }
                beginSentence(at: chunkOffset + Int64(i))
                sentenceStart = i
                i += 1

            case .body:
                let from = i
                // Hot loop, sixteen bytes at a time (one SSE2 register) while they are all ordinary
                // sentence content ('+' 0x2B through '~' 0x7E), then eight: XOR whole blocks, fold at the end.
                var block = SIMD16<UInt8>()
                while i &+ 16 <= n {
                    let v = UnsafeRawPointer(base + i).loadUnaligned(as: SIMD16<UInt8>.self)
                    // x = b - 0x2B wraps; b is outside 0x2B...0x7E exactly when x >= 0x54, which sets
                    // the high bit of x or of x + 0x2C. Lane arithmetic only (no mask reduction call).
                    let x = v &- 0x2B
                    let high = unsafeBitCast((x | (x &+ 0x2C)) & 0x80, to: SIMD2<UInt64>.self)
                    if high[0] | high[1] != 0 { break }
                    block ^= v
                    i &+= 16
                }
                let halves = unsafeBitCast(block, to: SIMD2<UInt64>.self)
                var wide: UInt64 = halves[0] ^ halves[1]
                while i &+ 8 <= n {
                    let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                    if !SWAR.isOrdinary(w) { break }
                    wide ^= w
                    i &+= 8
                }
                var x = xor ^ SWAR.fold(wide)
                while i < n {
                    let b = base[i]
                    if b &- 0x2B > 0x53 { break }
                    x ^= b
                    i += 1
                }
                xor = x
                sentenceLength += i - from
                if sentenceLength > options.maxSentenceLength {
                    pendingError = makeError(
                        .lineTooLong, "no line end within \(options.maxSentenceLength) bytes",
                        base: base, from: sentenceStart, to: i)
                    stats.skippedBytes += Int64(sentenceLength)
                    phase = .discard
                    if reject(&pendingError) { break scan }
                    continue scan
                }
                if i == n { break scan }
                let b = base[i]
                if b == 0x2A {  // *
                    // Fast path: both hex digits and the line end are in this chunk, well formed.
                    // Anything else goes through the checksum phases below, which name the problem.
                    if i &+ 3 < n {
                        let v = hexValue(base[i &+ 1]) << 4 | hexValue(base[i &+ 2])
                        let end = base[i &+ 3]
                        if hexValue(base[i &+ 1]) | hexValue(base[i &+ 2]) <= 15 && (end == 0x0D || end == 0x0A) {
                            stated = v
                            sentenceLength += 3
                            i &+= 3
                            if endSentence(
                                base: base, bounds: bounds, from: sentenceStart, to: i, bodyEnd: sentenceLength - 3,
                                checked: true, pending: &pendingError, emit)
                            {
                                break scan
                            }
                            // CR LF and the next sentence's `$`, as the seek phase would find them.
                            if i &+ 2 < n && base[i] == 0x0D && base[i &+ 1] == 0x0A && base[i &+ 2] == 0x24 {
                                lineNumber += 1
                                i &+= 2
                                beginSentence(at: chunkOffset + Int64(i))
                                sentenceStart = i
                                i &+= 1
                            }
                            continue scan
                        }
                    }
                    phase = .star1
                    sentenceLength += 1
                    i += 1
                } else if b == 0x0D || b == 0x0A {
                    if options.requireChecksum {
                        pendingError = makeError(
                            .missingChecksum, "sentence ends without a *hh checksum",
                            base: base, from: sentenceStart, to: i)
                        phase = .seek
                        if reject(&pendingError) { break scan }
                    } else {
                        if endSentence(
                            base: base, bounds: bounds, from: sentenceStart, to: i, bodyEnd: sentenceLength,
                            checked: false, pending: &pendingError, emit)
                        {
                            break scan
                        }
                    }
                } else if b == 0x24 || b == 0x21 {
                    pendingError = makeError(
                        .truncatedSentence, "a new sentence starts before this one ended",
                        base: base, from: sentenceStart, to: i)
                    phase = .seek
                    if reject(&pendingError) { break scan }
                } else if b >= 0x20 && b < 0x7F {
                    // Printable but rare in NMEA (space, quotes, #, %, &, parentheses).
                    xor ^= b
                    sentenceLength += 1
                    i += 1
                } else {
                    pendingError = makeError(
                        .invalidCharacter, "byte 0x\(hex(b)) inside a sentence",
                        base: base, from: sentenceStart, to: i + 1)
                    phase = .seek
                    if reject(&pendingError) { break scan }
                }

            case .star1, .star2:
                let b = base[i]
                let v = hexValue(b)
                if v > 15 {
                    if b == 0x0D || b == 0x0A || b == 0x24 || b == 0x21 {
                        pendingError = makeError(
                            .invalidChecksumField, "checksum needs two hex digits after *",
                            base: base, from: sentenceStart, to: i)
                    } else {
                        pendingError = makeError(
                            .invalidChecksumField, "checksum has a non-hex character",
                            base: base, from: sentenceStart, to: i + 1)
                        i += 1
                    }
                    phase = b == 0x0D || b == 0x0A || b == 0x24 || b == 0x21 ? .seek : .discard
                    if reject(&pendingError) { break scan }
                    continue scan
                }
                if phase == .star1 {
                    stated = v << 4
                    phase = .star2
                } else {
                    stated |= v
                    phase = .afterChecksum
                }
                sentenceLength += 1
                i += 1

            case .afterChecksum:
                let b = base[i]
                if b == 0x0D || b == 0x0A {
                    if endSentence(
                        base: base, bounds: bounds, from: sentenceStart, to: i, bodyEnd: sentenceLength - 3,
                        checked: true, pending: &pendingError, emit)
                    {
                        break scan
                    }
                } else {
                    pendingError = makeError(
                        .trailingCharacters, "characters after the checksum",
                        base: base, from: sentenceStart, to: i + 1)
                    phase = b == 0x24 || b == 0x21 ? .seek : .discard
                    if reject(&pendingError) { break scan }
                }

            case .discard:
                var skipped = 0
                while i < n {
                    let b = base[i]
                    if b == 0x0D || b == 0x0A { break }
                    skipped += 1
                    i += 1
                }
                stats.skippedBytes += Int64(skipped)
                if i < n { phase = .seek }
            }
        }
        // Keep the bytes of an unfinished sentence for the next chunk.
        switch phase {
        case .body, .star1, .star2, .afterChecksum:
            carry.append(contentsOf: UnsafeBufferPointer(start: base + sentenceStart, count: n - sentenceStart))
        default:
            break
        }
        if var error = pendingError {
            // Strict mode: the remaining bytes of this chunk were not decoded.
            if i < n {
                stats.bytes -= Int64(n - i)
                error.message += " (decoding stopped here)"
            }
            phase = phase == .discard ? .discard : .seek
            throw error
        }
    }

    /// Ends the input: reports a sentence cut off by the end and emits the last epoch.
    ///
    /// - Throws: the cut-off sentence, in strict mode.
    public mutating func finish(_ emit: (Fix) -> Void) throws(NMEAError) {
        var pending: NMEAError?
        // A sentence whole up to its checksum when the input ends without a line end (a file written
        // without a last newline) is a sentence: it ends there, as with one.
        if phase == .afterChecksum {
            let end: [UInt8] = [0x0A]
            end.withUnsafeBytes { raw in
                do throws(NMEAError) { try decode(raw, emit) } catch { pending = error }
            }
            stats.bytes -= 1
        }
        switch phase {
        case .body, .star1, .star2, .afterChecksum:
            pending = makeError(.truncatedSentence, "input ends inside a sentence", base: nil, from: 0, to: 0)
            phase = .seek
            _ = reject(&pending)
        default:
            break
        }
        assembler.flush(emit)
        stats.lines = lineNumber - (lineHasContent ? 0 : 1)
        if let pending { throw pending }
    }

    /// Ends the input early, after a read error: emits the epoch in progress (everything decoded
    /// from the bytes that were read) without reporting the sentence the error cut off, which the
    /// caller's error explains.
    public mutating func finishAfterInputError(_ emit: (Fix) -> Void) {
        phase = .seek
        assembler.flush(emit)
        stats.lines = lineNumber - (lineHasContent ? 0 : 1)
    }

    /// Emits the epoch in progress now instead of waiting for the next epoch's first sentence.
    ///
    /// Live sources call this after an idle gap (receivers send an epoch in a burst), so a fix
    /// leaves the decoder as soon as its last sentence arrived. A sentence of the flushed epoch
    /// that still arrives later is counted in ``NMEAStatistics/lateSentences`` and dropped.
    public mutating func flush(_ emit: (Fix) -> Void) {
        assembler.flush(emit)
    }

    @inline(__always)
    mutating func takeRejection() -> NMEAError? {
        defer { rejection = nil }
        return rejection
    }

    /// Counts a rejected sentence; returns `true` when decoding must stop (strict mode).
    @inline(__always)
    mutating func reject(_ error: inout NMEAError?) -> Bool {
        guard let e = error else { return false }
        stats.errors[e.code, default: 0] += 1
        if options.strict { return true }
        if let diagnosticHandler, diagnosticsPassed < diagnosticLimit ?? .max {
            diagnosticsPassed += 1
            diagnosticHandler(e)
        }
        error = nil
        return false
    }

    /// The bytes of the sentence in progress up to `to` in this chunk, for error messages.
    func sentenceBytes(base: UnsafePointer<UInt8>?, from: Int, to: Int) -> [UInt8] {
        var bytes = carry
        if let base, to > from {
            bytes.append(contentsOf: UnsafeBufferPointer(start: base + from, count: min(to - from, 200)))
        }
        return bytes
    }

    /// Whether rejected sentences need a full description (strict mode, or a diagnostic handler
    /// below its limit). Without one, only the counters change and the error path allocates nothing.
    @inline(__always)
    var wantsErrorDetail: Bool {
        options.strict || (diagnosticHandler != nil && diagnosticsPassed < diagnosticLimit ?? .max)
    }

    func makeError(
        _ code: NMEAError.Code, _ message: @autoclosure () -> String, base: UnsafePointer<UInt8>?,
        from: Int, to: Int, field: Int? = nil
    ) -> NMEAError {
        guard wantsErrorDetail else {
            return NMEAError(code, "", line: sentenceLine, byteOffset: sentenceOffset)
        }
        return NMEAError(
            code, message(), file: options.sourceName, line: sentenceLine, byteOffset: sentenceOffset,
            text: NMEAError.escape(sentenceBytes(base: base, from: from, to: to)), field: field)
    }

    /// Ends the sentence framed from `from` to `to` (the seek phase comes next) and decodes it;
    /// returns `true` when decoding must stop (strict mode), with the rejection in `pending`.
    @inline(__always)
    mutating func endSentence(
        base: UnsafePointer<UInt8>, bounds: UnsafeMutablePointer<Int16>, from: Int, to: Int,
        bodyEnd: Int, checked: Bool, pending: inout NMEAError?, _ emit: (Fix) -> Void
    ) -> Bool {
        phase = .seek
        if complete(base: base, bounds: bounds, from: from, to: to, bodyEnd: bodyEnd, checked: checked, emit) {
            return false
        }
        pending = takeRejection()
        return reject(&pending)
    }

    /// A framed sentence: verify the checksum and decode it. Returns `false` for a rejected one,
    /// whose error is then in ``rejection``.
    @inline(__always)
    mutating func complete(
        base: UnsafePointer<UInt8>, bounds: UnsafeMutablePointer<Int16>, from: Int, to: Int,
        bodyEnd: Int, checked: Bool,
        _ emit: (Fix) -> Void
    ) -> Bool {
        if checked && stated != xor {
            rejection = makeError(
                .badChecksum, "checksum is \(hex(stated)), computed \(hex(xor))",
                base: base, from: from, to: to)
            return false
        }
        if carry.isEmpty {
            return decodeSentence(base + from, length: bodyEnd, fullLength: to - from, bounds: bounds, emit)
        }
        // Move the carried bytes out of `self` (no copy) so decoding may mutate `self`.
        var sentence: [UInt8] = []
        swap(&sentence, &carry)
        sentence.append(contentsOf: UnsafeBufferPointer(start: base + from, count: to - from))
        let result = sentence.withUnsafeBufferPointer { bytes in
            decodeSentence(bytes.baseAddress!, length: bodyEnd, fullLength: bytes.count, bounds: bounds, emit)
        }
        sentence.removeAll(keepingCapacity: true)
        swap(&sentence, &carry)
        return result
    }
}

@inline(__always)
func hexValue(_ b: UInt8) -> UInt8 {
    switch b {
    case 0x30...0x39: b - 0x30
    case 0x41...0x46: b - 0x41 + 10
    case 0x61...0x66: b - 0x61 + 10
    default: 0xFF
    }
}

func hex(_ b: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return "\(digits[Int(b >> 4)])\(digits[Int(b & 15)])"
}

/// Word-at-a-time byte tests (SIMD within a register), exact per byte: no carries cross bytes.
enum SWAR {
    static let high: UInt64 = 0x8080_8080_8080_8080
    static let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The high bit of every byte of `v` that is zero.
    @inline(__always)
    static func zeroBytes(_ v: UInt64) -> UInt64 {
        ~(((v & low7) &+ low7) | v) & high
    }

    /// The high bit of every byte of `w` equal to `byte`.
    @inline(__always)
    static func bytesEqual(_ w: UInt64, _ byte: UInt8) -> UInt64 {
        zeroBytes(w ^ (UInt64(byte) &* 0x0101_0101_0101_0101))
    }

    /// Whether all eight bytes lie in 0x2B...0x7E (ordinary NMEA content, no `*`, `$`, CR, LF).
    @inline(__always)
    static func isOrdinary(_ w: UInt64) -> Bool {
        if w & high != 0 { return false }
        // With no high bits set, b + 0x55 has its high bit set exactly when b >= 0x2B.
        if (w &+ 0x5555_5555_5555_5555) & high != high { return false }
        return bytesEqual(w, 0x7F) == 0
    }

    /// XOR of the eight bytes of `w`.
    @inline(__always)
    static func fold(_ w: UInt64) -> UInt8 {
        var v = w ^ (w >> 32)
        v ^= v >> 16
        v ^= v >> 8
        return UInt8(truncatingIfNeeded: v)
    }
}
