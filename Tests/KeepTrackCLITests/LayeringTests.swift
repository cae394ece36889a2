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

    /// Issue 26: time is a parameter. Everything that waits sleeps on an injected `Clock` (so a test
    /// on a manual clock waits for nothing); the only real sleeps are a clock's own (the wall
    /// clock's) and the sources' waits for their devices. Test support (KeepTrackTesting) is free.
    @Test func nothingSleepsOutsideAClockOrASourcesDeviceWait() throws {
        let allowed: Set<String> = [
            "Geo/WallClock.swift",  // the wall clock's own sleep
            "GPSInput/NMEALogSource.swift",  // a silent pipe polled for input
            "GPSInput/SourceIterator.swift",  // a reading thread given time to exit
        ]
        let root = packageRoot.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.subpaths(atPath: root.path)).filter {
            $0.hasSuffix(".swift") && !$0.hasPrefix("KeepTrackTesting/")
        }
        #expect(files.count > 100, "the sources were not found under \(root.path)")
        var found: [String] = []
        for file in files.sorted() where !allowed.contains(file) {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                for call in ["Task.sleep", "Thread.sleep", "usleep(", "nanosleep("] where code.contains(call) {
                    found.append("Sources/\(file):\(i + 1): \(call)")
                }
            }
        }
        #expect(found.isEmpty, "real sleeps outside a clock: \(found); sleep on the part's injected clock instead")
    }

    @Test func theTrackerLibraryImportsNoInputServerOrArgumentParser() throws {
        let imported = try imports(of: "Tracking")
        for module in ["GPSInput", "TrackServer", "ArgumentParser", "Hummingbird"] {
            #expect(imported[module] == nil, "Sources/Tracking imports \(module) in \(imported[module] ?? [])")
        }
    }
}
