import Geo

/// What a ``JSONTokenizer`` reports. `depth` is the number of arrays and objects open around the
/// event's value (0 for the top-level value); a container's begin and end report the depth of
/// the container around it.
protocol JSONConsumer {
    mutating func begin(object: Bool, depth: Int) throws(TrackFileError)
    mutating func end(object: Bool, depth: Int, _ emit: (Fix) -> Void) throws(TrackFileError)
    /// An object's key (escapes replaced); `depth` is its value's.
    mutating func key(_ bytes: UnsafeRawBufferPointer, depth: Int)
    /// A string (escapes replaced), a number (its text), `true`, `false` or `null`.
    mutating func scalar(
        _ kind: JSONScalar, _ bytes: UnsafeRawBufferPointer, depth: Int, _ emit: (Fix) -> Void
    ) throws(TrackFileError)
}

enum JSONScalar: UInt8 {
    case string, number, `true`, `false`, null
}

/// A streaming JSON (RFC 8259) tokenizer: any split of the input, byte by byte included, gives
/// the same events; memory is one string or number (at most 1 MiB) and the nesting (at most 128
/// levels), whatever the document's size. Strict: one top-level value, no trailing commas, no
/// comments, no control characters in strings, surrogates paired.
struct JSONTokenizer {
    enum State: UInt8 {
        case value, firstValue, afterValue, key, firstKey, colon, string, escape, unicode, number, literal, done

        /// Whether blanks are skipped here (between tokens, not inside one).
        var isBetweenTokens: Bool { rawValue <= State.colon.rawValue || self == .done }
    }

    static let maxDepth = 128
    static let maxToken = 1 << 20

    var state = State.value
    var position = TrackFilePosition()
    /// Open containers: 1 for an object, 0 for an array.
    var stack: [UInt8] = []
    var token: [UInt8] = []
    var stringIsKey = false
    var unicodeDigits = 0
    var unicodeValue: UInt32 = 0
    var highSurrogate: UInt32 = 0
    var literal: StaticString = "null"
    var literalMatched = 0
    var literalKind = JSONScalar.null

    init() {
        token.reserveCapacity(256)
        stack.reserveCapacity(Self.maxDepth)
    }

    var depth: Int { stack.count }

    func error(_ code: TrackFileError.Code, _ message: String, at offset: Int64) -> TrackFileError {
        TrackFileError(code, message, line: position.line, byteOffset: offset)
    }

    @inline(__always) static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D }

    mutating func feed<C: JSONConsumer>(
        _ bytes: UnsafeRawBufferPointer, _ consumer: inout C, _ emit: (Fix) -> Void
    ) throws(TrackFileError) {
        let base = position.offset
        let n = bytes.count
        var i = 0
        defer { position.offset = base + Int64(n) }
        do throws(TrackFileError) {
            while i < n {
                let c = bytes[i]
                // Indentation between tokens, a run at a time (pretty-printed files are mostly blanks).
                if c == 0x20 && state.isBetweenTokens {
                    i += 1
                    while i < n && bytes[i] == 0x20 { i += 1 }
                    continue
                }
                switch state {
                case .string:
                    // The fast path: a run of plain bytes.
                    var j = i
                    while j < n {
                        let b = bytes[j]
                        if b == 0x22 || b == 0x5C || b < 0x20 { break }
                        j += 1
                    }
                    if j > i {
                        guard token.count + (j - i) <= Self.maxToken else {
                            throw error(.tooLarge, "a string longer than 1 MiB", at: base + Int64(i))
                        }
                        token.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<j]))
                        i = j
                        continue
                    }
                    if c == 0x22 {
                        guard highSurrogate == 0 else {
                            throw error(.malformed, "an unpaired surrogate", at: base + Int64(i))
                        }
                        try token.withBytes { t throws(TrackFileError) in
                            if stringIsKey {
                                consumer.key(t, depth: depth)
                            } else {
                                try consumer.scalar(.string, t, depth: depth, emit)
                            }
                        }
                        state = stringIsKey ? .colon : .afterValue
                        if !stringIsKey && depth == 0 { state = .done }
                    } else if c == 0x5C {
                        state = .escape
                    } else {
                        throw error(.malformed, "a control character in a string", at: base + Int64(i))
                    }
                case .escape:
                    if highSurrogate != 0 && c != UInt8(ascii: "u") {
                        throw error(.malformed, "an unpaired surrogate", at: base + Int64(i))
                    }
                    state = .string
                    switch c {
                    case 0x22, 0x5C, 0x2F: token.append(c)
                    case UInt8(ascii: "b"): token.append(0x08)
                    case UInt8(ascii: "f"): token.append(0x0C)
                    case UInt8(ascii: "n"): token.append(0x0A)
                    case UInt8(ascii: "r"): token.append(0x0D)
                    case UInt8(ascii: "t"): token.append(0x09)
                    case UInt8(ascii: "u"):
                        unicodeDigits = 0
                        unicodeValue = 0
                        state = .unicode
                    default: throw error(.malformed, "an invalid escape", at: base + Int64(i))
                    }
                case .unicode:
                    let d: UInt32
                    switch c {
                    case 0x30...0x39: d = UInt32(c - 0x30)
                    case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                    case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                    default: throw error(.malformed, "a bad \\u escape", at: base + Int64(i))
                    }
                    unicodeValue = unicodeValue << 4 | d
                    unicodeDigits += 1
                    if unicodeDigits == 4 {
                        state = .string
                        var scalar = unicodeValue
                        if highSurrogate != 0 {
                            guard (0xDC00..<0xE000).contains(scalar) else {
                                throw error(.malformed, "an unpaired surrogate", at: base + Int64(i))
                            }
                            scalar = 0x10000 + ((highSurrogate - 0xD800) << 10) + (scalar - 0xDC00)
                            highSurrogate = 0
                        } else if (0xD800..<0xDC00).contains(scalar) {
                            highSurrogate = scalar
                            // The low half must follow at once.
                            break
                        }
                        guard let u = Unicode.Scalar(scalar) else {
                            throw error(.malformed, "an unpaired surrogate", at: base + Int64(i))
                        }
                        guard token.count + 4 <= Self.maxToken else {
                            throw error(.tooLarge, "a string longer than 1 MiB", at: base + Int64(i))
                        }
                        token.append(contentsOf: String(Character(u)).utf8)
                    }
                case .number:
                    if (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x65 || c == 0x45 || c == 0x2B || c == 0x2D {
                        guard token.count < 64 else {
                            throw error(.tooLarge, "a number longer than 64 bytes", at: base + Int64(i))
                        }
                        token.append(c)
                    } else {
                        try endNumber(&consumer, emit, at: base + Int64(i))
                        continue  // the byte is read again in the new state
                    }
                case .literal:
                    guard c == literal.utf8Start[literalMatched] else {
                        throw error(.malformed, "expected a value", at: base + Int64(i))
                    }
                    literalMatched += 1
                    if literalMatched == literal.utf8CodeUnitCount {
                        try consumer.scalar(
                            literalKind, UnsafeRawBufferPointer(start: nil, count: 0), depth: depth, emit)
                        state = depth == 0 ? .done : .afterValue
                    }
                case .value, .firstValue:
                    if c == 0x0A {
                        position.line += 1
                    } else if Self.isSpace(c) {
                    } else if base + Int64(i) < 3 && c == [0xEF, 0xBB, 0xBF][Int(base) + i] {
                        // A UTF-8 byte order mark before the document.
                    } else if c == 0x22 {
                        token.removeAll(keepingCapacity: true)
                        stringIsKey = false
                        state = .string
                    } else if c == 0x7B || c == 0x5B {
                        guard stack.count < Self.maxDepth else {
                            throw error(
                                .tooLarge, "arrays and objects nested deeper than \(Self.maxDepth) levels",
                                at: base + Int64(i))
                        }
                        try consumer.begin(object: c == 0x7B, depth: depth)
                        stack.append(c == 0x7B ? 1 : 0)
                        state = c == 0x7B ? .firstKey : .firstValue
                    } else if c == 0x5D && state == .firstValue {
                        try close(object: false, &consumer, emit, at: base + Int64(i))
                    } else if c == 0x2D || (c >= 0x30 && c <= 0x39) {
                        token.removeAll(keepingCapacity: true)
                        token.append(c)
                        state = .number
                    } else if c == UInt8(ascii: "t") {
                        startLiteral("true", .true)
                    } else if c == UInt8(ascii: "f") {
                        startLiteral("false", .false)
                    } else if c == UInt8(ascii: "n") {
                        startLiteral("null", .null)
                    } else {
                        throw error(.malformed, "expected a value", at: base + Int64(i))
                    }
                case .afterValue:
                    if c == 0x0A {
                        position.line += 1
                    } else if Self.isSpace(c) {
                    } else if c == 0x2C {
                        state = stack.last == 1 ? .key : .value
                    } else if c == 0x7D && stack.last == 1 {
                        try close(object: true, &consumer, emit, at: base + Int64(i))
                    } else if c == 0x5D && stack.last == 0 {
                        try close(object: false, &consumer, emit, at: base + Int64(i))
                    } else {
                        throw error(
                            .malformed, stack.last == 1 ? "expected ',' or '}'" : "expected ',' or ']'",
                            at: base + Int64(i))
                    }
                case .key, .firstKey:
                    if c == 0x0A {
                        position.line += 1
                    } else if Self.isSpace(c) {
                    } else if c == 0x22 {
                        token.removeAll(keepingCapacity: true)
                        stringIsKey = true
                        state = .string
                    } else if c == 0x7D && state == .firstKey {
                        try close(object: true, &consumer, emit, at: base + Int64(i))
                    } else {
                        throw error(.malformed, "expected a key", at: base + Int64(i))
                    }
                case .colon:
                    if c == 0x0A {
                        position.line += 1
                    } else if Self.isSpace(c) {
                    } else if c == 0x3A {
                        state = .value
                    } else {
                        throw error(.malformed, "expected ':'", at: base + Int64(i))
                    }
                case .done:
                    if c == 0x0A {
                        position.line += 1
                    } else if !Self.isSpace(c) {
                        throw error(.malformed, "bytes after the end of the JSON value", at: base + Int64(i))
                    }
                }
                i += 1
            }
        } catch {
            var e = error
            if e.line == 0 { e.line = position.line }
            if e.byteOffset < 0 { e.byteOffset = base + Int64(min(i, n)) }
            throw e
        }
    }

    private mutating func startLiteral(_ word: StaticString, _ kind: JSONScalar) {
        literal = word
        literalKind = kind
        literalMatched = 1
        state = .literal
    }

    private mutating func endNumber<C: JSONConsumer>(
        _ consumer: inout C, _ emit: (Fix) -> Void, at offset: Int64
    ) throws(TrackFileError) {
        guard Self.isNumber(token) else { throw error(.malformed, "a malformed number", at: offset) }
        try token.withBytes { t throws(TrackFileError) in try consumer.scalar(.number, t, depth: depth, emit) }
        state = depth == 0 ? .done : .afterValue
    }

    /// The strict JSON number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    static func isNumber(_ t: [UInt8]) -> Bool {
        var i = 0
        let n = t.count
        func digits() -> Int {
            let s = i
            while i < n, t[i] >= 0x30, t[i] <= 0x39 { i += 1 }
            return i - s
        }
        if i < n, t[i] == 0x2D { i += 1 }
        guard i < n else { return false }
        if t[i] == 0x30 {
            i += 1
        } else if digits() == 0 {
            return false
        }
        if i < n, t[i] == 0x2E {
            i += 1
            guard digits() > 0 else { return false }
        }
        if i < n, t[i] == 0x65 || t[i] == 0x45 {
            i += 1
            if i < n, t[i] == 0x2B || t[i] == 0x2D { i += 1 }
            guard digits() > 0 else { return false }
        }
        return i == n
    }

    private mutating func close<C: JSONConsumer>(
        object: Bool, _ consumer: inout C, _ emit: (Fix) -> Void, at offset: Int64
    ) throws(TrackFileError) {
        stack.removeLast()
        try consumer.end(object: object, depth: depth, emit)
        state = depth == 0 ? .done : .afterValue
    }

    /// The end of the input: the value must be complete.
    mutating func finish<C: JSONConsumer>(_ consumer: inout C, _ emit: (Fix) -> Void) throws(TrackFileError) {
        if state == .number && depth == 0 {
            try endNumber(&consumer, emit, at: position.offset)
        }
        guard state == .done else {
            throw error(
                .malformed,
                position.offset == 0
                    ? "no JSON value" : "the JSON ends early (\(depth) arrays or objects open): truncated?",
                at: position.offset)
        }
    }
}
