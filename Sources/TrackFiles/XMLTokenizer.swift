import Geo

/// What an ``XMLTokenizer`` reports: elements with their attributes, their text and their ends.
protocol XMLConsumer {
    /// A start tag was read whole: its local name (after any `prefix:`) and its attributes.
    mutating func start(_ name: UnsafeRawBufferPointer, _ attributes: XMLAttributes, line: Int) throws(TrackFileError)
    /// Character data inside the root element (entities already replaced), in pieces of any size.
    mutating func text(_ bytes: UnsafeRawBufferPointer)
    /// An end tag (or the end of an empty-element tag), by local name.
    mutating func end(_ name: UnsafeRawBufferPointer, line: Int, _ emit: (Fix) -> Void) throws(TrackFileError)
}

/// The attributes of the start tag being reported, by local name.
struct XMLAttributes {
    let bytes: UnsafeRawBufferPointer
    let ranges: ArraySlice<(name: Range<Int>, value: Range<Int>)>

    /// The value of the attribute with this local name, if the tag has one.
    func value(_ localName: StaticString) -> UnsafeRawBufferPointer? {
        let want = UnsafeRawBufferPointer(start: localName.utf8Start, count: localName.utf8CodeUnitCount)
        for r in ranges {
            var nameStart = r.name.lowerBound
            for k in r.name where bytes[k] == 0x3A { nameStart = k + 1 }
            if r.name.upperBound - nameStart == want.count,
                want.elementsEqual(UnsafeRawBufferPointer(rebasing: bytes[nameStart..<r.name.upperBound]))
            {
                return UnsafeRawBufferPointer(rebasing: bytes[r.value])
            }
        }
        return nil
    }
}

/// A streaming, non-validating XML 1.0 tokenizer that refuses what could make it expand input:
/// a document type declaration is an error (``TrackFileError/Code/doctype``) as soon as `<!D` is
/// read, and an entity other than `&lt;` `&gt;` `&amp;` `&apos;` `&quot;` and `&#N;`/`&#xH;` is an
/// error (``TrackFileError/Code/entity``). So a "billion laughs" document is refused at its
/// 40th byte or so, and nothing outside the document is ever read.
///
/// Fed any split of the input (byte by byte included), it reports the same events. Memory is
/// bounded: names of at most 256 bytes, 256 levels of nesting, 64 KiB of attributes per tag;
/// text is passed on in pieces, never collected here. Checks well-formedness as far as reading
/// needs: matching end tags, one root, nothing but blanks, comments and processing instructions
/// outside it.
struct XMLTokenizer {
    enum State: UInt8 {
        case text, entity, lt, startName, tagSpace, attrName, attrEq, attrQuote, attrValue, afterValue, emptyClose
        case endName, endSpace, bang, bangDash, comment, commentDash1, commentDash2, cdataHead, cdata, cdataBracket1
        case cdataBracket2, pi, piQuestion
    }

    static let maxName = 256
    static let maxDepth = 256
    static let maxAttributes = 64 * 1024

    var state = State.text
    var position = TrackFilePosition()
    /// The open elements' names, end to end, and where each ends.
    var names: [UInt8] = []
    var nameEnds: [Int] = []
    /// The name being read (start or end tag).
    var name: [UInt8] = []
    /// The current tag's attribute names and values, end to end.
    var attributeBytes: [UInt8] = []
    var attributes: [(name: Range<Int>, value: Range<Int>)] = []
    var attributeStart = 0
    var quote: UInt8 = 0
    var entity: [UInt8] = []
    var entityInAttribute = false
    var cdataMatched = 0
    var rootSeen = false
    var rootClosed = false
    /// The line the current tag started on.
    var tagLine = 1

    init() {
        names.reserveCapacity(1024)
        name.reserveCapacity(Self.maxName)
        attributeBytes.reserveCapacity(1024)
    }

    var depth: Int { nameEnds.count }

    func error(_ code: TrackFileError.Code, _ message: String, at offset: Int64) -> TrackFileError {
        TrackFileError(code, message, line: position.line, byteOffset: offset)
    }

    @inline(__always) static func isNameByte(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c == 0x3A
            || c == 0x2D || c == 0x2E || c >= 0x80
    }

    @inline(__always) static func isNameStart(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || c == 0x5F || c == 0x3A || c >= 0x80
    }

    @inline(__always) static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D }

    /// Feeds the next bytes.
    ///
    /// - Throws: the first problem, with the line and byte offset it is at.
    mutating func feed<C: XMLConsumer>(
        _ bytes: UnsafeRawBufferPointer, _ consumer: inout C, _ emit: (Fix) -> Void
    ) throws(TrackFileError) {
        let base = position.offset
        var i = 0
        let n = bytes.count
        var runStart = 0
        func flushText(_ consumer: inout C, upTo end: Int) throws(TrackFileError) {
            guard end > runStart else { return }
            let run = UnsafeRawBufferPointer(rebasing: bytes[runStart..<end])
            if depth > 0 {
                consumer.text(run)
            } else {
                for k in 0..<run.count where !Self.isSpace(run[k]) {
                    // A UTF-8 byte order mark may open the document.
                    let offset = base + Int64(runStart + k)
                    if offset < 3 && run[k] == [0xEF, 0xBB, 0xBF][Int(offset)] { continue }
                    // The line of that byte: the line counted so far, less the line ends after it.
                    var e = error(.malformed, "text outside the root element", at: offset)
                    e.line -= run[k...].count(where: { $0 == 0x0A })
                    throw e
                }
            }
        }
        defer { position.offset = base + Int64(n) }
        do throws(TrackFileError) {
            while i < n {
                let c = bytes[i]
                if c == 0x0A { position.line += 1 }
                switch state {
                case .text:
                    if c == 0x3C {
                        try flushText(&consumer, upTo: i)
                        state = .lt
                        tagLine = position.line
                    } else if c == 0x26 {
                        try flushText(&consumer, upTo: i)
                        entity.removeAll(keepingCapacity: true)
                        entityInAttribute = false
                        state = .entity
                    }
                case .entity:
                    if c == 0x3B {
                        try replaceEntity(&consumer, at: base + Int64(i))
                        state = entityInAttribute ? .attrValue : .text
                        runStart = i + 1
                    } else if entity.count < 12, Self.isNameByte(c) || c == 0x23 {
                        entity.append(c)
                    } else {
                        throw error(.malformed, "'&' not followed by an entity reference", at: base + Int64(i))
                    }
                case .lt:
                    if c == 0x2F {
                        name.removeAll(keepingCapacity: true)
                        state = .endName
                    } else if c == 0x21 {
                        state = .bang
                    } else if c == 0x3F {
                        state = .pi
                    } else if Self.isNameStart(c) {
                        if rootClosed {
                            throw error(.malformed, "a second root element", at: base + Int64(i))
                        }
                        name.removeAll(keepingCapacity: true)
                        name.append(c)
                        attributeBytes.removeAll(keepingCapacity: true)
                        attributes.removeAll(keepingCapacity: true)
                        state = .startName
                    } else {
                        throw error(.malformed, "'<' not followed by a name", at: base + Int64(i))
                    }
                case .startName where Self.isNameByte(c):
                    guard name.count < Self.maxName else {
                        throw error(.tooLarge, "an element name longer than \(Self.maxName) bytes", at: base + Int64(i))
                    }
                    name.append(c)
                // After an element's name, its attributes or blanks: the head of a start tag goes on or ends.
                case .startName, .tagSpace, .afterValue:
                    if Self.isSpace(c) {
                        state = .tagSpace
                    } else if c == 0x3E {
                        try startTag(&consumer, emit, selfClosing: false, at: base + Int64(i))
                        runStart = i + 1
                    } else if c == 0x2F {
                        state = .emptyClose
                    } else if Self.isNameStart(c) && state == .tagSpace {
                        attributeStart = attributeBytes.count
                        try appendAttributeByte(c, at: base + Int64(i))
                        state = .attrName
                    } else {
                        throw error(
                            .malformed,
                            state == .startName
                                ? "an unexpected byte in an element name" : "expected an attribute, '>' or '/>'",
                            at: base + Int64(i))
                    }
                case .attrName:
                    if Self.isNameByte(c) {
                        guard attributeBytes.count - attributeStart < Self.maxName else {
                            throw error(
                                .tooLarge, "an attribute name longer than \(Self.maxName) bytes", at: base + Int64(i))
                        }
                        try appendAttributeByte(c, at: base + Int64(i))
                    } else if c == 0x3D {
                        state = .attrQuote
                    } else if Self.isSpace(c) {
                        state = .attrEq
                    } else {
                        throw error(.malformed, "expected '=' after an attribute name", at: base + Int64(i))
                    }
                case .attrEq:
                    if c == 0x3D {
                        state = .attrQuote
                    } else if !Self.isSpace(c) {
                        throw error(.malformed, "expected '=' after an attribute name", at: base + Int64(i))
                    }
                case .attrQuote:
                    if c == 0x22 || c == 0x27 {
                        quote = c
                        attributes.append(
                            (attributeStart..<attributeBytes.count, attributeBytes.count..<attributeBytes.count))
                        state = .attrValue
                    } else if !Self.isSpace(c) {
                        throw error(.malformed, "expected a quoted attribute value", at: base + Int64(i))
                    }
                case .attrValue:
                    if c == quote {
                        let last = attributes.count - 1
                        attributes[last].value = attributes[last].value.lowerBound..<attributeBytes.count
                        state = .afterValue
                    } else if c == 0x26 {
                        entity.removeAll(keepingCapacity: true)
                        entityInAttribute = true
                        state = .entity
                    } else if c == 0x3C {
                        throw error(.malformed, "'<' in an attribute value", at: base + Int64(i))
                    } else {
                        try appendAttributeByte(Self.isSpace(c) ? 0x20 : c, at: base + Int64(i))
                    }
                case .emptyClose:
                    guard c == 0x3E else { throw error(.malformed, "expected '>' after '/'", at: base + Int64(i)) }
                    try startTag(&consumer, emit, selfClosing: true, at: base + Int64(i))
                    runStart = i + 1
                case .endName:
                    if Self.isNameByte(c) && (name.count > 0 || Self.isNameStart(c)) {
                        guard name.count < Self.maxName else {
                            throw error(
                                .tooLarge, "an element name longer than \(Self.maxName) bytes", at: base + Int64(i))
                        }
                        name.append(c)
                    } else if Self.isSpace(c) && !name.isEmpty {
                        state = .endSpace
                    } else if c == 0x3E && !name.isEmpty {
                        try endTag(&consumer, emit, at: base + Int64(i))
                        runStart = i + 1
                    } else {
                        throw error(.malformed, "a malformed end tag", at: base + Int64(i))
                    }
                case .endSpace:
                    if c == 0x3E {
                        try endTag(&consumer, emit, at: base + Int64(i))
                        runStart = i + 1
                    } else if !Self.isSpace(c) {
                        throw error(.malformed, "expected '>' in an end tag", at: base + Int64(i))
                    }
                case .bang:
                    if c == 0x2D {
                        state = .bangDash
                    } else if c == 0x5B {
                        guard depth > 0 else {
                            throw error(.malformed, "CDATA outside the root element", at: base + Int64(i))
                        }
                        cdataMatched = 0
                        state = .cdataHead
                    } else if c == UInt8(ascii: "D") {
                        throw error(
                            .doctype,
                            "a document type declaration (<!DOCTYPE): refused, as its entities could expand "
                                + "without bound", at: base + Int64(i) - 2)
                    } else {
                        throw error(.malformed, "an unknown '<!' declaration", at: base + Int64(i))
                    }
                case .bangDash:
                    guard c == 0x2D else { throw error(.malformed, "a malformed comment", at: base + Int64(i)) }
                    state = .comment
                case .comment:
                    if c == 0x2D { state = .commentDash1 }
                case .commentDash1:
                    state = c == 0x2D ? .commentDash2 : .comment
                case .commentDash2:
                    if c == 0x3E {
                        state = .text
                        runStart = i + 1
                    } else if c != 0x2D {
                        state = .comment
                    }
                case .cdataHead:
                    let head: StaticString = "CDATA["
                    guard c == head.utf8Start[cdataMatched] else {
                        throw error(.malformed, "an unknown '<![' declaration", at: base + Int64(i))
                    }
                    cdataMatched += 1
                    if cdataMatched == 6 {
                        state = .cdata
                        runStart = i + 1
                    }
                case .cdata:
                    if c == 0x5D {
                        try flushText(&consumer, upTo: i)
                        state = .cdataBracket1
                    }
                case .cdataBracket1:
                    if c == 0x5D {
                        state = .cdataBracket2
                    } else {
                        emitLiteral("]", &consumer)
                        state = .cdata
                        runStart = i
                    }
                case .cdataBracket2:
                    if c == 0x3E {
                        state = .text
                        runStart = i + 1
                    } else if c == 0x5D {
                        emitLiteral("]", &consumer)
                    } else {
                        emitLiteral("]]", &consumer)
                        state = .cdata
                        runStart = i
                    }
                case .pi:
                    if c == 0x3F { state = .piQuestion }
                case .piQuestion:
                    if c == 0x3E {
                        state = .text
                        runStart = i + 1
                    } else if c != 0x3F {
                        state = .pi
                    }
                }
                i += 1
            }
            if state == .text || state == .cdata {
                try flushText(&consumer, upTo: n)
            }
        } catch {
            var e = error
            if e.line == 0 { e.line = position.line }
            if e.byteOffset < 0 { e.byteOffset = base + Int64(min(i, n)) }
            throw e
        }
    }

    private mutating func emitLiteral<C: XMLConsumer>(_ s: StaticString, _ consumer: inout C) {
        if depth > 0 { consumer.text(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)) }
    }

    private mutating func appendAttributeByte(_ c: UInt8, at offset: Int64) throws(TrackFileError) {
        guard attributeBytes.count < Self.maxAttributes else {
            throw error(.tooLarge, "a tag's attributes longer than \(Self.maxAttributes) bytes", at: offset)
        }
        attributeBytes.append(c)
    }

    private mutating func replaceEntity<C: XMLConsumer>(_ consumer: inout C, at offset: Int64) throws(TrackFileError) {
        var out: [UInt8] = []
        switch entity {
        case Array("lt".utf8): out = [0x3C]
        case Array("gt".utf8): out = [0x3E]
        case Array("amp".utf8): out = [0x26]
        case Array("apos".utf8): out = [0x27]
        case Array("quot".utf8): out = [0x22]
        default:
            guard entity.first == 0x23 else {
                throw error(
                    .entity, "an entity other than the five predefined ones and character references", at: offset)
            }
            var v: UInt32 = 0
            let hex = entity.count > 1 && (entity[1] == UInt8(ascii: "x"))
            let digits = entity.dropFirst(hex ? 2 : 1)
            guard !digits.isEmpty else { throw error(.malformed, "an empty character reference", at: offset) }
            for d in digits {
                let value: UInt32
                switch d {
                case 0x30...0x39: value = UInt32(d - 0x30)
                case 0x61...0x66 where hex: value = UInt32(d - 0x61 + 10)
                case 0x41...0x46 where hex: value = UInt32(d - 0x41 + 10)
                default: throw error(.malformed, "a malformed character reference", at: offset)
                }
                v = v * (hex ? 16 : 10) + value
                guard v <= 0x10FFFF else { throw error(.malformed, "a character reference past U+10FFFF", at: offset) }
            }
            guard v != 0, let scalar = Unicode.Scalar(v) else {
                throw error(.malformed, "a character reference to no character", at: offset)
            }
            out = Array(String(Character(scalar)).utf8)
        }
        if entityInAttribute {
            for b in out { try appendAttributeByte(b, at: offset) }
        } else if depth > 0 {
            out.withUnsafeBytes { consumer.text($0) }
        } else {
            throw error(.malformed, "text outside the root element", at: offset)
        }
    }

    private func localName(_ full: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 0
        for k in 0..<full.count where full[k] == 0x3A { start = k + 1 }
        return UnsafeRawBufferPointer(rebasing: full[start...])
    }

    private mutating func startTag<C: XMLConsumer>(
        _ consumer: inout C, _ emit: (Fix) -> Void, selfClosing: Bool, at offset: Int64
    ) throws(TrackFileError) {
        guard depth < Self.maxDepth else {
            throw error(.tooLarge, "elements nested deeper than \(Self.maxDepth) levels", at: offset)
        }
        // Attribute names must not repeat.
        if attributes.count > 1 {
            for a in 1..<attributes.count {
                for b in 0..<a
                where attributeBytes[attributes[a].name].elementsEqual(attributeBytes[attributes[b].name]) {
                    throw error(.malformed, "an attribute given twice", at: offset)
                }
            }
        }
        rootSeen = true
        names.append(contentsOf: name)
        nameEnds.append(names.count)
        let line = tagLine
        try name.withBytes { full throws(TrackFileError) in
            try attributeBytes.withBytes { attrs throws(TrackFileError) in
                try consumer.start(localName(full), XMLAttributes(bytes: attrs, ranges: attributes[...]), line: line)
            }
        }
        state = .text
        if selfClosing { try closeTop(&consumer, emit) }
    }

    private mutating func endTag<C: XMLConsumer>(
        _ consumer: inout C, _ emit: (Fix) -> Void, at offset: Int64
    ) throws(TrackFileError) {
        guard let last = nameEnds.last else {
            throw error(.malformed, "an end tag without a start tag", at: offset)
        }
        let start = nameEnds.count > 1 ? nameEnds[nameEnds.count - 2] : 0
        guard names[start..<last].elementsEqual(name) else {
            throw error(.malformed, "an end tag that does not match its start tag", at: offset)
        }
        state = .text
        try closeTop(&consumer, emit)
    }

    private mutating func closeTop<C: XMLConsumer>(_ consumer: inout C, _ emit: (Fix) -> Void) throws(TrackFileError) {
        let last = nameEnds.removeLast()
        let start = nameEnds.last ?? 0
        let line = position.line
        try names.withBytes { all throws(TrackFileError) in
            try consumer.end(localName(UnsafeRawBufferPointer(rebasing: all[start..<last])), line: line, emit)
        }
        names.removeSubrange(start...)
        if nameEnds.isEmpty { rootClosed = true }
    }

    /// The end of the input: the document must be complete.
    func finish() throws(TrackFileError) {
        guard rootSeen else { throw error(.malformed, "no root element", at: position.offset) }
        guard depth == 0, state == .text else {
            throw error(.malformed, "the document ends early (\(depth) elements open): truncated?", at: position.offset)
        }
    }
}
