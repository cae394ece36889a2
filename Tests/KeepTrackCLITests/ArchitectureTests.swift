import Foundation
import KeepTrackTesting
import Testing

/// docs/ARCHITECTURE.md's module table is the map a newcomer reads first: every target of
/// Package.swift but the test targets has a row (its first cell names it in backticks; one row may
/// name several), and the row's last cell, "imports", names exactly the package's own targets it
/// depends on. The truth is `swift package dump-package` (the manifest as SwiftPM evaluates it, the
/// targets appended after the first list included).
@Suite("docs/ARCHITECTURE.md against Package.swift", .offThePool)
struct ArchitectureTests {
    /// Every non-test target and the package targets it depends on, from `swift package dump-package`.
    func targets() throws -> [String: (type: String, dependencies: Set<String>)] {
        // Its own scratch path: the one of the `swift test` running this is locked. KEEPTRACK_FUZZ:
        // the fuzz targets are targets only when building for fuzzing, and have their rows too.
        let scratch = try TemporaryDirectory("keeptrack-dump-package")
        defer { scratch.remove() }
        let (status, output) = try run(
            "/usr/bin/env", ["KEEPTRACK_FUZZ=1", "swift", "package", "--scratch-path", scratch.path, "dump-package"])
        #expect(status == 0, "swift package dump-package failed")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let list = try #require(json["targets"] as? [[String: Any]])
        let names = Set(list.compactMap { $0["name"] as? String })
        var out: [String: (String, Set<String>)] = [:]
        for target in list {
            guard let name = target["name"] as? String, let type = target["type"] as? String, type != "test" else {
                continue
            }
            var dependencies: Set<String> = []
            for dependency in (target["dependencies"] as? [[String: Any]]) ?? [] {
                // {"byName": [NAME, condition]} or {"target": [NAME, condition]}; products are other packages'.
                for key in ["byName", "target"] {
                    if let first = (dependency[key] as? [Any])?.first as? String, names.contains(first) {
                        dependencies.insert(first)
                    }
                }
            }
            out[name] = (type, dependencies)
        }
        return out
    }

    /// The module table's rows: each target a row's first cell names, with the row's last cell.
    func rows() throws -> [String: String] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try #require(
            lines.firstIndex(of: "| target | what it is | imports |"),
            "docs/ARCHITECTURE.md has no table headed | target | what it is | imports |")
        var out: [String: String] = [:]
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            guard cells.count >= 4 else { continue }
            for match in cells[1].matches(of: #/`([^`]+)`/#) {
                out[String(match.output.1)] = String(cells[cells.count - 2])
            }
        }
        return out
    }

    /// Whether `name` appears in `text` as a whole word (`Geo` is not in `GeoJSON`).
    func mentions(_ text: String, _ name: String) -> Bool {
        var rest = Substring(text)
        while let range = rest.range(of: name) {
            let before = range.lowerBound == rest.startIndex ? nil : rest[rest.index(before: range.lowerBound)]
            let after = range.upperBound == rest.endIndex ? nil : rest[range.upperBound]
            let isWordCharacter = { (c: Character?) in
                c.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } ?? false
            }
            if !isWordCharacter(before) && !isWordCharacter(after) { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }

    @Test func everyTargetHasItsRowWithExactlyItsDependencies() throws {
        let targets = try targets()
        let rows = try rows()
        #expect(targets.count >= 30)
        var problems: [String] = []
        for (name, target) in targets.sorted(by: { $0.key < $1.key }) {
            guard let imports = rows[name] else {
                problems.append("\(name) (\(target.type)) has no row: add one to the module table")
                continue
            }
            for dependency in target.dependencies.sorted() where !mentions(imports, dependency) {
                problems.append("\(name)'s row does not name \(dependency), which Package.swift gives it")
            }
            for other in targets.keys.sorted() where !target.dependencies.contains(other) && mentions(imports, other) {
                problems.append("\(name)'s row names \(other), which is not among its dependencies in Package.swift")
            }
        }
        for name in rows.keys.sorted() where targets[name] == nil {
            problems.append("the module table has a row for \(name), which is not a target of Package.swift")
        }
        #expect(
            problems.isEmpty,
            "docs/ARCHITECTURE.md's module table and Package.swift differ:\n\(problems.joined(separator: "\n"))")
    }

    @Test func aNameIsAWholeWord() {
        #expect(mentions("Geo, NMEA (its file reader)", "Geo"))
        #expect(!mentions("GeoJSON", "Geo"))
        #expect(!mentions("TrackServerTesting", "TrackServer"))
        #expect(!mentions("embed-tracker", "Tracker"))
    }
}
