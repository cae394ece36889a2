// libyaml's event parser (Debian's libyaml-dev): the pre-pass that bounds a document before Yams
// composes it.
import CLibYAML
import Yams

#if canImport(Glibc)
    import Glibc
#endif

/// Reads and checks a configuration file: YAML, one mapping of known keys to values.
///
/// Hostile input is refused before Yams builds a tree from it, in one linear pass over libyaml's
/// events: files over ``Limits/maxBytes``, binary data, nesting deeper than
/// ``Limits/maxDepth``, aliases that expand to more than ``Limits/maxNodes`` nodes (the "billion
/// laughs"), lists or mappings used as keys (Yams hashes keys whole, so aliased ones cost
/// exponential time) and keys set twice. Every problem names the file and its line.
///
/// ```swift
/// let reader = ConfigReader(schema: ["serial": .option, "all": .flag, "header": .list])
/// let settings = try reader.read(path: "/etc/keeptrack/config.yaml")
/// ```
public struct ConfigReader: Sendable {
    /// Bounds on what a configuration file may be.
    public struct Limits: Sendable, Hashable {
        /// The largest file read, in bytes. The default is 1 MiB.
        public var maxBytes = 1 << 20
        /// The most nodes (scalars, lists, mappings) a file may stand for once its aliases are
        /// expanded. The default is 100,000.
        public var maxNodes = 100_000
        /// The deepest nesting of lists and mappings. The default is 32.
        public var maxDepth = 32

        public init() {}
    }

    /// What the keys of a file are.
    public let schema: [String: ConfigKind]
    public var limits = Limits()

    public init(schema: [String: ConfigKind]) {
        self.schema = schema
    }

    /// Reads and checks the file at `path`.
    ///
    /// - Throws: ``ConfigFileError`` naming the path and, when known, the line.
    /// - Complexity: O(n) in the file's size.
    public func read(path: String) throws(ConfigFileError) -> [ConfigSetting] {
        try parse(try readFile(path, limit: limits.maxBytes), name: path)
    }

    /// Checks `bytes` as a configuration file called `name`.
    ///
    /// - Throws: ``ConfigFileError`` naming `name` and, when known, the line.
    /// - Complexity: O(n) in the size of `bytes`.
    public func parse(_ bytes: [UInt8], name: String) throws(ConfigFileError) -> [ConfigSetting] {
        var statistics = ConfigStatistics()
        return try parse(bytes, name: name, statistics: &statistics)
    }

    /// Checks `bytes` as a configuration file called `name`, counting the work done in
    /// `statistics` (for tests that watch the complexity).
    public func parse(_ bytes: [UInt8], name: String, statistics stats: inout ConfigStatistics)
        throws(ConfigFileError) -> [ConfigSetting]
    {
        if bytes.count > limits.maxBytes {
            throw ConfigFileError(
                .tooLarge,
                "\(bytes.count) bytes is too large for a configuration file (the limit is \(limits.maxBytes))",
                path: name, line: nil)
        }
        try Self.checkText(bytes, name: name)
        let text = String(decoding: bytes, as: UTF8.self)
        try prepass(bytes, name: name, stats: &stats)
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw ConfigFileError(
                .notYAML, "not valid YAML: \(Self.yamlProblem(error))", path: name, line: Self.yamlLine(error),
                underlying: error)
        } catch {
            throw ConfigFileError(.notYAML, "not valid YAML: \(error)", path: name, line: nil, underlying: error)
        }
        guard let root else { return [] }
        guard let mapping = root.mapping else {
            throw ConfigFileError(
                .notAMapping, "expected keys and values (a mapping)", path: name, line: root.mark?.line)
        }
        var settings: [ConfigSetting] = []
        var seen: Set<String> = []
        for (keyNode, value) in mapping {
            stats.values += 1
            let line = keyNode.mark?.line ?? 0
            guard let key = keyNode.scalar?.string else {
                throw ConfigFileError(.badKey, "a key must be a plain name", path: name, line: line)
            }
            guard let kind = schema[key] else {
                let hint = suggestion(for: key).map { " (did you mean '\($0)'?)" } ?? ""
                throw ConfigFileError(
                    .unknownKey, "unknown key '\(Self.printable(key))'\(hint)", path: name, line: line)
            }
            guard seen.insert(key).inserted else {
                throw ConfigFileError(.duplicateKey, "'\(key)' is set twice", path: name, line: line)
            }
            let setting: ConfigSetting.Value
            switch kind {
            case .flag:
                guard let b = value.bool else {
                    let got = value.scalar.map { Self.printable($0.string) } ?? "a list"
                    throw ConfigFileError(
                        .badValue, "\(key): expected true or false, got '\(got)'", path: name, line: line)
                }
                setting = .flag(b)
            case .option, .optionalValue:
                if case .optionalValue(let fallback) = kind, value.scalar?.string == "" || value.bool == true {
                    setting = .option(fallback)
                    break
                }
                guard let scalar = value.scalar?.string, !scalar.isEmpty else {
                    throw ConfigFileError(.badValue, "\(key): expected a single value", path: name, line: line)
                }
                setting = .option(scalar)
            case .list:
                var items: [ConfigSetting.Item] = []
                if let sequence = value.sequence {
                    items.reserveCapacity(sequence.count)
                    for item in sequence {
                        stats.values += 1
                        guard let scalar = item.scalar?.string else {
                            throw ConfigFileError(
                                .badValue, "\(key): expected a list of values", path: name,
                                line: item.mark?.line ?? line)
                        }
                        items.append(.init(value: scalar, line: item.mark?.line ?? line))
                    }
                } else {
                    guard let scalar = value.scalar?.string else {
                        throw ConfigFileError(.badValue, "\(key): expected a list of values", path: name, line: line)
                    }
                    items.append(.init(value: scalar, line: value.mark?.line ?? line))
                }
                setting = .list(items)
            case .records(let fields):
                setting = .records(try records(value, fields: fields, key: key, line: line, name: name, stats: &stats))
            }
            settings.append(ConfigSetting(key: key, line: line, value: setting))
        }
        return settings
    }

    /// The known key closest to `key`, when one is close (a typo, `_` for `-`).
    public func suggestion(for key: String) -> String? {
        let normalized = String(key.lowercased().map { $0 == "_" ? "-" : $0 })
        if schema[normalized] != nil { return normalized }
        // Keys are short: compare at most the first 64 characters.
        let probe = String(key.prefix(64))
        var best: (String, Int)?
        for candidate in schema.keys.sorted() {
            let d = Self.distance(candidate, probe)
            if d <= 3 && (best == nil || d < best!.1) { best = (candidate, d) }
        }
        return best?.0
    }

    /// Edit distance, for suggestions.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var previous = row[0]
            row[0] = i
            for j in 1...b.count {
                let old = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = old
            }
        }
        return row[b.count]
    }

    /// A key or value for a message: control characters escaped, at most 80 characters.
    static func printable(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            if out.unicodeScalars.count >= 80 {
                out += "…"
                break
            }
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func yamlLine(_ error: YamlError) -> Int? {
        switch error {
        case .scanner(_, _, let mark, _), .parser(_, _, let mark, _), .composer(_, _, let mark, _): mark.line
        case .duplicatedKeysInMapping(_, let context): context.mark.line
        default: nil
        }
    }

    static func yamlProblem(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, _, _), .parser(_, let problem, _, _), .composer(_, let problem, _, _): problem
        case .duplicatedKeysInMapping(let keys, _):
            "a key is set twice in a mapping (\(keys.prefix(3).map(printable).joined(separator: ", ")))"
        case .reader(let problem, _, _, _): problem
        default: "\(error)"
        }
    }
}

extension ConfigReader {
    /// A ``ConfigKind/records(_:)`` value: a list of mappings of `fields`, each value one scalar
    /// (or a list, for a list field).
    func records(
        _ value: Node, fields: [String: ConfigField], key: String, line: Int, name: String,
        stats: inout ConfigStatistics
    ) throws(ConfigFileError) -> [ConfigSetting.Record] {
        guard let sequence = value.sequence else {
            throw ConfigFileError(.badValue, "\(key): expected a list of mappings", path: name, line: line)
        }
        var records: [ConfigSetting.Record] = []
        for item in sequence {
            let itemLine = item.mark?.line ?? line
            guard let mapping = item.mapping else {
                throw ConfigFileError(.badValue, "\(key): expected a list of mappings", path: name, line: itemLine)
            }
            var record = ConfigSetting.Record(line: itemLine, values: [])
            var seen: Set<String> = []
            for (fieldNode, fieldValue) in mapping {
                stats.values += 1
                let fieldLine = fieldNode.mark?.line ?? itemLine
                guard let field = fieldNode.scalar?.string, let kind = fields[field] else {
                    let got = fieldNode.scalar.map { Self.printable($0.string) } ?? "a list"
                    throw ConfigFileError(
                        .unknownKey,
                        "\(key): unknown key '\(got)' (known: "
                            + fields.keys.sorted().joined(separator: ", ") + ")", path: name, line: fieldLine)
                }
                guard seen.insert(field).inserted else {
                    throw ConfigFileError(.duplicateKey, "\(key): '\(field)' is set twice", path: name, line: fieldLine)
                }
                var values: [String] = []
                if kind.list, let list = fieldValue.sequence {
                    for v in list {
                        stats.values += 1
                        guard let scalar = v.scalar?.string else {
                            throw ConfigFileError(
                                .badValue, "\(key): \(field): expected values", path: name, line: fieldLine)
                        }
                        values.append(scalar)
                    }
                } else {
                    guard let scalar = fieldValue.scalar?.string else {
                        throw ConfigFileError(
                            .badValue, "\(key): \(field): expected a single value", path: name, line: fieldLine)
                    }
                    values.append(scalar)
                }
                record.values.append(.init(field: field, values: values))
            }
            // Without its primary field (a target without its url), a record stands for nothing:
            // said, not dropped.
            if let primary = fields.first(where: { $0.value.primary })?.key, !seen.contains(primary) {
                throw ConfigFileError(
                    .badValue, "\(key): an entry without '\(primary)' (each needs one)", path: name, line: itemLine)
            }
            records.append(record)
        }
        return records
    }
}

/// A field of a ``ConfigKind/records(_:)`` key: the option its value stands for, and whether it
/// takes a list.
public struct ConfigField: Sendable, Hashable {
    /// The long option (without `--`).
    public var option: String
    /// Whether the field takes a list: each item becomes `--option N:item`, N the record's 1-based
    /// place.
    public var list: Bool
    /// Whether the field is the record's first option, given once per record (`upload` for a target).
    public var primary: Bool

    public init(option: String, list: Bool = false, primary: Bool = false) {
        self.option = option
        self.list = list
        self.primary = primary
    }
}

/// The kinds of value a key takes.
public enum ConfigKind: Sendable, Hashable {
    /// One value: `distance-filter: 10`.
    case option
    /// One value, where an empty value or `true` stands for `fallback` (`gpsd:` means
    /// `gpsd: localhost:2947`).
    case optionalValue(fallback: String)
    /// `true` or `false`.
    case flag
    /// A list of values, or one value.
    case list
    /// A list of mappings of these fields (upload targets), read as options paired by order: each
    /// record's primary field once per record, every other field set in any record once per record
    /// (`''` where a record leaves it out), list fields as `--option N:item`.
    case records([String: ConfigField])
}

/// One key of a file and its value.
public struct ConfigSetting: Sendable, Hashable {
    /// One value of a list, with its line.
    public struct Item: Sendable, Hashable {
        public var value: String
        public var line: Int
        public init(value: String, line: Int) {
            self.value = value
            self.line = line
        }
    }

    /// One mapping of a ``ConfigKind/records(_:)`` key.
    public struct Record: Sendable, Hashable {
        public struct Value: Sendable, Hashable {
            public var field: String
            public var values: [String]
        }

        public var line: Int
        public var values: [Value]
    }

    public enum Value: Sendable, Hashable {
        case flag(Bool)
        case option(String)
        case list([Item])
        case records([Record])
    }

    public var key: String
    /// The key's 1-based line.
    public var line: Int
    public var value: Value

    public init(key: String, line: Int, value: Value) {
        self.key = key
        self.line = line
        self.value = value
    }
}

/// The work a ``ConfigReader`` did on a file: what complexity tests count.
public struct ConfigStatistics: Sendable, Hashable {
    /// libyaml events read by the pre-pass.
    public var events = 0
    /// Nodes the document stands for, aliases expanded.
    public var expandedNodes = 0
    /// Keys and list items turned into settings.
    public var values = 0
    public init() {}
}

/// ConfigFile's error: a problem in a configuration file, what (``code``, ``message``) and where
/// (``path``, ``line``), with the cause (``underlying``: the YAML parser's error) when there is one.
public struct ConfigFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The file cannot be read.
        public static let unreadable = Code(rawValue: "unreadable")
        /// Larger than ``ConfigReader/Limits/maxBytes``.
        public static let tooLarge = Code(rawValue: "too-large")
        /// Not text, or not YAML.
        public static let notYAML = Code(rawValue: "not-yaml")
        /// Aliases expand beyond ``ConfigReader/Limits/maxNodes``, or nesting beyond
        /// ``ConfigReader/Limits/maxDepth``.
        public static let tooComplex = Code(rawValue: "too-complex")
        /// The document is not a mapping.
        public static let notAMapping = Code(rawValue: "not-a-mapping")
        /// A key that is not a plain name (a list, a mapping, an alias of one).
        public static let badKey = Code(rawValue: "bad-key")
        /// A key the schema does not know.
        public static let unknownKey = Code(rawValue: "unknown-key")
        /// A key set twice.
        public static let duplicateKey = Code(rawValue: "duplicate-key")
        /// A value of the wrong kind.
        public static let badValue = Code(rawValue: "bad-value")
    }

    public var code: Code
    /// What is wrong, in a sentence.
    public var message: String
    /// The file's path (or the name given to ``ConfigReader/parse(_:name:)``).
    public var path: String
    /// The 1-based line, when known.
    public var line: Int?
    /// The error this one comes from (Yams' `YamlError` for ``Code/notYAML``), when there is one.
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, path: String, line: Int?, underlying: (any Error)? = nil) {
        self.code = code
        self.path = path
        self.line = line
        self.message = message
        self.underlying = underlying
    }

    /// Equal when they say the same thing at the same place (the cause is not compared).
    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.path == b.path && a.line == b.line && a.message == b.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(path)
        hasher.combine(line)
        hasher.combine(message)
    }

    /// `config.yaml:3: unknown key 'distance_filter' (did you mean 'distance-filter'?)`
    public var description: String { "\(path)\(line.map { ":\($0)" } ?? ""): \(message)" }
}

// MARK: - Reading and the pre-pass

extension ConfigReader {
    /// The file's bytes, refusing more than `limit` (reading at most one byte past it).
    func readFile(_ path: String, limit: Int) throws(ConfigFileError) -> [UInt8] {
        let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        if fd < 0 {
            throw ConfigFileError(
                .unreadable, "cannot read: \(String(cString: strerror(errno)))", path: path, line: nil)
        }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while out.count <= limit {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ConfigFileError(
                    .unreadable, "cannot read: \(String(cString: strerror(errno)))", path: path, line: nil)
            }
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return out
    }

    /// Refuses bytes that are not text: invalid UTF-8, or control characters YAML does not allow.
    static func checkText(_ bytes: [UInt8], name: String) throws(ConfigFileError) {
        var line = 1
        var i = 0
        func refuse(_ what: String) throws(ConfigFileError) -> Never {
            throw ConfigFileError(
                .notYAML, "not YAML (a binary file?): \(what) at byte \(i) is not text", path: name, line: line)
        }
        func hex(_ b: UInt8) -> String {
            let digits = Array("0123456789ABCDEF")
            return "0x\(digits[Int(b >> 4)])\(digits[Int(b & 15)])"
        }
        while i < bytes.count {
            let b = bytes[i]
            if b < 0x80 {
                if b == 0x0A {
                    line += 1
                } else if (b < 0x20 && b != 0x09 && b != 0x0D) || b == 0x7F {
                    try refuse("byte \(hex(b))")
                }
                i += 1
                continue
            }
            // A UTF-8 sequence: lead byte, length, continuation bytes, no overlongs or surrogates.
            let length: Int
            var scalar: UInt32
            switch b {
            case 0xC2...0xDF: length = 2; scalar = UInt32(b & 0x1F)
            case 0xE0...0xEF: length = 3; scalar = UInt32(b & 0x0F)
            case 0xF0...0xF4: length = 4; scalar = UInt32(b & 0x07)
            default: try refuse("byte \(hex(b)) (not UTF-8)")
            }
            guard i + length <= bytes.count else { try refuse("byte \(hex(b)) (a UTF-8 sequence cut short)") }
            for k in 1..<length {
                let c = bytes[i + k]
                guard c & 0xC0 == 0x80 else { try refuse("byte \(hex(b)) (not UTF-8)") }
                scalar = scalar << 6 | UInt32(c & 0x3F)
            }
            let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
            if scalar < minimum || scalar > 0x10FFFF || (0xD800...0xDFFF).contains(scalar) {
                try refuse("byte \(hex(b)) (not UTF-8)")
            }
            // C1 controls (NEL, U+0085, is a line break YAML allows) and the non-characters.
            if ((0x80...0x9F).contains(scalar) && scalar != 0x85) || scalar == 0xFFFE || scalar == 0xFFFF {
                try refuse("character U+\(String(scalar, radix: 16, uppercase: true))")
            }
            i += length
        }
    }

    /// One linear pass over libyaml's events, before Yams composes a tree: bounds nesting and
    /// alias expansion, refuses lists and mappings as keys, finds a top-level key set twice.
    func prepass(_ bytes: [UInt8], name: String, stats: inout ConfigStatistics) throws(ConfigFileError) {
        struct Frame {
            var isMapping: Bool
            var anchor: String?
            /// Nodes below, aliases expanded.
            var size = 0
            /// In a mapping: whether the next node is a key.
            var expectingKey = true
        }
        struct Anchored {
            var size: Int
            var isCollection: Bool
            var scalar: String?
        }
        let limits = self.limits
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else {
            throw ConfigFileError(.notYAML, "cannot start the YAML parser (out of memory)", path: name, line: nil)
        }
        defer { yaml_parser_delete(&parser) }
        var failure: ConfigFileError?
        bytes.withUnsafeBufferPointer { input in
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, input.baseAddress, input.count)
            var stack: [Frame] = []
            var anchors: [String: Anchored] = [:]
            var topLevelKeys: Set<String> = []
            var documents = 0
            var total = 0

            func string(_ p: UnsafeMutablePointer<yaml_char_t>?, _ length: Int? = nil) -> String? {
                guard let p else { return nil }
                if let length {
                    return String(decoding: UnsafeBufferPointer(start: p, count: length), as: UTF8.self)
                }
                return String(cString: UnsafeRawPointer(p).assumingMemoryBound(to: CChar.self))
            }
            func problem(_ code: ConfigFileError.Code, _ mark: yaml_mark_t, _ message: String) -> ConfigFileError {
                ConfigFileError(code, message, path: name, line: Int(mark.line) + 1)
            }
            /// A node of `size` (aliases expanded) at `mark`; `scalar` when it is one.
            func node(size: Int, isCollectionKey: Bool, scalar: String?, mark: yaml_mark_t) -> ConfigFileError? {
                total = min(total + size, Int.max / 2)
                stats.expandedNodes = total
                if total > limits.maxNodes {
                    return problem(
                        .tooComplex, mark,
                        "the document stands for more than \(limits.maxNodes) values "
                            + "once its aliases (*name) are expanded: refused (an alias bomb?)")
                }
                guard !stack.isEmpty else { return nil }
                let top = stack.count - 1
                stack[top].size = min(stack[top].size + size, Int.max / 2)
                guard stack[top].isMapping else { return nil }
                defer { stack[top].expectingKey.toggle() }
                guard stack[top].expectingKey else { return nil }
                if isCollectionKey {
                    return problem(
                        .badKey, mark, "a key must be a plain name, not a list or mapping (or an alias of one)")
                }
                if stack.count == 1, let scalar, !topLevelKeys.insert(scalar).inserted {
                    return problem(.duplicateKey, mark, "'\(ConfigReader.printable(scalar))' is set twice")
                }
                return nil
            }

            var event = yaml_event_t()
            while failure == nil {
                guard yaml_parser_parse(&parser, &event) == 1 else {
                    let text = parser.problem.map { String(cString: $0) } ?? "unreadable"
                    let mark = parser.error == YAML_READER_ERROR ? nil : Int(parser.problem_mark.line) + 1
                    if text.hasPrefix("Maximum nesting level") {
                        // libyaml's own bound (1000), met while it looks ahead.
                        failure = ConfigFileError(
                            .tooComplex,
                            "lists and mappings nested too deeply "
                                + "(more than \(limits.maxDepth) levels)", path: name, line: mark)
                    } else {
                        failure = ConfigFileError(.notYAML, "not valid YAML: \(text)", path: name, line: mark)
                    }
                    break
                }
                defer { yaml_event_delete(&event) }
                stats.events += 1
                let mark = event.start_mark
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    return
                case YAML_DOCUMENT_START_EVENT:
                    documents += 1
                    if documents > 1 {
                        failure = problem(
                            .notYAML, mark, "more than one YAML document (---): a configuration file is one mapping")
                    }
                case YAML_SCALAR_EVENT:
                    let value = string(event.data.scalar.value, Int(event.data.scalar.length)) ?? ""
                    if let anchor = string(event.data.scalar.anchor) {
                        anchors[anchor] = Anchored(size: 1, isCollection: false, scalar: value)
                    }
                    failure = node(size: 1, isCollectionKey: false, scalar: value, mark: mark)
                case YAML_ALIAS_EVENT:
                    let name = string(event.data.alias.anchor) ?? ""
                    guard let anchored = anchors[name] else {
                        failure = problem(
                            .notYAML, mark, "not valid YAML: found undefined alias '*\(ConfigReader.printable(name))'")
                        break
                    }
                    failure = node(
                        size: anchored.size, isCollectionKey: anchored.isCollection, scalar: anchored.scalar,
                        mark: mark)
                case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                    let isMapping = event.type == YAML_MAPPING_START_EVENT
                    // A collection in key position is refused as it opens (its size comes later).
                    if let top = stack.last, top.isMapping, top.expectingKey {
                        failure = problem(.badKey, mark, "a key must be a plain name, not a list or mapping")
                        break
                    }
                    if stack.count >= limits.maxDepth {
                        failure = problem(
                            .tooComplex, mark,
                            "lists and mappings nested too deeply (more than \(limits.maxDepth) levels)")
                        break
                    }
                    let anchor =
                        isMapping ? string(event.data.mapping_start.anchor) : string(event.data.sequence_start.anchor)
                    stack.append(Frame(isMapping: isMapping, anchor: anchor))
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    guard let frame = stack.popLast() else { break }
                    let size = min(frame.size + 1, Int.max / 2)
                    if let anchor = frame.anchor {
                        anchors[anchor] = Anchored(size: size, isCollection: true, scalar: nil)
                    }
                    // The collection's own node; its children were counted as they came.
                    total -= frame.size
                    failure = node(size: size, isCollectionKey: false, scalar: nil, mark: mark)
                default:
                    break
                }
            }
        }
        if let failure { throw failure }
    }
}

// MARK: - Writing

extension ConfigReader {
    /// `settings` as a configuration file: what ``parse(_:name:)`` reads back as the same keys
    /// and values (strings double-quoted, so `yes` or `1.0` stay text).
    public static func yaml(_ settings: [ConfigSetting]) -> String {
        func text(_ s: String) -> Node {
            .scalar(.init(s, Tag(.str), .doubleQuoted))
        }
        var pairs: [(Node, Node)] = []
        for setting in settings {
            let value: Node
            switch setting.value {
            case .flag(let b): value = .scalar(.init(b ? "true" : "false", Tag(.bool), .plain))
            case .option(let s): value = text(s)
            case .list(let items): value = .sequence(.init(items.map { text($0.value) }, Tag(.seq), .block))
            case .records(let records):
                value = .sequence(
                    .init(
                        records.map { r in
                            .mapping(
                                .init(
                                    r.values.map { v in
                                        (
                                            text(v.field),
                                            v.values.count == 1
                                                ? text(v.values[0])
                                                : .sequence(.init(v.values.map(text), Tag(.seq), .block))
                                        )
                                    }, Tag(.map), .block))
                        }, Tag(.seq), .block))
            }
            pairs.append((text(setting.key), value))
        }
        return (try? Yams.serialize(node: .mapping(.init(pairs, Tag(.map), .block)))) ?? ""
    }
}
