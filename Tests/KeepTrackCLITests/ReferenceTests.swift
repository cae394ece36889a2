import Foundation
import KeepTrackTesting
import Testing

/// The manual in step with the code: docs/reference.md is what `tools/gen-reference.py` makes of the
/// option definitions (`keeptrack --experimental-dump-help`), no option states its default twice in
/// `--help`, and every link of the README and of docs/ leads to a file and a heading that exist.
@Suite("Option reference and manual links", .offThePool)
struct ReferenceTests {
    @Test func theOptionReferenceIsWhatTheOptionDefinitionsMake() throws {
        let binary = productsDirectory.appendingPathComponent("keeptrack").path
        let (status, generated) = try run(
            "/usr/bin/python3",
            [
                packageRoot.appendingPathComponent("tools/gen-reference.py").path, "--binary", binary,
                "--output", "-",
            ])
        #expect(status == 0, "tools/gen-reference.py failed")
        let committed = try String(contentsOf: packageRoot.appendingPathComponent("docs/reference.md"), encoding: .utf8)
        let difference = firstDifference(committed, generated)
        let update = "run tools/gen-reference.py to update it"
        #expect(
            difference == nil,
            "docs/reference.md differs from the option definitions (\(difference ?? "")): \(update)"
        )
    }

    /// The first line where two texts differ, as "line N: 'committed' vs 'generated'".
    func firstDifference(_ a: String, _ b: String) -> String? {
        let left = a.split(separator: "\n", omittingEmptySubsequences: false)
        let right = b.split(separator: "\n", omittingEmptySubsequences: false)
        for i in 0..<max(left.count, right.count) {
            let l = i < left.count ? String(left[i]) : "(end)"
            let r = i < right.count ? String(right[i]) : "(end)"
            if l != r { return "line \(i + 1): '\(l)' in the file, '\(r)' generated" }
        }
        return nil
    }

    @Test func noOptionStatesItsDefaultTwice() throws {
        let dump = try keeptrack(["--experimental-dump-help"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var twice: [String] = []
        var options = 0
        func walk(_ command: [String: Any], _ path: String) {
            for argument in (command["arguments"] as? [[String: Any]]) ?? [] {
                options += 1
                let abstract = argument["abstract"] as? String ?? ""
                // argument-parser appends "(default: X)" itself when the option has a default value.
                if argument["defaultValue"] != nil, abstract.contains("The default is") || abstract.contains("Default:")
                {
                    twice.append("\(path) --\(argument["valueName"] as? String ?? "?"): \(abstract)")
                }
            }
            for sub in (command["subcommands"] as? [[String: Any]]) ?? [] {
                walk(sub, path + " " + (sub["commandName"] as? String ?? "?"))
            }
        }
        walk(try #require(json["command"] as? [String: Any]), "keeptrack")
        #expect(options > 100)
        #expect(twice.isEmpty, "options whose help states the default argument-parser shows: \(twice)")
    }

    @Test func everyLinkOfTheManualLeadsToAFileAndAHeading() throws {
        let docs = try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("docs").path)
        let pages = ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        #expect(pages.count >= 20)
        var broken: [String] = []
        for page in pages {
            let text = try String(contentsOf: packageRoot.appendingPathComponent(page), encoding: .utf8)
            let directory = (page as NSString).deletingLastPathComponent
            for match in withoutCode(text).matches(of: #/\]\(([^)\s]+)\)/#) {
                let target = String(match.output.1)
                if target.hasPrefix("http://") || target.hasPrefix("https://") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let path = parts[0].isEmpty ? page : normalized(directory, String(parts[0]))
                guard FileManager.default.fileExists(atPath: packageRoot.appendingPathComponent(path).path) else {
                    broken.append("\(page): \(target) (no file \(path))")
                    continue
                }
                if parts.count == 2, path.hasSuffix(".md") {
                    let linked = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
                    if !anchors(linked).contains(String(parts[1])) {
                        broken.append("\(page): \(target) (no heading #\(parts[1]) in \(path))")
                    }
                }
            }
        }
        #expect(broken.isEmpty, "broken links: \(broken)")
    }

    /// A page without its fenced code blocks (their brackets are not links).
    func withoutCode(_ text: String) -> String {
        var out: [Substring] = []
        var fenced = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle(); continue }
            if !fenced { out.append(line) }
        }
        return out.joined(separator: "\n")
    }

    /// `docs` + `../README.md` → `README.md`.
    func normalized(_ directory: String, _ path: String) -> String {
        var parts = directory.split(separator: "/").map(String.init)
        for part in path.split(separator: "/").map(String.init) {
            if part == ".." { _ = parts.popLast() } else if part != "." { parts.append(part) }
        }
        return parts.joined(separator: "/")
    }

    /// The anchors GitHub gives a page's headings: lowercased, punctuation dropped, spaces as hyphens.
    func anchors(_ text: String) -> Set<String> {
        var out: Set<String> = []
        for line in withoutCode(text).split(separator: "\n") where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let kept = title.filter { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == " " }
            out.insert(String(kept.map { $0 == " " ? "-" : $0 }))
        }
        return out
    }

    @Test func theAnchorsAreGitHubs() {
        #expect(
            anchors("## On PostgreSQL + PostGIS: a fleet, several instances, one database\n")
                == ["on-postgresql--postgis-a-fleet-several-instances-one-database"])
        #expect(anchors("## `keeptrack decode`\n") == ["keeptrack-decode"])
        #expect(normalized("docs", "../README.md") == "README.md")
    }
}
