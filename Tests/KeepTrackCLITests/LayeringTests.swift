import Foundation
import KeepTrackTesting
import Testing

/// The module rules of docs/ARCHITECTURE.md, checked on the sources: the command line owns every
/// word a user types or reads, the libraries stay embeddable, and every target says what it uses.
@Suite("Layering")
struct LayeringTests {
    /// A target of Package.swift: its kind (`target`, `executableTarget`, `testTarget`, ...), its
    /// directory and the targets and products it depends on, by name.
    struct Target {
        var name: String
        var kind: String
        var path: String
        var dependencies: Set<String>
    }

    /// The targets Package.swift declares with a literal name, read from its text: each
    /// `.KIND(name: "NAME", ...)` with its `dependencies: [...]` and `path:`, and the dependencies
    /// appended later (`package.targets.first { $0.name == "NAME" }!.dependencies.append("X")`).
    func packageTargets() throws -> [String: Target] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        var targets: [String: Target] = [:]
        let declaration = /\.(target|executableTarget|testTarget|systemLibrary|plugin)\(\s*name:\s*"([^"]+)"/
        for match in text.matches(of: declaration) {
            let (kind, name) = (String(match.output.1), String(match.output.2))
            // The declaration's own parentheses.
            var depth = 1
            var end = match.range.upperBound
            while end < text.endIndex, depth > 0 {
                if text[end] == "(" { depth += 1 } else if text[end] == ")" { depth -= 1 }
                end = text.index(after: end)
            }
            let body = String(text[match.range.upperBound..<end])
            var dependencies = Set<String>()
            if let list = body.firstMatch(of: /dependencies:\s*\[/) {
                var depth = 1
                var close = list.range.upperBound
                while close < body.endIndex, depth > 0 {
                    if body[close] == "[" { depth += 1 } else if body[close] == "]" { depth -= 1 }
                    close = body.index(after: close)
                }
                let items = body[list.range.upperBound..<close].replacing(/package:\s*"[^"]*"/, with: "")
                for quoted in items.matches(of: /"([^"]+)"/) { dependencies.insert(String(quoted.output.1)) }
            }
            let path =
                body.firstMatch(of: /path:\s*"([^"]+)"/).map { String($0.output.1) }
                ?? (kind == "testTarget" ? "Tests/\(name)" : "Sources/\(name)")
            targets[name] = Target(name: name, kind: kind, path: path, dependencies: dependencies)
        }
        for appended in text.matches(of: /\$0\.name == "([^"]+)" \}!\.dependencies\.append\("([^"]+)"\)/) {
            targets[String(appended.output.1)]?.dependencies.insert(String(appended.output.2))
        }
        return targets
    }

    /// The Swift files under `path` (relative to the package root), recursively, with their text.
    func sources(under path: String) throws -> [(name: String, text: String)] {
        let dir = packageRoot.appendingPathComponent(path)
        guard let files = FileManager.default.enumerator(atPath: dir.path)?.allObjects as? [String] else { return [] }
        return try files.filter { $0.hasSuffix(".swift") }.sorted().map {
            ("\(path)/\($0)", try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8))
        }
    }

    func sources(of target: String) throws -> [(name: String, text: String)] { try sources(under: "Sources/\(target)") }

    /// The modules `files` import (`import X`, `@testable import X`, `@preconcurrency import X`,
    /// `internal import X`, `public import X`, `import struct X.Y`, at the start of a line or
    /// indented in an `#if`), each with the files that import it.
    func imports(in files: [(name: String, text: String)]) -> [String: [String]] {
        let kinds: Set = ["struct", "class", "enum", "protocol", "func", "typealias", "var", "let"]
        let access: Set = ["public", "package", "internal", "fileprivate", "private", "open"]
        var out: [String: [String]] = [:]
        for (name, text) in files {
            var inMultilineString = false
            for line in text.split(separator: "\n") {
                // An "import" inside a multi-line string literal is another language's (Python's).
                let delimiters = line.ranges(of: "\"\"\"").count - line.ranges(of: "\\\"\"\"").count
                if delimiters % 2 == 1 { inMultilineString.toggle() }
                guard !inMultilineString, line.contains("import ") else { continue }
                var words = line.split(separator: " ").drop { $0.hasPrefix("@") || access.contains(String($0)) }
                guard words.first == "import" else { continue }
                words = words.dropFirst()
                if let kind = words.first, kinds.contains(String(kind)) { words = words.dropFirst() }
                guard let module = words.first?.split(separator: ".").first else { continue }
                out[String(module), default: []].append(name)
            }
        }
        return out
    }

    func imports(of target: String) throws -> [String: [String]] { imports(in: try sources(of: target)) }

    /// The library targets: what a program embeds (test support excepted, which may print).
    func libraries() throws -> [Target] {
        try packageTargets().values
            .filter { $0.kind == "target" && !["KeepTrackTesting", "TrackServerTesting"].contains($0.name) }
            .sorted { $0.name < $1.name }
    }

    /// The code of a Swift file without its comments: whole-line `//` comments dropped, so that a
    /// doc comment may name the option a value stands for.
    func code(_ text: String) -> [(line: Int, text: Substring)] {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { i, line in
            line.trimmingPrefix(while: \.isWhitespace).hasPrefix("//") ? nil : (i + 1, line)
        }
    }

    /// The string literals of `text` that hold a command-line flag (`--name`), with their lines;
    /// the lines of multi-line literals count as literals.
    func flagLiterals(_ text: String) -> [(line: Int, text: String)] {
        let flag = /(?:^|[^\w-])--[a-z]/
        var out: [(Int, String)] = []
        var inMultiline = false
        for (number, line) in code(text) where line.contains("--") || line.contains("\"\"\"") || inMultiline {
            let delimiters = line.ranges(of: "\"\"\"").count
            if inMultiline || delimiters > 0 {
                if line.contains(flag) { out.append((number, String(line))) }
                if delimiters % 2 == 1 { inMultiline.toggle() }
                continue
            }
            for literal in line.matches(of: /"(?:[^"\\]|\\.)*"/) where literal.output.contains(flag) {
                out.append((number, String(line)))
            }
        }
        return out
    }

    @Test func noLibraryNamesACommandLineFlag() throws {
        for library in try libraries() {
            for (name, text) in try sources(under: library.path) {
                for (line, found) in flagLiterals(text) {
                    let found = found.trimmingCharacters(in: .whitespaces)
                    let why = "a library names the field of its settings; Sources/keeptrack says the flag"
                    Issue.record("\(name):\(line) names a flag: \(found) (\(why))")
                }
            }
        }
    }

    @Test func theFlagRuleFindsFlagsInLiteralsOnly() {
        #expect(flagLiterals(#"    return "--port must be between 0 and 65535.""#).count == 1)
        #expect(flagLiterals(#"    hint += " and --device-id""#).count == 1)
        #expect(flagLiterals("    let s = \"\"\"\n    use --faults\n    \"\"\"").map(\.line) == [2])
        #expect(flagLiterals("    /// `--regions FILE` sets it").isEmpty)
        #expect(flagLiterals(#"    (permissions == "r-xp" || permissions == "r--p")"#).isEmpty)
    }

    @Test func noLibraryWritesToTheTerminal() throws {
        let output = /(?:^|[^\w.])print\(|FileHandle\.standard(?:Error|Output)|\bwrite\((?:1|2),|\bfputs\(|\bputs\(/
        for library in try libraries() {
            for (name, text) in try sources(under: library.path) {
                for (line, code) in code(text) where code.contains("(") && code.contains(output) {
                    let code = code.trimmingCharacters(in: .whitespaces)
                    let why = "libraries hand lines and progress to the caller"
                    Issue.record("\(name):\(line) writes to the terminal: \(code) (\(why))")
                }
            }
        }
    }

    @Test func onlyTheCommandLineImportsArgumentParser() throws {
        let targets = try packageTargets().values.filter { $0.name != "keeptrack" && $0.kind != "testTarget" }
        for target in targets {
            let imported = imports(in: try sources(under: target.path))
            let files = imported["ArgumentParser"] ?? []
            #expect(files.isEmpty, "\(target.path) imports ArgumentParser in \(files)")
        }
    }

    /// A module imported only because another dependency happens to bring it in breaks when that
    /// dependency changes: every target declares what it imports.
    @Test func everyTargetDeclaresWhatItImports() throws {
        let system: Set<String> = [
            "Glibc", "Musl", "Darwin", "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch",
            "Synchronization", "Testing", "XCTest", "_Concurrency", "PackagePlugin",
        ]
        let targets = try packageTargets()
        #expect(targets.count >= 20, "Package.swift's targets were not found: \(targets.keys.sorted())")
        for target in targets.values where target.kind != "systemLibrary" && target.kind != "plugin" {
            for (module, files) in imports(in: try sources(under: target.path)).sorted(by: { $0.key < $1.key }) {
                if system.contains(module) || module == target.name || target.dependencies.contains(module) { continue }
                let files = files.joined(separator: ", ")
                Issue.record("\(target.name) imports \(module) (\(files)) without declaring it in Package.swift")
            }
        }
    }

    @Test func nothingIsReExported() throws {
        for dir in ["Sources", "Tests", "Examples", "Benchmarks"] {
            for (name, text) in try sources(under: dir)
            where text.split(separator: "\n").contains(where: {
                $0.trimmingPrefix(while: \.isWhitespace).hasPrefix("@_exported")
            }) {
                Issue.record("\(name) re-exports a module (@_exported): import it where it is used")
            }
        }
    }

    @Test func theCommandLineImportsNoServerOrStorageModule() throws {
        let imported = try imports(of: "keeptrack")
        for module in [
            "GRDB", "AsyncHTTPClient", "Hummingbird", "HummingbirdCore", "NIO", "NIOCore", "NIOPosix", "NIOHTTP1",
        ] {
            #expect(imported[module] == nil, "Sources/keeptrack imports \(module) in \(imported[module] ?? [])")
        }
    }

    /// Time is a parameter: everything that waits or tells time takes an `EpochClock` (so a test on a
    /// manual clock waits for nothing). The only real sleeps and other clocks are the clock layer's
    /// (Geo's wall clock) and the device layer's (a source's reading thread given time to exit), each
    /// named here by file and call. Test support (KeepTrackTesting, TrackServerTesting) is free.
    static let timeExceptions: [String: Set<String>] = [
        "Geo/WallClock.swift": ["Task.sleep"],  // the wall clock's own sleep
        "GPSInput/SourceIterator.swift": ["Task.sleep"],  // a device's reading thread given time to exit
    ]

    /// The calls that sleep or read a clock other than an injected one, in `text` outside comments.
    func timeCalls(_ text: String) -> [(line: Int, call: String)] {
        let calls = [
            "Task.sleep", "Thread.sleep", "usleep(", "nanosleep(", "ContinuousClock()", "ContinuousClock.now",
            "SuspendingClock()", "SuspendingClock.now",
        ]
        var found: [(Int, String)] = []
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            for call in calls where code.contains(call) { found.append((i + 1, call)) }
        }
        return found
    }

    @Test func nothingSleepsOrReadsAnotherClockOutsideTheClockAndDeviceLayers() throws {
        let root = packageRoot.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.subpaths(atPath: root.path)).filter {
            $0.hasSuffix(".swift") && !$0.hasPrefix("KeepTrackTesting/") && !$0.hasPrefix("TrackServerTesting/")
        }
        #expect(files.count > 100, "the sources were not found under \(root.path)")
        var found: [String] = []
        var used: [String: Set<String>] = [:]
        for file in files.sorted() {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (line, call) in timeCalls(text) {
                if Self.timeExceptions[file]?.contains(call) == true {
                    used[file, default: []].insert(call)
                } else {
                    found.append("Sources/\(file):\(line): \(call)")
                }
            }
        }
        #expect(found.isEmpty, "sleeps or clocks outside the clock and device layers: \(found); take an EpochClock")
        // An exception nothing needs any more goes, so the list stays the truth.
        for (file, calls) in Self.timeExceptions where used[file] != calls {
            Issue.record("Sources/\(file) no longer calls \(calls.subtracting(used[file] ?? [])): remove the exception")
        }
    }

    @Test func theTimeRuleReadsCodeNotComments() {
        #expect(timeCalls("        try await Task.sleep(for: .seconds(1))").map(\.call) == ["Task.sleep"])
        #expect(
            timeCalls("    let deadline = ContinuousClock.now + .seconds(3)").map(\.call) == ["ContinuousClock.now"])
        #expect(
            timeCalls("    init(clock: some Clock<Duration> = ContinuousClock()) {").map(\.call) == [
                "ContinuousClock()"
            ])
        #expect(timeCalls("    /// Never `Task.sleep`: the clock's.").isEmpty)
        #expect(timeCalls("    clock.sleep(for: .seconds(1))  // not Task.sleep").isEmpty)
    }

    @Test func theImportRuleReadsEveryFormOfImport() {
        let file = [
            (
                "a.swift",
                """
                import A
                @testable import B
                @preconcurrency import C
                internal import D
                public import E
                import struct F.Thing
                #if canImport(G)
                    import G
                #endif
                let script = \"""
                    import notSwift
                    \"""
                // import Commented
                """
            )
        ]
        #expect(Set(imports(in: file).keys) == ["A", "B", "C", "D", "E", "F", "G"])
    }

    @Test func theTrackerLibraryImportsNoInputServerOrArgumentParser() throws {
        let imported = try imports(of: "Tracking")
        for module in ["GPSInput", "TrackServer", "ArgumentParser", "Hummingbird"] {
            #expect(imported[module] == nil, "Sources/Tracking imports \(module) in \(imported[module] ?? [])")
        }
    }
}

// MARK: - The endpoint's rooms, its web assets as files, one name per thing (issue 35)

extension LayeringTests {
    /// The endpoint's HTTP side speaks to a store through the protocol only: `TrackServer` neither
    /// declares nor imports a database client, `TrackStore` no HTTP, and the PostgreSQL store knows
    /// no HTTP either (a program that embeds a store builds no server, and the reverse).
    @Test func theHTTPTargetImportsNoStorageEngineAndTheStoresNoHTTP() throws {
        let targets = try packageTargets()
        let rules: [(target: String, forbidden: [String])] = [
            ("TrackServer", ["GRDB", "PostgresNIO", "TrackStorePostgres"]),
            ("TrackStore", ["Hummingbird", "HummingbirdCore", "HTTPTypes", "NIOHTTP1", "TrackServer", "PostgresNIO"]),
            ("TrackStorePostgres", ["Hummingbird", "HummingbirdCore", "HTTPTypes", "NIOHTTP1", "TrackServer", "GRDB"]),
        ]
        for (name, forbidden) in rules {
            let target = try #require(targets[name], "Package.swift has no target \(name)")
            let imported = imports(in: try sources(under: target.path))
            for module in forbidden {
                #expect(!target.dependencies.contains(module), "Package.swift gives \(name) the dependency \(module)")
                #expect(imported[module] == nil, "\(name) imports \(module) in \(imported[module] ?? [])")
            }
        }
    }

    /// Markup and scripts that only a page or a script holds, found in a string literal's text.
    static var markup: Regex<Substring> {
        /(?i)<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]|<script[\s>]|\bfunction\s*\(|addEventListener\s*\(|document\.(?:getElementById|querySelector)/
    }

    /// The lines of `text` that hold markup or script in a string literal (the lines of a multi-line
    /// literal all count), with their numbers; comments are not literals.
    func markupLiterals(_ text: String) -> [(line: Int, text: String)] {
        var out: [(Int, String)] = []
        var inMultiline = false
        for (number, line) in code(text) {
            let delimiters = line.ranges(of: "\"\"\"").count
            if inMultiline || delimiters > 0 {
                if line.contains(Self.markup) { out.append((number, String(line))) }
                if delimiters % 2 == 1 { inMultiline.toggle() }
                continue
            }
            for literal in line.matches(of: /"(?:[^"\\]|\\.)*"/) where literal.output.contains(Self.markup) {
                out.append((number, String(line)))
            }
        }
        return out
    }

    /// A page or a script is a file (`Sources/TrackServer/Resources/`, embedded at build time), read,
    /// diffed and linted as what it is: no Swift string in Sources holds HTML or JavaScript.
    @Test func noSwiftStringHoldsHTMLOrJavaScript() throws {
        let files = try sources(under: "Sources")
        #expect(files.count > 100, "the sources were not found")
        for (name, text) in files {
            for (line, found) in markupLiterals(text) {
                let found = found.trimmingCharacters(in: .whitespaces).prefix(100)
                Issue.record(
                    "\(name):\(line) holds a page or a script in a string: \(found) (make it a file of Resources)")
            }
        }
    }

    @Test func theMarkupRuleFindsPagesAndScriptsInLiteralsOnly() {
        // A page and a script as the map once had them, in Swift strings.
        #expect(
            markupLiterals("    let html = \"\"\"\n        <!DOCTYPE html>\n        <html lang=\"en\">\n        \"\"\"")
                .count == 2)
        #expect(
            markupLiterals(
                "    static let source = #\"\"\"\n        \"use strict\";\n        (function () {\n        \"\"\"#"
            ).count == 1)
        #expect(markupLiterals(#"    x = "<script src=\"/a.js\"></script>""#).count == 1)
        #expect(
            markupLiterals(#"    b.addEventListener("change", f) // not Swift, but a literal would hold it"#).isEmpty)
        #expect(markupLiterals(#"    s = "button.addEventListener(\"click\", go)""#).count == 1)
        // Comments, error messages and SVG are not pages.
        #expect(markupLiterals("    // In a <script> element: \"</\" would end it.").isEmpty)
        #expect(markupLiterals(#"    throw E("a document type declaration (<!DOCTYPE): refused")"#).isEmpty)
        #expect(markupLiterals(#"    svg += "<svg class=\"latest\"><circle r=\"4\"/></svg>""#).isEmpty)
    }

    /// The names a typealias may take without giving a type a second name: the associated types of the
    /// protocols the sources conform to (`AsyncSequence`, `Clock`, NIO's handlers, Hummingbird's
    /// middlewares and channels, postgres-nio's prepared statements, `Identifiable`).
    static let requirementNames: Set<String> = [
        "Element", "Failure", "Iterator", "AsyncIterator", "Instant", "Duration", "InboundIn", "InboundOut",
        "OutboundIn", "OutboundOut", "Context", "Value", "Row", "ID", "Index", "RawValue",
    ]

    /// Why `typealias name = target` keeps a second name for a type, or nil: it may witness a protocol's
    /// associated type (``requirementNames``), specialize a generic type (`X<Y>`), name a structural type
    /// (a tuple, a function, a composition), or bring a nested type into scope under its own name
    /// (`Action = Machine.Action`).
    func secondName(_ name: String, _ target: String) -> String? {
        if Self.requirementNames.contains(name) { return nil }
        let bare = target.replacing(/@\w+\s+/, with: "").trimmingCharacters(in: .whitespaces)
        if bare.contains("<") || bare.hasPrefix("(") || bare.contains("->") || bare.contains("&")
            || bare.hasPrefix("any ") || bare.hasPrefix("some ")
        {
            return nil
        }
        if bare.split(separator: ".").last.map(String.init) == name { return nil }
        return "typealias \(name) = \(bare) gives \(bare) a second name"
    }

    /// One name per thing: a grep for a type finds all its uses. A typealias kept for a former name
    /// (`WireFormatError = FormatsError`) is a second name; the rule is ``secondName(_:_:)``.
    @Test func noTypealiasKeepsAnOldName() throws {
        let declaration = /^\s*(?:(?:public|package|internal|fileprivate|private)\s+)?typealias\s+(\w+)\s*=\s*(.+?)\s*$/
        var found: [String] = []
        var aliases = 0
        for (name, text) in try sources(under: "Sources") {
            for (line, statement) in code(text) {
                guard let match = String(statement).firstMatch(of: declaration) else { continue }
                aliases += 1
                if let why = secondName(String(match.output.1), String(match.output.2)) {
                    found.append("\(name):\(line): \(why)")
                }
            }
        }
        #expect(aliases > 10, "the typealiases of Sources were not found")
        #expect(found.isEmpty, "name the type itself: \(found.joined(separator: "; "))")
    }

    @Test func theTypealiasRuleTellsAnOldNameFromAWitness() {
        #expect(secondName("WireFormatError", "FormatsError") != nil)
        #expect(secondName("Export", "TrailFile") != nil)
        #expect(secondName("Configuration", "LocationManagerConfiguration") != nil)
        #expect(secondName("Element", "SourceElement") == nil)
        #expect(secondName("Failure", "FormatsError") == nil)
        #expect(secondName("Progress", "ReplayProgress<NMEAStatistics>") == nil)
        #expect(secondName("Action", "GPSDConnectionStateMachine.Action") == nil)
        #expect(secondName("Part", "(key: String, line: Int, arguments: [String])") == nil)
        #expect(secondName("Encoder", "@Sendable (TrailRecord) -> Frame?") == nil)
    }
}
