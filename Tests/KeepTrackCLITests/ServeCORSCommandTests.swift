import ConfigFile
import Foundation
import KeepTrackTesting
import Testing
import TrackServer

@testable import keeptrack

/// `serve --cors-origin`: repeatable, onto the server's settings; an origin a browser never sends
/// is refused with a sentence naming the flag.
@Suite("keeptrack serve --cors-origin")
struct ServeCORSCommandTests {
    @Test func takesEachOriginGiven() throws {
        let serve = try Serve.parse([
            "--cors-origin", "https://maps.example.org", "--cors-origin", "http://127.0.0.1:8080",
        ])
        #expect(
            serve.serverConfiguration().corsOrigins == ["https://maps.example.org", "http://127.0.0.1:8080"])
        #expect(try Serve.parse([]).serverConfiguration().corsOrigins.isEmpty)
        #expect(try Serve.parse(["--cors-origin", "*"]).serverConfiguration().problem == nil)
    }

    @Test(arguments: [
        (
            "https://maps.example.org/",
            "--cors-origin: 'https://maps.example.org/' must be scheme://host[:port], "
                + "without a path or a trailing slash."
        ),
        ("maps.example.org", "--cors-origin: 'maps.example.org' is not scheme://host[:port]."),
        ("://x", "--cors-origin: '://x' has no scheme (http:// or https://)."),
    ])
    func refusesAnOriginABrowserNeverSends(origin: String, sentence: String) {
        #expect { _ = try Serve.parse(["--cors-origin", origin]) } throws: { Serve.message(for: $0) == sentence }
    }

    /// The origins can live in serve's configuration file (a list), beside every other option;
    /// the command line wins; a key serve has no option for is refused with its line.
    @Test func readsTheOriginsFromServesConfigurationFile() throws {
        let dir = try TemporaryDirectory("keeptrack-serve-config").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/serve.yaml"
        try """
        port: 0
        token: s3cret
        cors-origin:
          - https://owntracks.example.org
          - http://127.0.0.1:8080
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let arguments = try ServeConfig.insertingFile(into: ["serve", "--config", file, "--port", "6000"])
        let serve = try Serve.parse(Array(arguments.dropFirst()))
        let c = serve.serverConfiguration()
        #expect(c.corsOrigins == ["https://owntracks.example.org", "http://127.0.0.1:8080"])
        #expect(c.port == 6000 && c.token == "s3cret")
        try "cors-origins: https://x.example\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect { _ = try ServeConfig.insertingFile(into: ["serve", "--config", file]) } throws: {
            "\($0)".contains("cors-origins") && "\($0)".contains("serve.yaml:1:")
        }
        // `serve devices` reads no file.
        #expect(try ServeConfig.insertingFile(into: ["serve", "devices", "list"]) == ["serve", "devices", "list"])
    }

    /// Every long option of serve is a key of its file, and every key an option.
    @Test func everyServeOptionIsAConfigurationKey() {
        let help = Serve.helpMessage(columns: 400)
        var names = Set<String>()
        // The options' lines, in every section (OPTIONS, LOGS...): `  --port <port>`, `  -h, --help`.
        for line in help.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix("-") {
            for word in line.split(separator: " ") where word.hasPrefix("--") {
                names.insert(String(word.dropFirst(2).prefix { $0.isLetter || $0.isNumber || $0 == "-" }))
            }
        }
        names.subtract(["help", "version", "config", ""])
        #expect(
            names == Set(ServeConfig.keys.keys), "options without a key: \(names.subtracting(ServeConfig.keys.keys))")
    }
}
