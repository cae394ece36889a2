import Geo
import Synchronization
import Testing

@testable import LocationService

/// The manager is gated by calls, like CLLocationManager: standard updates started and stopped,
/// the app suspended and not, each call holding from the next fix decided while significant changes
/// go on.
@Suite("Location manager: gated by calls")
struct LocationManagerGatingTests {
    /// Fixes from a list, one a `next()`; the time of the fix handed on is the manager's clock.
    struct ListSource: FixSource {
        let fixes: [Fix]
        let clock = ManualClock()
        var name: String { "list" }

        func makeAsyncIterator() -> Iterator { Iterator(fixes: fixes[...], clock: clock) }

        struct Iterator: AsyncIteratorProtocol {
            var fixes: ArraySlice<Fix>
            let clock: ManualClock

            mutating func next() async -> SourceElement? {
                guard let fix = fixes.popFirst() else { return nil }
                clock.advance(to: EpochInstant(secondsSince1970: fix.time!.secondsSince1970!))
                return .fix(fix)
            }
        }
    }

    enum Call: CaseIterable {
        case none, stopUpdating, startUpdating, suspend, unsuspend
    }

    /// Makes each row's call, then reads the next fix's events: whether it was delivered as a
    /// location. Fixes come every 5 minutes, 1.1 km apart: each is a significant change, the last
    /// event of its fix.
    static func run(_ table: [(call: Call, delivered: Bool)], updatingLocation: Bool = true) async {
        let fixes = table.indices.map { i in
            let nanoseconds = Int64(1_700_000_000 + 300 * i) * 1_000_000_000
            return Fix(
                time: GNSSTime(nanosecondsSince1970: nanoseconds, fractionDigits: 0),
                coordinate: Coordinate(latitude: 48 + 0.01 * Double(i), longitude: 11.5), mode: .threeD,
                horizontalAccuracy: 5)
        }
        var configuration = LocationManagerConfiguration()
        configuration.significantChanges = SignificantChangeMonitor()
        let source = ListSource(fixes: fixes)
        let manager = LocationManager(
            source: source, configuration: configuration,
            updatingLocation: updatingLocation, clock: source.clock)
        var events = manager.events.makeAsyncIterator()
        for (i, row) in table.enumerated() {
            switch row.call {
            case .none: break
            case .stopUpdating: manager.stopUpdatingLocation()
            case .startUpdating: manager.startUpdatingLocation()
            case .suspend: manager.setSuspended(true)
            case .unsuspend: manager.setSuspended(false)
            }
            var delivered = false
            var significant = false
            while let event = await events.next() {
                if case .location(let l) = event { delivered = l.coordinate == fixes[i].coordinate }
                if case .significantChange(let l) = event {
                    significant = l.coordinate == fixes[i].coordinate
                    break
                }
            }
            #expect(significant, "fix \(i)")
            #expect(delivered == row.delivered, "fix \(i) after \(row.call)")
        }
        #expect(await events.next() == nil)
    }

    @Test func standardUpdatesFollowTheCallsAndSignificantChangesGoOn() async {
        await Self.run([
            (.none, true), (.stopUpdating, false), (.none, false), (.startUpdating, true), (.suspend, false),
            (.stopUpdating, false), (.unsuspend, false), (.startUpdating, true), (.none, true),
        ])
    }

    @Test func aManagerMadeNotUpdatingDeliversOnceStarted() async {
        await Self.run(
            [(.none, false), (.suspend, false), (.startUpdating, false), (.unsuspend, true)],
            updatingLocation: false)
    }

    @Test func theCallsAreReadBack() {
        let manager = LocationManager(source: ListSource(fixes: []), clock: ManualClock())
        #expect(manager.isUpdatingLocation && !manager.isSuspended)
        manager.stopUpdatingLocation()
        manager.setSuspended(true)
        #expect(!manager.isUpdatingLocation && manager.isSuspended)
        manager.startUpdatingLocation()
        manager.setSuspended(false)
        #expect(manager.isUpdatingLocation && !manager.isSuspended)
    }
}
