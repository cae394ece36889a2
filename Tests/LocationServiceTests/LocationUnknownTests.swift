import Geo
import Testing

@testable import LocationService

/// Location unknown (CLError.locationUnknown's counterpart): said once when no usable fix came for
/// `locationUnknownAfter` seconds, and again only after a usable one. A fix that standard updates
/// reject as stale is none: a receiver whose times lag the clock, or a system clock that is wrong,
/// would otherwise stop every location without a word.
@Suite("Location manager: location unknown")
struct LocationUnknownTests {
    /// A 3D fix with 5 m accuracy at the origin, its time `t` (seconds since 1970).
    func fix(_ t: Double) -> SourceElement {
        .fix(
            Fix(
                time: GNSSTime(nanosecondsSince1970: Int64(t * 1e9), fractionDigits: 0), coordinate: origin,
                mode: .threeD, horizontalAccuracy: 5))
    }

    func errors(_ events: [LocationEvent]) -> [String] {
        events.compactMap { if case .error(let e) = $0, e.code == .locationUnknown { e.reason } else { nil } }
    }

    func locations(_ events: [LocationEvent]) -> Int {
        events.filter { if case .location = $0 { true } else { false } }.count
    }

    @Test func fixesThatAreAllStaleAreSaidOnceAsLocationUnknownNamingStaleness() {
        var decisions = Decisions(configuration: LocationManagerConfiguration(), regions: RegionMonitor())
        let start = 1_700_000_000.0
        var events: [LocationEvent] = []
        // Once a second for a minute, each fix 12 s older than the clock (the limit is 10 s).
        for s in 0..<60 { events += decisions.handle(fix(start + Double(s) - 12), now: start + Double(s)) }
        #expect(locations(events) == 0)
        #expect(
            errors(events) == [
                "no usable fix for 30 s: every fix is stale, the last 12 s older than the clock "
                    + "(is the system clock right?)"
            ])
        #expect(decisions.lastRejections == [.stale(age: 12)])
        // A source event after it refuses no fix: the stale one is not counted again.
        _ = decisions.handle(.event(SourceEvent(.endOfInput, source: "log", message: "end of log")), now: start + 60)
        #expect(decisions.lastRejections.isEmpty)
        // A fresh fix is delivered; the next stale run is said again, 30 s after it.
        events = decisions.handle(fix(start + 60), now: start + 60)
        #expect(locations(events) == 1)
        events = []
        for s in 61..<100 { events += decisions.handle(fix(start + Double(s) - 20), now: start + Double(s)) }
        #expect(errors(events).count == 1)
        #expect(errors(events).first?.contains("the last 20 s older") == true)
    }

    @Test func freshFixesAreNeverLocationUnknown() {
        var decisions = Decisions(configuration: LocationManagerConfiguration(), regions: RegionMonitor())
        var events: [LocationEvent] = []
        for s in 0..<120 {
            let t = 1_700_000_000.0 + Double(s)
            events += decisions.handle(fix(t - 9), now: t)
        }
        #expect(errors(events).isEmpty)
        #expect(locations(events) == 120)
    }
}
