import GPSInput
import Geo
import LocationService
import Testing

/// A source's failure reaches the location service's error with its typed cause.
@Suite struct SourceFailureTests {
    @Test func aSourceErrorIsSourceUnavailableWithTheSourcesErrorAsItsCause() throws {
        var decisions = Decisions(configuration: LocationManagerConfiguration(), regions: RegionMonitor())
        let failure = GPSInputError(.deviceMissing, path: "/dev/ttyACM0")
        let events = decisions.handle(.event(SourceEvent(.error, source: "/dev/ttyACM0", error: failure)), now: 100)
        guard case .error(let error)? = events.first else {
            Issue.record("no error: \(events)")
            return
        }
        #expect(error.code == .sourceUnavailable)
        #expect(error.reason == failure.description)
        let cause = try #require(error.underlying as? GPSInputError)
        #expect(cause.code == .deviceMissing)
        #expect(cause.path == "/dev/ttyACM0")
    }
}
