import EndpointEvents
import Formats
import Geo
import LocationService
import Testing

/// Geofences added, replaced and removed while devices move, and geofences for some devices only.
@Suite("Geofences: changes and scopes")
struct GeofenceChangeTests {
    static func circle(_ name: String, radius: Double = 100, east: Double = 0) throws -> Region {
        try Region(id: name, center: Geodesy.destination(from: munich, bearing: 90, distance: east), radius: radius)
    }

    /// Evaluates `device` at `metres` east of the centre at `t` (accuracy 5 m).
    static func at(
        _ t: Double, _ metres: Double, _ state: inout GeofenceState, _ set: GeofenceSet, device: String = "van-1"
    )
        -> [String]
    {
        let l = located(1_700_000_000 + t, munich, metres: metres)
        return transitions(
            state.evaluate(
                latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: 5, time: l.timestamp,
                device: device, in: set))
    }

    @Test func aGeofenceAddedAroundADeviceStartsUnknownAndItsFirstStateIsNoEntry() throws {
        var state = GeofenceState()
        let none = GeofenceSet([(Geofence(region: try Self.circle("far", east: 5_000)), 1)], generation: 1)
        #expect(Self.at(0, 0, &state, none).isEmpty)
        // Added while the device stands at the centre: settled inside without an event (as a
        // device's monitor given a new region reports its state, not an entry).
        let added = GeofenceSet(
            [
                (Geofence(region: try Self.circle("far", east: 5_000)), 1),
                (Geofence(region: try Self.circle("here")), 2),
            ],
            generation: 2)
        #expect(Self.at(1, 0, &state, added).isEmpty)
        #expect(state.inside == ["here"])
        // Leaving it is an exit.
        var events: [String] = []
        for t in 2...200 { events += Self.at(Double(t), Double(t - 1) * 2, &state, added) }
        #expect(events == ["exit here \(1_700_000_000 + 54.0)"])
    }

    @Test func aReplacedGeofenceStartsAgainAndARemovedOneIsForgotten() throws {
        var state = GeofenceState()
        let v1 = GeofenceSet([(Geofence(region: try Self.circle("depot")), 1)], generation: 1)
        _ = Self.at(0, 0, &state, v1)
        #expect(state.inside == ["depot"])
        // Replaced by a circle elsewhere: the old watch goes; the new one settles outside silently.
        let v2 = GeofenceSet([(Geofence(region: try Self.circle("depot", east: 3_000)), 2)], generation: 2)
        #expect(Self.at(1, 0, &state, v2).isEmpty)
        #expect(state.inside.isEmpty)
        // Removed: nothing is watched, nothing happens.
        let v3 = GeofenceSet([], generation: 3)
        #expect(Self.at(2, 0, &state, v3).isEmpty)
        #expect(state.watchedCount == 0)
    }

    @Test func aGeofenceForSomeDevicesIsEvaluatedForThoseOnly() throws {
        let set = GeofenceSet([Geofence(region: try Self.circle("yard"), devices: ["van-2"])])
        var van1 = GeofenceState()
        var van2 = GeofenceState()
        var e1: [String] = []
        var e2: [String] = []
        for t in 0...300 {
            let x = -300 + Double(t) * 2
            e1 += Self.at(Double(t), x, &van1, set, device: "van-1")
            e2 += Self.at(Double(t), x, &van2, set, device: "van-2")
        }
        #expect(e1.isEmpty)
        #expect(e2.map { String($0.prefix(4)) } == ["ente", "exit"])
    }

    @Test func aLargeGeofenceOverManyCellsIsFoundInEachOfThem() throws {
        // 20 km: far more cells than the index lists one by one.
        let big = try Self.circle("city", radius: 20_000)
        let set = GeofenceSet([Geofence(region: big)])
        var state = GeofenceState()
        var monitor = RegionMonitor()
        monitor.add(big)
        var device: [String] = []
        var server: [String] = []
        // From 21 km east to 19 km east and back, 20 m/s.
        for t in 0...200 {
            let x = 21_000 - Double(min(t, 100)) * 20 + Double(max(0, t - 100)) * 20
            let l = located(1_700_000_000 + Double(t), munich, metres: x)
            device += transitions(monitor.process(l))
            server += transitions(
                state.evaluate(
                    latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: 5, time: l.timestamp,
                    device: "van-1", in: set))
        }
        #expect(device.count == 2)
        #expect(server == device)
    }
}
