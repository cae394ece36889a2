/// One key of a configuration file as the command-line arguments it stands for: a file with one
/// key per long option (`distance-filter: 10` is `--distance-filter 10`, a true flag is the flag,
/// a list repeats the option), so a command reads its file by parsing these arguments before its
/// own command line, which wins.
public struct OptionArguments: Sendable, Hashable {
    public var key: String
    public var line: Int
    public var arguments: [String]
    /// For a list, each item's arguments and line.
    public var items: [Item] = []

    public struct Item: Sendable, Hashable {
        public var arguments: [String]
        public var line: Int
    }

    public init(_ setting: ConfigSetting) {
        self.init(setting, schema: [:])
    }

    /// The arguments of `setting`, a key of `schema` (which says what a list of records stands for).
    public init(_ setting: ConfigSetting, schema: [String: ConfigKind]) {
        key = setting.key
        line = setting.line
        switch setting.value {
        case .records(let records):
            guard case .records(let fields)? = schema[setting.key] else {
                arguments = []
                return
            }
            arguments = Self.pairedArguments(records, fields: fields)
        case .flag(let on):
            arguments = on ? ["--\(key)"] : []
        case .option(let value):
            // A value that starts with "-" (a negative number) would read as an option of its own
            // ("Missing value for --distance-filter"): joined, it reaches the option's own check.
            arguments = value.hasPrefix("-") ? ["--\(key)=\(value)"] : ["--\(key)", value]
        case .list(let values):
            items = values.map { Item(arguments: ["--\(setting.key)", $0.value], line: $0.line) }
            arguments = items.flatMap(\.arguments)
        }
    }
}

extension OptionArguments {
    /// Records as options paired by order: the primary field's option once per record, then each
    /// other field set in any record once per record (`''` where one leaves it out), then list
    /// fields' items as `--option N:item`.
    static func pairedArguments(_ records: [ConfigSetting.Record], fields: [String: ConfigField]) -> [String] {
        var arguments: [String] = []
        let set = Set(records.flatMap { $0.values.map(\.field) })
        let order = fields.keys.sorted { (fields[$0]!.primary ? 0 : 1, $0) < (fields[$1]!.primary ? 0 : 1, $1) }
        for field in order where set.contains(field) {
            let f = fields[field]!
            for (i, record) in records.enumerated() {
                let values = record.values.first { $0.field == field }?.values
                if f.list {
                    for v in values ?? [] { arguments += ["--\(f.option)", "\(i + 1):\(v)"] }
                } else {
                    arguments += ["--\(f.option)", values?.first ?? ""]
                }
            }
        }
        return arguments
    }
}

extension ConfigReader {
    /// The file's settings as command-line arguments, key by key.
    public func optionArguments(path: String) throws(ConfigFileError) -> [OptionArguments] {
        try read(path: path).map { OptionArguments($0, schema: schema) }
    }

    /// List items checked per parse in ``check(path:parses:unattributed:parse:)``: argument
    /// parsers are commonly quadratic in the number of arguments (swift-argument-parser removes
    /// each consumed one from an array), so a long list is checked in slices of this size, linear
    /// overall.
    public static let sliceSize = 128

    /// Checks the file as the command would read it, naming the key and line of any problem.
    ///
    /// A problem is put on the one key that explains it: the key without which the file is
    /// accepted (or, when several keys are wrong, without which the rest has a problem of its own
    /// that one other key explains). A problem no single key explains (no input chosen, two inputs
    /// chosen) is reported without a line. Nothing is read from the problem's text.
    ///
    /// - Parameters:
    ///   - parses: incremented for every call of `parse`.
    ///   - parse: parses a command line and returns its error message, or nil when it is accepted.
    /// - Complexity: O(n) in the file's size for a file that is accepted: lists are parsed in
    ///   slices of ``sliceSize`` items along with every other key, so cross-key rules still apply to
    ///   each item. Finding the key of a problem takes a few parses per key.
    public func check(
        path: String, parses: inout Int,
        parse: ([String]) -> String?
    ) throws(ConfigFileError) -> [OptionArguments] {
        let entries = try optionArguments(path: path)
        try Self.check(entries, path: path, parses: &parses, parse: parse)
        return entries
    }

    /// ``check(path:parses:parse:)`` of settings already read.
    static func check(
        _ entries: [OptionArguments], path: String, parses: inout Int,
        parse: ([String]) -> String?
    ) throws(ConfigFileError) {
        let single = entries.filter(\.items.isEmpty)
        let lists = entries.filter { !$0.items.isEmpty }
        typealias Part = (key: String, line: Int, arguments: [String])
        let base: [Part] = single.map { ($0.key, $0.line, $0.arguments) }
        func parsing(_ parts: [Part]) -> String? {
            parses += 1
            return parse(parts.flatMap(\.arguments))
        }
        /// The part whose removal from `parts` ends the problem `message`: the file is accepted
        /// without it, or what is left has another problem that `depth` more removals explain.
        func culprit(of message: String, in parts: [Part], depth: Int) -> Part? {
            var found: [Part] = []
            for i in parts.indices {
                var rest = parts
                let part = rest.remove(at: i)
                guard let other = parsing(rest) else {
                    found.append(part)
                    continue
                }
                if depth > 0, other != message, culprit(of: other, in: rest, depth: depth - 1) != nil {
                    found.append(part)
                }
            }
            return found.count == 1 ? found[0] : nil
        }
        func check(_ parts: [Part]) throws(ConfigFileError) {
            guard let message = parsing(parts) else { return }
            if let part = culprit(of: message, in: parts, depth: 2) {
                throw ConfigFileError(.badValue, "\(part.key): \(message)", path: path, line: part.line)
            }
            throw ConfigFileError(.badValue, message, path: path, line: nil)
        }
        if lists.isEmpty {
            try check(base)
            return
        }
        for list in lists {
            var start = 0
            while start < list.items.count {
                let slice = list.items[start..<min(start + Self.sliceSize, list.items.count)]
                if parsing(base + [(list.key, list.line, slice.flatMap(\.arguments))]) != nil {
                    // Name the item: check the slice's items one by one.
                    for item in slice {
                        try check(base + [(list.key, item.line, item.arguments)])
                    }
                    try check(base + [(list.key, list.line, slice.flatMap(\.arguments))])
                }
                start += Self.sliceSize
            }
        }
    }

    /// A command line with its configuration file read in: `option FILE` (the command's option
    /// that names the file, taken out of the arguments), else `defaultPath` when `exists(defaultPath)`;
    /// the file's arguments go right after the subcommand at `index`, so the command line, parsed
    /// later, wins.
    ///
    /// A single-value option the command line gives is the command line's alone: the file's value
    /// is left out. So are the repeatable options listed in `replacedByCommandLine` (a command's
    /// list of targets): the file's values are left out rather than added to.
    ///
    /// With `keeping`, only those keys are read in (a command that shares some of another's options
    /// reads its file for them).
    ///
    /// - Throws: ``ConfigFileError`` for an unreadable or invalid file (a missing default is no problem).
    public func insertingFile(
        into arguments: [String], at index: Int, option: String, defaultPath: String,
        replacedByCommandLine: Set<String> = [], keeping: Set<String>? = nil,
        exists: (String) -> Bool
    ) throws(ConfigFileError) -> [String] {
        try readingIn(
            arguments, at: index, option: option, defaultPath: defaultPath,
            replacedByCommandLine: replacedByCommandLine, keeping: keeping, exists: exists
        )?.arguments ?? arguments
    }

    /// The file ``insertingFile(into:at:option:defaultPath:replacedByCommandLine:keeping:exists:)``
    /// reads into a command line, with what it read; `nil` when there is none (no `option` and no
    /// default file). Keeps what a refused command line needs to find its culprit in the file
    /// (``ConfigReadIn/locate(parse:)``).
    public func readingIn(
        _ arguments: [String], at index: Int, option: String, defaultPath: String,
        replacedByCommandLine: Set<String> = [], keeping: Set<String>? = nil,
        exists: (String) -> Bool
    ) throws(ConfigFileError) -> ConfigReadIn? {
        var arguments = arguments
        var path = defaultPath
        var explicit = false
        if let i = arguments.firstIndex(of: option), i + 1 < arguments.count {
            path = arguments[i + 1]
            explicit = true
            arguments.removeSubrange(i...(i + 1))
        }
        guard explicit || exists(path) else { return nil }
        let given = Set(arguments.filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2).prefix { $0 != "=" }) })
        // The command line's single values win: the file's are not read in (so a bad one there does
        // not refuse a command line that replaces it).
        let replaced = replacedByCommandLine.intersection(given).union(
            given.filter { key in
                switch schema[key] {
                case .option?, .optionalValue?: true
                default: false
                }
            })
        // A key is left out when the command line gives its option (a list of records: its first option).
        let entries = try optionArguments(path: path).filter { entry in
            keeping.map { $0.contains(entry.key) } ?? true
                && !replaced.contains(entry.key)
                && !(entry.arguments.first.map { replaced.contains(String($0.dropFirst(2))) } ?? false)
        }
        return ConfigReadIn(path: path, commandLine: arguments, index: index, entries: entries)
    }

    /// A command line with the fallback of every option whose value may be omitted
    /// (`.optionalValue(fallback:)` in the schema) supplied where it is: `track --gpsd` is
    /// `track --gpsd localhost:2947`, as `gpsd:` is in the file.
    public func insertingFallbacks(into arguments: [String]) -> [String] {
        var out: [String] = []
        out.reserveCapacity(arguments.count + 1)
        for (i, argument) in arguments.enumerated() {
            out.append(argument)
            guard argument.hasPrefix("--"), case .optionalValue(let fallback)? = schema[String(argument.dropFirst(2))],
                i + 1 == arguments.count || arguments[i + 1].hasPrefix("-")
            else { continue }
            out.append(fallback)
        }
        return out
    }

    /// The default file of `command`: `$XDG_CONFIG_HOME/command/config.yaml`, else
    /// `$HOME/.config/command/config.yaml`.
    public static func defaultPath(of command: String, environment: [String: String]) -> String {
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty { return xdg + "/\(command)/config.yaml" }
        return (environment["HOME"] ?? ".") + "/.config/\(command)/config.yaml"
    }
}

/// A configuration file read into a command line (``ConfigReader/readingIn(_:at:option:defaultPath:replacedByCommandLine:keeping:exists:)``).
public struct ConfigReadIn: Sendable {
    /// The file.
    public let path: String
    /// The command line without the file (and without the option that named it).
    public let commandLine: [String]
    /// Where the file's arguments go: right after the subcommand, so the command line wins.
    public let index: Int
    /// The file's settings that were read in.
    public let entries: [OptionArguments]

    /// The command line with the file's arguments in.
    public var arguments: [String] { inserting(entries.flatMap(\.arguments)) }

    func inserting(_ fileArguments: [String]) -> [String] {
        var out = commandLine
        out.insert(contentsOf: fileArguments, at: min(index, out.count))
        return out
    }

    /// The setting of the file that explains why the command line with the file in is refused,
    /// as ``ConfigReader/check(path:parses:parse:)`` finds it (the setting without which it is
    /// accepted), with the file's path and the setting's line; `nil` when no one setting of the
    /// file explains it (the problem is the command line's own, or several settings' together).
    ///
    /// - Parameter parse: parses a whole command line and returns its error message, or nil when
    ///   it is accepted.
    public func locate(parse: ([String]) -> String?) -> ConfigFileError? {
        var parses = 0
        do {
            try ConfigReader.check(entries, path: path, parses: &parses) { parse(inserting($0)) }
            return nil
        } catch {
            return error.line == nil ? nil : error
        }
    }
}
