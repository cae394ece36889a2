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
            serve.configuration(database: "x").corsOrigins == ["https://maps.example.org", "http://127.0.0.1:8080"])
        #expect(try Serve.parse([]).configuration(database: "x").corsOrigins.isEmpty)
        #expect(try Serve.parse(["--cors-origin", "*"]).configuration(database: "x").problem == nil)
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
}
