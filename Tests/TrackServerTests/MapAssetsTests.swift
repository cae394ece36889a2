import Foundation
import KeepTrackTesting
import Testing
import TrackServerTesting

/// The map's page, script and style are files (`Sources/TrackServer/Resources/`), linted as what they
/// are, compiled in and served as they are, with an `ETag` a browser revalidates with.
@Suite("TrackServer: the map's files")
struct MapAssetsTests {
    static let resources = packageRoot.appendingPathComponent("Sources/TrackServer/Resources")

    static func file(_ name: String) throws -> String {
        try String(contentsOf: resources.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func theScriptIsJavaScriptThatNodeAccepts() async throws {
        let path = Self.resources.appendingPathComponent("map.js").path
        let (status, output) = try await offThePool { try Self.run("/usr/bin/env", ["node", "--check", path]) }
        #expect(status == 0, "node --check map.js: \(output)")
    }

    @Test(arguments: ["map.html", "trails.html", "captive-portal.html"])
    func eachPageIsWellFormedHTML(name: String) throws {
        let problems = Self.htmlProblems(try Self.file(name))
        #expect(problems.isEmpty, "\(name): \(problems.joined(separator: "; "))")
    }

    @Test func theHTMLCheckFindsWhatIsWrong() {
        #expect(Self.htmlProblems("<p><b>x</p></b>").count >= 1)
        #expect(Self.htmlProblems("<div>x").count == 1)
        #expect(Self.htmlProblems("<p class=\"a>x</p>").count >= 1)
        #expect(Self.htmlProblems("a < b").count == 1)
        #expect(Self.htmlProblems("<!-- open").count == 1)
        #expect(Self.htmlProblems("<p>x<br><img src=\"a\"></p><script>if (a < b) {}</script>").isEmpty)
    }

    @Test func theStyleIsWellFormedCSS() throws {
        let problems = Self.cssProblems(try Self.file("map.css"))
        #expect(problems.isEmpty, "map.css: \(problems.joined(separator: "; "))")
        #expect(!Self.cssProblems("a{color:red").isEmpty)
        #expect(!Self.cssProblems("a{color red}").isEmpty)
        #expect(Self.cssProblems("/* x */ a,b{margin:0;padding:1px 2px}").isEmpty)
    }

    /// Every element the script looks up by id is on the page.
    @Test func everyElementTheScriptLooksUpIsOnThePage() throws {
        let script = try Self.file("map.js"), page = try Self.file("map.html")
        let ids = Set(page.matches(of: /\sid="([^"]+)"/).map { String($0.output.1) })
        let wanted = Set(script.matches(of: /getElementById\("([^"]+)"\)/).map { String($0.output.1) })
        #expect(wanted.count >= 5, "the script's lookups were not found")
        #expect(
            wanted.subtracting(ids).isEmpty, "map.js looks up ids map.html lacks: \(wanted.subtracting(ids).sorted())")
    }

    /// The script and the style are served as the files are, the page from its template (its parts
    /// and comments left out, its settings filled), each with an `ETag`: asked again with it, or
    /// with `*`, or weakly, they are 304 without a body; with another tag, the file.
    @Test func theFilesAreServedWithAValidatorAndRevalidatedWith304() async throws {
        let endpoint = try await Endpoint.start()
        for (path, file, type) in [
            ("/map/app.js", "map.js", "text/javascript; charset=utf-8"),
            ("/map/app.css", "map.css", "text/css; charset=utf-8"),
        ] {
            let first = try await fetch(endpoint, path, headers: [])
            let expected = try Self.file(file)
            #expect(status(first) == 200, "\(path)")
            #expect(header("Content-Type", first) == type, "\(path)")
            #expect(body(first) == expected, "\(path) is not Resources/\(file)")
            let etag = try #require(header("ETag", first), "\(path) has no ETag")
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count == 18, "\(path): \(etag)")
            for tags in [etag, "W/\(etag)", "\"other\", \(etag)", "*"] {
                let again = try await fetch(endpoint, path, headers: [("If-None-Match", tags)])
                #expect(status(again) == 304 && body(again).isEmpty, "\(path) with \(tags)")
                #expect(header("ETag", again) == etag, "\(path) with \(tags)")
            }
            #expect(status(try await fetch(endpoint, path, headers: [("If-None-Match", "\"other\"")])) == 200)
        }
        let page = try await fetch(endpoint, "/map", headers: [])
        #expect(status(page) == 200 && header("Cache-Control", page) == "no-cache")
        let html = body(page)
        #expect(html.hasPrefix("<!DOCTYPE html>\n<html lang=\"en\">"), "the page's comment is left out")
        #expect(!html.contains("<template") && !html.contains("{{") && !html.contains("no-leaflet"))
        #expect(html.contains("<script id=\"settings\" type=\"application/json\">{\"tiles\":"))
        let etag = try #require(header("ETag", page))
        #expect(status(try await fetch(endpoint, "/map", headers: [("If-None-Match", etag)])) == 304)
        await endpoint.stop()
    }

    /// Without Leaflet, the page says so (the template's part, its directory escaped).
    @Test func thePageSaysWhenLeafletIsMissing() async throws {
        let endpoint = try await Endpoint.start { $0.map.leafletDirectory = "/nonexistent/<leaflet>" }
        let html = body(try await fetch(endpoint, "/map", headers: []))
        #expect(
            html.contains(
                "<h1>keeptrack</h1><p id=\"no-leaflet\" role=\"alert\">Leaflet is not installed on the server "
                    + "(/nonexistent/&lt;leaflet&gt;)"))
        await endpoint.stop()
    }

    /// The speed chart's library is in the page when its directory holds dygraphs' script, and served
    /// from there under `/map/dygraphs/`; without it, the page has neither its script nor its style
    /// and its settings say so (the script then replays without a chart).
    @Test func thePageHasTheChartLibraryOnlyWhenItIsInstalled() async throws {
        let directory = try TemporaryDirectory()
        try Data("/* dygraphs */".utf8).write(to: URL(fileURLWithPath: directory.path + "/dygraph.min.js"))
        try Data("/* style */".utf8).write(to: URL(fileURLWithPath: directory.path + "/dygraph.min.css"))
        let with = try await Endpoint.start { $0.map.chartDirectory = directory.path }
        let html = body(try await fetch(with, "/map", headers: []))
        #expect(html.contains("<script src=\"/map/dygraphs/dygraph.min.js\"></script>"))
        #expect(html.contains("<link rel=\"stylesheet\" href=\"/map/dygraphs/dygraph.min.css\">"))
        #expect(html.contains("\"chart\":true}"))
        let script = try await fetch(with, "/map/dygraphs/dygraph.min.js", headers: [])
        #expect(status(script) == 200 && body(script) == "/* dygraphs */")
        #expect(status(try await fetch(with, "/map/dygraphs/..%2Fdygraph.min.js", headers: [])) == 404)
        await with.stop()
        let without = try await Endpoint.start { $0.map.chartDirectory = "/nonexistent" }
        let plain = body(try await fetch(without, "/map", headers: []))
        #expect(!plain.contains("dygraph") && plain.contains("\"chart\":false}"))
        await without.stop()
        directory.remove()
    }

    // MARK: - Helpers

    /// `GET path` with the test token and `headers`, over a fresh connection.
    func fetch(_ endpoint: Endpoint, _ path: String, headers: [(String, String)]) async throws -> String {
        try await exchange(
            endpoint,
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "Connection: close\r\n\r\n")
    }

    /// Runs a tool, its output and error together (blocking: call it off the cooperative pool).
    static func run(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// What is wrong with `html` as a page of ours, each problem with its line: every element but the
    /// void ones closed, in order; attributes quoted or plain; no bare `<`; comments closed; `script`
    /// and `style` read as raw text.
    static func htmlProblems(_ html: String) -> [String] {
        let text = Array(html.utf8)
        let void: Set = ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"]
        var open: [(name: String, line: Int)] = []
        var problems: [String] = []
        var i = 0
        func line(_ at: Int) -> Int { 1 + text[..<min(at, text.count)].filter { $0 == 10 }.count }
        func starts(_ s: String, at j: Int) -> Bool {
            let b = Array(s.utf8)
            return j + b.count <= text.count
                && String(decoding: text[j..<(j + b.count)], as: UTF8.self).lowercased() == s
        }
        func isNameByte(_ c: UInt8) -> Bool {
            (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c == 45
        }
        while i < text.count {
            guard text[i] == UInt8(ascii: "<") else {
                i += 1
                continue
            }
            if starts("<!--", at: i) {
                var end = i + 4
                while end < text.count, !starts("-->", at: end) { end += 1 }
                guard end < text.count else {
                    problems.append("line \(line(i)): a comment never closed")
                    break
                }
                i = end + 3
                continue
            }
            if starts("<!doctype", at: i) {
                i = (text[i...].firstIndex(of: UInt8(ascii: ">")) ?? text.count) + 1
                continue
            }
            let closing = i + 1 < text.count && text[i + 1] == UInt8(ascii: "/")
            var j = i + (closing ? 2 : 1)
            let nameStart = j
            while j < text.count, isNameByte(text[j]) { j += 1 }
            let name = String(decoding: text[nameStart..<j], as: UTF8.self).lowercased()
            guard !name.isEmpty, let first = name.utf8.first, first >= 97 && first <= 122 else {
                problems.append("line \(line(i)): a bare '<'")
                i += 1
                continue
            }
            if closing {
                while j < text.count, text[j] == 32 || text[j] == 10 { j += 1 }
                guard j < text.count, text[j] == UInt8(ascii: ">") else {
                    problems.append("line \(line(i)): </\(name) not closed by '>'")
                    break
                }
                if let top = open.last, top.name == name {
                    open.removeLast()
                } else {
                    problems.append(
                        "line \(line(i)): </\(name)> closes \(open.last.map { "<\($0.name)> of line \($0.line)" } ?? "nothing")"
                    )
                }
                i = j + 1
                continue
            }
            // Attributes: NAME, NAME=plain, NAME="...", NAME='...'; then '>' or '/>'.
            var closed = false
            while j < text.count {
                let c = text[j]
                if c == 32 || c == 10 || c == 9 {
                    j += 1
                } else if c == UInt8(ascii: ">") {
                    closed = true
                    j += 1
                    break
                } else if c == UInt8(ascii: "/"), j + 1 < text.count, text[j + 1] == UInt8(ascii: ">") {
                    closed = true
                    j += 2
                    break
                } else if isNameByte(c) {
                    while j < text.count, isNameByte(text[j]) { j += 1 }
                    guard j < text.count, text[j] == UInt8(ascii: "=") else { continue }
                    j += 1
                    if j < text.count, text[j] == 34 || text[j] == 39 {
                        let quote = text[j]
                        guard let end = text[(j + 1)...].firstIndex(of: quote),
                            !text[(j + 1)..<end].contains(UInt8(ascii: "<"))
                        else {
                            problems.append("line \(line(j)): an attribute of <\(name)> never closed")
                            return problems
                        }
                        j = end + 1
                    } else {
                        while j < text.count, ![32, 10, 9, UInt8(ascii: ">")].contains(text[j]) { j += 1 }
                    }
                } else {
                    problems.append("line \(line(j)): '\(Character(UnicodeScalar(c)))' in the tag <\(name)>")
                    return problems
                }
            }
            guard closed else {
                problems.append("line \(line(i)): <\(name) never closed by '>'")
                break
            }
            if name == "script" || name == "style" {
                var k = j
                while k < text.count, !starts("</\(name)", at: k) { k += 1 }
                guard k < text.count else {
                    problems.append("line \(line(i)): <\(name)> never closed")
                    break
                }
                j = k
                open.append((name, line(i)))
            } else if !void.contains(name) {
                open.append((name, line(i)))
            }
            i = j
        }
        for element in open.reversed() { problems.append("line \(element.line): <\(element.name)> never closed") }
        return problems
    }

    /// What is wrong with `css` as a style sheet of ours: rules `SELECTORS{NAME:VALUE;...}`, braces
    /// balanced and not nested, each declaration a property name and a value.
    static func cssProblems(_ css: String) -> [String] {
        let plain = css.replacing(/\/\*[\s\S]*?\*\//, with: "")
        var problems: [String] = []
        var rest = Substring(plain)
        while let open = rest.firstIndex(of: "{") {
            let selector = rest[..<open].trimmingCharacters(in: .whitespacesAndNewlines)
            if selector.isEmpty || selector.contains("}") {
                problems.append("a rule without a selector near '\(selector)'")
            }
            guard let close = rest[open...].firstIndex(of: "}") else {
                problems.append("'\(selector)' is never closed")
                return problems
            }
            let block = rest[rest.index(after: open)..<close]
            if block.contains("{") { problems.append("'\(selector)' holds a '{'") }
            for declaration in block.split(separator: ";") where !declaration.allSatisfy(\.isWhitespace) {
                let parts = declaration.split(separator: ":", maxSplits: 1)
                let name = parts.first.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
                if parts.count != 2 || name.wholeMatch(of: /-?[a-z][a-z-]*/) == nil
                    || parts[1].allSatisfy(\.isWhitespace)
                {
                    problems.append(
                        "'\(selector)': '\(declaration.trimmingCharacters(in: .whitespacesAndNewlines))' is not NAME:VALUE"
                    )
                }
            }
            rest = rest[rest.index(after: close)...]
        }
        if !rest.allSatisfy(\.isWhitespace) { problems.append("text after the last rule: '\(rest.prefix(40))'") }
        return problems
    }
}
