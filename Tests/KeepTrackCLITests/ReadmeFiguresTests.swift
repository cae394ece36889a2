import Foundation
import KeepTrackTesting
import Testing

/// Docs that don't go stale (issue 14, item 8): every block of measured figures in the README and the
/// manual (`docs/*.md`, where the benchmarks' figures live: docs/performance.md) is marked with the
/// tool that prints it, `<!-- figures: tools/NAME ARGS -->` on the line before, and that tool prints
/// the block's first line (its literal text, numbers aside). A table or output block with figures and
/// no marker fails, so a hand-typed table cannot join the manual unnoticed.
@Suite("README and manual figures")
struct ReadmeFiguresTests {
    struct Block {
        var line: Int
        var first: String
        var body: [String]
        var marker: String?
    }

    /// The README and every page of the manual, by path from the package root.
    func pages() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    func text(_ page: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(page), encoding: .utf8)
    }

    /// Tables and fenced blocks of a page, with the figures marker before each, if any.
    func blocks(_ page: String) throws -> [Block] {
        let lines = try text(page).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [Block] = []
        var i = 0
        func marker(before index: Int) -> String? {
            var j = index - 1
            while j >= 0 && lines[j].isEmpty { j -= 1 }
            guard j >= 0, lines[j].hasPrefix("<!-- figures: "), lines[j].hasSuffix(" -->") else { return nil }
            return String(lines[j].dropFirst("<!-- figures: ".count).dropLast(" -->".count))
        }
        while i < lines.count {
            if lines[i].hasPrefix("|"), i + 1 < lines.count, lines[i + 1].hasPrefix("|---") {
                var j = i + 2
                while j < lines.count && lines[j].hasPrefix("|") { j += 1 }
                blocks.append(
                    Block(line: i + 1, first: lines[i], body: Array(lines[(i + 2)..<j]), marker: marker(before: i)))
                i = j
            } else if lines[i].hasPrefix("```") {
                var j = i + 1
                while j < lines.count && !lines[j].hasPrefix("```") { j += 1 }
                let body = Array(lines[(i + 1)..<min(j, lines.count)])
                if lines[i] == "```" {  // a shell snippet is ```sh
                    blocks.append(Block(line: i + 2, first: body.first ?? "", body: body, marker: marker(before: i)))
                }
                i = j + 1
            } else {
                i += 1
            }
        }
        return blocks
    }

    /// Whether a block reports measurements: a right-aligned (numeric) table column, or lines with
    /// rates, durations, sizes or CPU figures.
    func hasFigures(_ block: Block, separator: String?) -> Bool {
        if block.first.hasPrefix("|") { return separator?.contains("---:") ?? false }
        if block.first.hasPrefix("$ ") { return false }  // a command's output shown as an example
        let figure = #/\d[\d,.]*\s*(?:ms|s|MB|/s|CPU-s/h|CPU-s|records/s|%)(?:\b|\s|$|,|\))/#
        return block.body.filter { $0.contains(figure) }.count >= 2
    }

    /// The longest run of the line's literal text between numbers and printed values (a Python
    /// dict's braces and quotes): what a format string holds verbatim.
    func literal(_ line: String) -> String {
        let parts = line.split(whereSeparator: { $0.isNumber || "{}'\"".contains($0) }).map { String($0) }
        return parts.max(by: { $0.count < $1.count })?.trimmingCharacters(in: CharacterSet(charactersIn: " ,.():"))
            ?? ""
    }

    /// A tool's source with string literals continued on the next line joined, as printed:
    /// `"a, "` + newline + `f"b"` (Python) or `"a "` + newline + `+ "b"` (Swift) read `a, b`.
    func printedText(_ source: String) -> String {
        source.replacing(#/"\s*\+?\s*\n\s*\+?\s*f?"/#, with: "")
    }

    @Test func everyBlockOfFiguresNamesTheToolThatPrintsIt() throws {
        var marked = 0
        for page in try pages() {
            marked += try checkFigures(page)
        }
        #expect(marked >= 8)
        // The benchmarks' figures live in docs/performance.md.
        #expect(try blocks("docs/performance.md").filter { $0.marker != nil }.count >= 8)
    }

    /// Checks every block of figures of a page; returns how many carry a marker.
    func checkFigures(_ page: String) throws -> Int {
        let lines = try text(page).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var marked = 0
        for block in try blocks(page) {
            let separator = block.first.hasPrefix("|") ? lines[block.line] : nil
            guard let marker = block.marker else {
                #expect(
                    !hasFigures(block, separator: separator),
                    "\(page) line \(block.line): figures without a `<!-- figures: TOOL ... -->` line before them: \(block.first)"
                )
                continue
            }
            marked += 1
            let tool = String(marker.split(separator: " ").first ?? "")
            let source = packageRoot.appendingPathComponent(tool)
            let printed = (try? String(contentsOf: source, encoding: .utf8)).map(printedText)
            #expect(
                printed != nil,
                "\(page) line \(block.line): the figures marker names \(tool), which is not in the package")
            let expected = literal(block.first)
            #expect(
                expected.count >= 10, "\(page) line \(block.line): the block's first line has too little text to check")
            #expect(
                printed?.contains(expected) ?? false,
                "\(page) line \(block.line): \(tool) does not print \"\(expected)\" (the block's first line)")
        }
        return marked
    }

    @Test func theCheckCatchesAnUnmarkedTableAndATextTheToolDoesNotPrint() {
        let table = Block(line: 1, first: "| run | MB/s |", body: ["| a | 407 |"], marker: nil)
        #expect(hasFigures(table, separator: "|---|---:|"))
        #expect(
            !hasFigures(
                Block(line: 1, first: "| option | default |", body: ["| `--x` | 5 |"], marker: nil),
                separator: "|---|---|"))
        let output = Block(
            line: 1, first: "soak: 30.9 min", body: ["CPU 1.94 s = 3.76 CPU-s/hour", "RSS 33.8 MB"], marker: nil)
        #expect(hasFigures(output, separator: nil))
        #expect(literal("1,000,000 locations, JSON batches of 1000, durable") == "locations, JSON batches of")
        #expect(
            literal("crash-test (seed 2026, 201 s): 120 SIGKILLs of the uploader, 16 endpoint kills, phases {'a': 1}")
                == "SIGKILLs of the uploader")
        #expect(
            printedText("print(f\"to a private mosquitto, \"\n          f\"serve --mqtt subscribed:\")")
                == "print(f\"to a private mosquitto, serve --mqtt subscribed:\")")
    }
}
