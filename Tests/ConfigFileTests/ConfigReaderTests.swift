import ConfigFile
import Foundation
import Geo
import Testing

@Suite("config reader")
struct ConfigReaderTests {
    let reader = ConfigReader(schema: [
        "serial": .option, "gpsd": .optionalValue(fallback: "localhost:2947"), "all": .flag, "header": .list,
        "distance-filter": .option,
    ])

    func problem(_ text: String) -> ConfigFileError? {
        problem(Array(text.utf8))
    }

    func problem(_ bytes: [UInt8]) -> ConfigFileError? {
        do throws(ConfigFileError) {
            _ = try reader.parse(bytes, name: "c.yaml")
            return nil
        } catch {
            return error
        }
    }

    /// `track --gpsd` means `--gpsd localhost:2947`, on the command line as in the file.
    @Test func anOptionalValueGetsItsFallbackWhereItIsOmitted() {
        #expect(reader.insertingFallbacks(into: ["track", "--gpsd"]) == ["track", "--gpsd", "localhost:2947"])
        #expect(
            reader.insertingFallbacks(into: ["track", "--gpsd", "--all"]) == [
                "track", "--gpsd", "localhost:2947", "--all",
            ])
        #expect(
            reader.insertingFallbacks(into: ["track", "--gpsd", "h:1", "--all"]) == ["track", "--gpsd", "h:1", "--all"])
        #expect(
            reader.insertingFallbacks(into: ["track", "--serial", "--gpsd", "x"]) == [
                "track", "--serial", "--gpsd", "x",
            ])
    }

    /// A file's settings as the arguments they stand for.
    @Test func settingsBecomeArgumentsAndListsRepeatTheOption() throws {
        let settings = try reader.parse(
            Array("gpsd:\nall: false\nheader: [\"A: 1\", \"B: 2\"]\ndistance-filter: 5\n".utf8), name: "c.yaml")
        let arguments = settings.map(OptionArguments.init)
        #expect(
            arguments.map(\.arguments) == [
                ["--gpsd", "localhost:2947"], [], ["--header", "A: 1", "--header", "B: 2"],
                ["--distance-filter", "5"],
            ])
        #expect(arguments[2].items.map(\.line) == [3, 3])
    }

    /// A single value the command line gives replaces the file's, which is not read in; a list
    /// adds to the file's. A refused command line is put on the setting of the file that explains it.
    @Test func theCommandLinesValuesReplaceTheFilesAndARefusalIsPutOnItsSetting() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("c-\(UUID()).yaml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "distance-filter: ten\nheader: [\"A: 1\"]\nall: true\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        let file = try #require(
            try reader.readingIn(
                ["track", "--config", path, "--distance-filter=5", "--header", "B: 2"], at: 1, option: "--config",
                defaultPath: "/nonexistent", exists: { _ in false }))
        #expect(
            file.arguments == ["track", "--header", "A: 1", "--all", "--distance-filter=5", "--header", "B: 2"])
        // Without the command line's value, the file's refused one is named by its line.
        let alone = try #require(
            try reader.readingIn(["track"], at: 1, option: "--config", defaultPath: path, exists: { _ in true }))
        let refusesTen: ([String]) -> String? = { $0.contains("ten") ? "not a number: ten" : nil }
        let located = try #require(alone.locate(parse: refusesTen))
        #expect(located.line == 1 && "\(located)" == "\(path):1: distance-filter: not a number: ten")
        // A problem no setting of the file explains is the command line's own: not located.
        #expect(alone.locate(parse: { $0.contains("--all") ? nil : "refused" }) == nil)
        #expect(alone.locate(parse: { _ in "always refused" }) == nil)
    }

    @Test func readsEveryKindOfValue() throws {
        let settings = try reader.parse(
            Array(
                """
                serial: /dev/ttyACM0
                gpsd:
                all: true
                header:
                  - "X-Team: blue"
                  - 'X-Van: 7'
                """.utf8), name: "c.yaml")
        #expect(
            settings == [
                ConfigSetting(key: "serial", line: 1, value: .option("/dev/ttyACM0")),
                ConfigSetting(key: "gpsd", line: 2, value: .option("localhost:2947")),
                ConfigSetting(key: "all", line: 3, value: .flag(true)),
                ConfigSetting(
                    key: "header", line: 4,
                    value: .list([
                        .init(value: "X-Team: blue", line: 5),
                        .init(value: "X-Van: 7", line: 6),
                    ])),
            ])
    }

    /// A 358-byte "billion laughs" with aliases as keys: Yams hashes a key whole, 9^8 strings
    /// for `*h` (minutes before this reader refused it first).
    static let aliasBomb = """
        # billion laughs, keys: *h
        a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
        b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
        c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
        d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
        e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
        f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
        g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
        h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
        ? *h
        : x
        ? [*h, *h]
        : y

        """

    @Test func refusesTheBillionLaughsWithAliasesAsKeysAtOnce() throws {
        #expect(Self.aliasBomb.utf8.count == 358)
        var statistics = ConfigStatistics()
        #expect(throws: ConfigFileError.self) {
            _ = try reader.parse(Array(Self.aliasBomb.utf8), name: "bomb.yaml", statistics: &statistics)
        }
        let p = try #require(problem(Self.aliasBomb))
        #expect(p.code == .tooComplex)
        #expect(p.line == 7)
        #expect(
            p.description
                == "c.yaml:7: the document stands for more than 100000 values once its aliases (*name) are expanded: refused (an alias bomb?)"
        )
        // Refused after reading a few dozen events: no expansion was ever built.
        #expect(statistics.events < 100)
    }

    @Test func refusesAliasesOfListsAsKeysEvenWhenSmall() throws {
        let p = try #require(problem("a: &a [1, 2]\n*a : x\n"))
        #expect(p.code == .badKey)
        #expect(p.line == 2)
        #expect(p.message.contains("a key must be a plain name"))
        let q = try #require(problem("? [1, 2]\n: x\n"))
        #expect(q.code == .badKey)
        #expect(q.line == 1)
    }

    @Test(arguments: [33, 40, 999, 100_000])
    func refusesDeepNesting(depth: Int) throws {
        let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        let p = try #require(problem("serial: " + deep))
        #expect(p.code == .tooComplex)
        #expect(p.message == "lists and mappings nested too deeply (more than 32 levels)")
    }

    @Test func refusesAFileOverTheSizeLimit() throws {
        let big = "serial: \"" + String(repeating: "x", count: 1 << 20) + "\"\n"
        let p = try #require(problem(big))
        #expect(p.code == .tooLarge)
        #expect(p.line == nil)
    }

    @Test(
        arguments: [
            ([0x73, 0x3A, 0x20, 0x00, 0x01], 1, "byte 0x00 at byte 3"),
            (Array("serial: a\nall: true\n\u{7F}".utf8), 3, "byte 0x7F at byte 20"),
            ([0x61, 0x3A, 0x0A, 0xC3, 0x28], 2, "byte 0xC3 (not UTF-8) at byte 3"),
            ([0xFF, 0xFE, 0x41, 0x00], 1, "byte 0xFF (not UTF-8) at byte 0"),
        ] as [([UInt8], Int, String)])
    func saysBinaryIsNotYAMLNamingTheByteAndLine(bytes: [UInt8], line: Int, what: String) throws {
        let p = try #require(problem(bytes))
        #expect(p.code == .notYAML)
        #expect(p.line == line)
        #expect(p.message == "not YAML (a binary file?): \(what) is not text")
    }

    @Test func randomBinaryIsNotYAMLRatherThanAKeySetTwice() throws {
        var generator = SeededRandom(seed: 11)
        for _ in 0..<200 {
            let bytes = (0..<512).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let p = try #require(problem(bytes))
            #expect(p.code == .notYAML)
            #expect(p.message.hasPrefix("not YAML"))
            #expect(p.line != nil)
        }
    }

    @Test func findsAKeySetTwiceWithItsLine() throws {
        let p = try #require(problem("serial: a\nall: true\nserial: b\n"))
        #expect(p.code == .duplicateKey)
        #expect(p.line == 3)
        #expect(p.message == "'serial' is set twice")
    }

    /// 20,000 and 40,000 list items: the work counted grows in proportion (a quadratic reader
    /// would do four times the work for twice the items).
    @Test func checksLongListsInLinearWork() throws {
        func statistics(_ n: Int) throws -> ConfigStatistics {
            var text = "serial: /dev/ttyACM0\nheader:\n"
            for i in 0..<n { text += "  - \"X-Item-\(i): \(i)\"\n" }
            var statistics = ConfigStatistics()
            let settings = try reader.parse(Array(text.utf8), name: "c.yaml", statistics: &statistics)
            guard case .list(let items) = settings.last?.value else { throw Unexpected() }
            #expect(items.count == n)
            #expect(items.last?.line == n + 2)
            return statistics
        }
        let small = try statistics(20_000)
        let large = try statistics(40_000)
        #expect(small.events <= 20_000 + 20)
        #expect(small.values <= 20_000 + 2)
        #expect(large.events <= 2 * small.events)
        #expect(large.values <= 2 * small.values)
        #expect(large.expandedNodes <= 2 * small.expandedNodes)
    }

    @Test func writesWhatItReadsBack() throws {
        let settings: [ConfigSetting] = [
            .init(key: "serial", line: 1, value: .option("yes")),
            .init(key: "distance-filter", line: 2, value: .option("10.0")),
            .init(key: "all", line: 3, value: .flag(false)),
            .init(key: "header", line: 4, value: .list([.init(value: "X-A: \"quoted\" \u{1}", line: 5)])),
        ]
        let again = try reader.parse(Array(ConfigReader.yaml(settings).utf8), name: "c.yaml")
        #expect(again.map(\.key) == settings.map(\.key))
        #expect(again[0].value == .option("yes"))
        #expect(again[1].value == .option("10.0"))
        #expect(again[2].value == .flag(false))
        guard case .list(let items) = again[3].value else { throw Unexpected() }
        #expect(items.map(\.value) == ["X-A: \"quoted\" \u{1}"])
    }
}

struct Unexpected: Error {}
