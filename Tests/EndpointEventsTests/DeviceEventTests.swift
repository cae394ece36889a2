import EndpointEvents
import Foundation
import Formats
import Geo
import LocationService
import Testing

/// Events' ids and JSON: what `/v1/events`, the stream and hooks carry (docs/events.md).
@Suite("Device events: ids and JSON")
struct DeviceEventTests {
    static let t0 = 1_700_000_000.0

    @Test func idsAreUUIDsOfTheirCause() {
        let a = EventID.make(device: "van-1", kind: .geofenceEnter, subject: "depot", cause: "id:van-1:17")
        #expect(a == EventID.make(device: "van-1", kind: .geofenceEnter, subject: "depot", cause: "id:van-1:17"))
        #expect(EventID.isWellFormed(a))
        // Version 8, variant 10.
        let u = Array(a.utf8)
        #expect(u[14] == UInt8(ascii: "8"))
        #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(u[19]))
        // Any part of the cause changes it, and parts do not run into each other.
        let others = [
            EventID.make(device: "van-2", kind: .geofenceEnter, subject: "depot", cause: "id:van-1:17"),
            EventID.make(device: "van-1", kind: .geofenceExit, subject: "depot", cause: "id:van-1:17"),
            EventID.make(device: "van-1", kind: .geofenceEnter, subject: "yard", cause: "id:van-1:17"),
            EventID.make(device: "van-1", kind: .geofenceEnter, subject: "depot", cause: "id:van-1:18"),
            EventID.make(device: "van-1", kind: .geofenceEnter, subject: "depotid:van-1:17", cause: ""),
        ]
        #expect(Set(others + [a]).count == 6)
        #expect(!EventID.isWellFormed("not-an-id"))
    }

    /// An id is fixed by its cause for good: every instance and version on one store, and every
    /// receiver that kept it, must compute the same one. The name's SHA-256, cut and marked by hand:
    /// Python's hashlib.sha256(b"keeptrack-event/1\0van-1\0geofenceEnter\0depot\0id:van-1:17\0").
    @Test func anIdIsTheSHA256OfItsNameAsRFC9562Cuts() {
        #expect(
            EventID.make(device: "van-1", kind: .geofenceEnter, subject: "depot", cause: "id:van-1:17")
                == "35b36582-9021-8e0f-9898-caa1e70a6f4f")
    }

    static func object(_ e: DeviceEvent) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(e.json)) as? [String: Any])
    }

    @Test func aGeofenceEntryCarriesItsGeofenceItsTimesAndThePlace() throws {
        var r = TrailRecord(device: "van-1", sequence: 17, time: Self.t0 + 20, latitude: 48.1372, longitude: 11.5755)
        r.horizontalAccuracy = 5
        let e = DeviceEvent.geofence(
            .geofenceEnter, "depot", time: Self.t0, decidedBy: KeyedRecord(key: "id:van-1:17", record: r))
        #expect(
            String(decoding: e.json, as: UTF8.self)
                == #"{"id":"\#(e.id)","device":"van-1","kind":"geofenceEnter","time":"2023-11-14T22:13:20.000Z","decidedAt":"2023-11-14T22:13:40.000Z","lat":48.1372000,"lon":11.5755000,"geofence":"depot"}"#
        )
    }

    @Test func everyKindWritesValidJSONWithItsFields() throws {
        let visit = Visit(
            coordinate: Coordinate(latitude: 48.1, longitude: 11.5), horizontalAccuracy: 30, arrival: Self.t0,
            departure: Self.t0 + 600, fixCount: 40)
        let trip = Trip(
            start: Self.t0, end: Self.t0 + 100, startCoordinate: Coordinate(latitude: 48.1, longitude: 11.5),
            endCoordinate: Coordinate(latitude: 48.2, longitude: 11.6), distance: 1500, maximumSpeed: 22)
        let speedy = KeyedRecord(
            key: "k", record: TrailRecord(device: "v", sequence: 1, time: Self.t0, latitude: 1, longitude: 2))
        var state = DeviceEventState()
        var rules = EventRules()
        rules.overspeed = OverspeedRule(limit: 10)
        var fast = speedy
        fast.record.speed = 12
        fast.record.attributes["batt"] = "9"
        let evaluated = state.evaluate([fast], device: "v", geofences: GeofenceSet(), rules: rules).events
        let events: [(DeviceEvent, [String])] = [
            (
                DeviceEvent.stopStart(device: "v", visit: visit, decided: Self.t0 + 200),
                ["start", "end", "radius", "fixes"]
            ),
            (DeviceEvent.stopEnd(device: "v", visit: visit, decided: Self.t0 + 700), ["start", "end", "duration"]),
            (
                DeviceEvent.tripEnd(device: "v", trip: trip, decided: Self.t0 + 160),
                ["distance", "maxSpeed", "startLat", "endLon"]
            ),
            (DeviceEvent.offline(device: "v", time: Self.t0 + 900, lastSeen: Self.t0), ["lastSeen"]),
            (DeviceEvent.online(device: "v", time: Self.t0 + 1000, lastSeen: Self.t0), []),
            (evaluated[0], ["speed", "limit", "lat", "lon"]),
            (evaluated[1], ["battery", "threshold"]),
        ]
        #expect(events.map(\.0.kind) == [.stopStart, .stopEnd, .tripEnd, .offline, .online, .overspeed, .lowBattery])
        for (e, fields) in events {
            let o = try Self.object(e)
            #expect(o["id"] as? String == e.id)
            #expect(o["kind"] as? String == e.kind.rawValue)
            #expect(o["device"] as? String == "v")
            for f in fields { #expect(o[f] != nil, "\(e.kind) lacks \(f): \(o)") }
        }
        // The stop's start and end are one stop: the same id for a detector run again.
        #expect(
            DeviceEvent.stopEnd(device: "v", visit: visit, decided: Self.t0 + 700).id
                == DeviceEvent.stopEnd(device: "v", visit: visit, decided: Self.t0 + 650).id)
        #expect(try Self.object(events[0].0)["end"] is NSNull)
        #expect(try Self.object(events[2].0)["lat"] as? Double == 48.2)
    }

    @Test func aDeviceTripAndADeviceVisitAreTheirRecordsFields() throws {
        var trip = TrailRecord(device: "p", sequence: 3, kind: .trip, time: Self.t0, latitude: 48.1, longitude: 11.5)
        trip.span = TrailRecord.Span(end: Self.t0 + 60, endLatitude: 48.2, endLongitude: 11.6, distance: 900)
        let e = try #require(DeviceEvent.reported(by: KeyedRecord(key: "id:p:3", record: trip)))
        #expect(e.kind == .deviceTrip)
        let o = try Self.object(e)
        #expect(o["maxSpeed"] is NSNull)
        #expect(o["distance"] as? Double == 900)
        let arrival = TrailRecord(
            device: "p", sequence: 4, kind: .visit, time: Self.t0, latitude: 48.1, longitude: 11.5)
        #expect(DeviceEvent.reported(by: KeyedRecord(key: "id:p:4", record: arrival))?.kind == .visitStart)
        let location = TrailRecord(device: "p", sequence: 5, time: Self.t0, latitude: 48.1, longitude: 11.5)
        #expect(DeviceEvent.reported(by: KeyedRecord(key: "id:p:5", record: location)) == nil)
    }
}
