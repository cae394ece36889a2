import Foundation
import KeepTrackTesting
import Testing

/// The module rules of docs/ARCHITECTURE.md, checked on the sources: the command line stays a thin
/// layer of options over the libraries, and the tracker library stays embeddable.
@Suite("Layering")
struct LayeringTests {
    func sources(of target: String) throws -> [(name: String, text: String)] {
        let dir = packageRoot.appendingPathComponent("Sources/\(target)")
        return try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") }.sorted()
            .map { ($0, try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8)) }
    }

    func imports(of target: String) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for (name, text) in try sources(of: target) {
            for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.hasPrefix("@testable import ") {
                out[String(line.split(separator: " ").last!), default: []].append(name)
            }
        }
        return out
    }

    /// Issue 12: options, commands and their wiring only; whatever a program embedding a
    /// tracker would need lives in a library.
    @Test func theCommandLineIsUnder1500LinesAndImportsNoServerOrStorageModule() throws {
        let lines = try sources(of: "keeptrack").reduce(0) { $0 + $1.text.split(separator: "\n", omittingEmptySubsequences: false).count - 1 }
        #expect(lines < 1500, "Sources/keeptrack has \(lines) lines: move logic into a library target")
        let imported = try imports(of: "keeptrack")
        for module in ["GRDB", "AsyncHTTPClient", "Hummingbird", "HummingbirdCore", "NIO", "NIOCore", "NIOPosix", "NIOHTTP1"] {
            #expect(imported[module] == nil, "Sources/keeptrack imports \(module) in \(imported[module] ?? [])")
        }
    }

    @Test func theTrackerLibraryImportsNoInputServerOrArgumentParser() throws {
        let imported = try imports(of: "Tracking")
        for module in ["GPSInput", "TrackServer", "ArgumentParser", "Hummingbird"] {
            #expect(imported[module] == nil, "Sources/Tracking imports \(module) in \(imported[module] ?? [])")
        }
    }
}
