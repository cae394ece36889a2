import Testing
import TrackServer

/// An origin `serve` can't answer for is a typed problem naming the setting and the origin.
@Suite struct CORSOriginProblemTests {
    @Test(arguments: [
        ("maps.example.org", TrackServerError.Code.corsOriginNotAnOrigin),
        ("://maps.example.org", .corsOriginWithoutScheme),
        ("https://maps.example.org/", .corsOriginWithPath),
    ])
    func anOriginThatIsNoneHasACodeAndNamesItself(origin: String, code: TrackServerError.Code) throws {
        let problem = try #require(TrackServer.Configuration.corsOriginProblem(origin))
        #expect(problem.code == code)
        #expect(problem.field == "corsOrigins")
        #expect(problem.value == origin)
        var c = TrackServer.Configuration()
        c.corsOrigins = [origin]
        #expect(c.problem == .corsOrigin(problem))
    }

    @Test func originsThatAreOnesHaveNoProblem() {
        for origin in ["*", "https://maps.example.org", "http://127.0.0.1:8080"] {
            #expect(TrackServer.Configuration.corsOriginProblem(origin) == nil)
        }
    }
}
