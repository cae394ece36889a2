import Formats
import Testing

/// What the real peers send and expect, in their own wire forms (Traccar's OsmAnd decoder and its
/// tests, Traccar Client, the OwnTracks booklet and Recorder): issue 13.
@Suite("Peers' wire forms")
struct PeerWireFormTests {
    let received = 1_715_688_000.0  // 2024-05-14T12:00:00Z, the time of receipt

    // MARK: OsmAnd as Traccar reads it (item 9)

    @Test(arguments: [
        // location=lat,lon; heading instead of bearing
        ("id=123456&timestamp=1715679000&location=60.0,30.0&heading=90&speed=10", 1_715_679_000.0, 60.0, 30.0),
        // yyyy-MM-dd HH:mm:ss is UTC
        ("id=123456&lat=60.0&lon=30.0&timestamp=2024-05-14%2009:30:00", 1_715_679_000.0, 60.0, 30.0),
        ("id=123456&lat=60.0&lon=30.0&timestamp=2024-05-14+09:30:00", 1_715_679_000.0, 60.0, 30.0),
        // ISO 8601 with any offset
        ("id=123456&lat=60.0&lon=30.0&timestamp=2024-05-14T11:30:00%2B02:00", 1_715_679_000.0, 60.0, 30.0),
        ("id=123456&lat=60.0&lon=30.0&timestamp=2024-05-14T04:00:00-05:30", 1_715_679_000.0, 60.0, 30.0),
        // milliseconds
        ("id=123456&lat=60.0&lon=30.0&timestamp=1715679000000", 1_715_679_000.0, 60.0, 30.0),
        // no timestamp: the time of receipt
        ("id=123456&lat=60.0&lon=30.0", 1_715_688_000.0, 60.0, 30.0),
    ])
    func osmAndReadsWhatTraccarReads(query: String, time: Double, lat: Double, lon: Double) throws {
        let r = try OsmAnd.decode(query, now: received)
        #expect(r.device == "123456")
        #expect(r.time == time)
        #expect(r.latitude == lat && r.longitude == lon)
        #expect(r.valid)
    }

    @Test func osmAndKeepsEveryOtherParameterAndReadsUnknownsAndValidity() throws {
        let r = try OsmAnd.decode(
            "id=123456&lat=60.0&lon=30.0&timestamp=1715679000&speed=-1&bearing=-1&hdop=0.9&batt=87&charge=true"
                + "&driverUniqueId=D-17&valid=false&token=secret", now: received)
        #expect(r.speed == nil && r.course == nil)
        #expect(!r.valid)
        #expect(r.attributes == ["hdop": "0.9", "batt": "87", "charge": "true", "driverUniqueId": "D-17"])
        #expect(try OsmAnd.decode("id=a&lat=1&lon=2&heading=45", now: received).course == 45)
        // A parameter no store could keep is left out, not the position refused.
        let odd = try OsmAnd.decode("id=a&lat=1&lon=2&=x&bad%01name=1&ok=1", now: received)
        #expect(odd.attributes == ["ok": "1"])
        #expect(throws: FormatsError(.invalid, "location: 'north' is not 'lat,lon'")) {
            try OsmAnd.decode("id=a&location=north", now: received)
        }
    }

    /// The JSON Traccar Client posts (with and without the extras).
    @Test func osmAndReadsTraccarClientsJSON() throws {
        let body = #"""
            {"location":{"timestamp":"2024-05-14T09:30:00.000Z","coords":{"latitude":60.0,"longitude":30.0,"accuracy":5,
            "speed":2.5,"heading":-1,"altitude":120},"is_moving":true,"odometer":1234.5,"event":"motionchange",
            "battery":{"level":0.87,"is_charging":false},"activity":{"type":"walking"}},"device_id":"123456"}
            """#
        let r = try OsmAnd.decodeJSON(Array(body.utf8), now: received)
        #expect(r.device == "123456")
        #expect(r.time == 1_715_679_000)
        #expect(r.latitude == 60 && r.longitude == 30)
        #expect(r.speed == 2.5)  // m/s in this form
        #expect(r.course == nil)
        #expect(r.horizontalAccuracy == 5 && r.altitude == 120)
        #expect(r.attributes["is_moving"] == "true")
        #expect(r.attributes["battery.level"] == "0.87")
        #expect(r.attributes["battery.is_charging"] == "false")
        #expect(r.attributes["activity.type"] == "walking")
        #expect(r.attributes["odometer"] == "1234.5")
        let bare = #"{"location":{"coords":{"latitude":60.0,"longitude":30.0,"speed":-1}},"device_id":"123456"}"#
        let b = try OsmAnd.decodeJSON(Array(bare.utf8), now: received)
        #expect(b.time == received && b.speed == nil)
    }

    // MARK: OsmAnd as we send it: transitions are events on their position (item 3)

    @Test func aTransitionIsAnEventOnThePositionThatDecidedIt() {
        let location = TrailRecord(device: "van-1", sequence: 7, time: 1_715_679_020, latitude: 48.1, longitude: 11.5)
        var enter = TrailRecord(
            device: "van-1", sequence: 8, kind: .enter, region: "home", time: 1_715_679_000,
            latitude: 48.1, longitude: 11.5)
        enter.decidedAt = 1_715_679_020
        #expect(
            OsmAnd.parameters(location, events: [enter])
                == "id=van-1&timestamp=1715679020&lat=48.100000000&lon=11.500000000&event=geofenceEnter&geofence=home")
        // Alone (its location was held back by a filter): its position, at the deciding time, not the crossing's.
        #expect(
            OsmAnd.parameters(enter)
                == "id=van-1&timestamp=1715679020&lat=48.100000000&lon=11.500000000&event=geofenceEnter&geofence=home")
    }

    // MARK: OwnTracks as the booklet and the Recorder describe it (items 2, 10)

    @Test func ownTracksUpdatesOmitTAndTransitionsCarryTheWaypointsTimeAndAcc() throws {
        let r = TrailRecord(device: "van-1", sequence: 1, time: 1_715_679_000, latitude: 48.1, longitude: 11.5)
        let location = String(decoding: try #require(OwnTracks.encode(r)), as: UTF8.self)
        #expect(!location.contains(#""t":"#))
        var enter = r
        enter.kind = .enter
        enter.region = "home"
        let transition = String(
            decoding: try #require(OwnTracks.encode(enter, waypointCreated: 1_600_000_000)), as: UTF8.self)
        #expect(
            transition
                == #"{"_type":"transition","event":"enter","desc":"home","wtst":1600000000,"t":"c","tst":1715679000,"lat":48.1000000,"lon":11.5000000,"acc":5,"tid":"VA"}"#
        )
        // No accuracy from the receiver: acc is still there and above 0 (Home Assistant drops 0), 5 m.
        #expect(location.contains(#""acc":5,"#))
        // Without a known creation time: one stable value per region, never the crossing's time.
        let stand = String(decoding: try #require(OwnTracks.encode(enter)), as: UTF8.self)
        #expect(stand.contains(#""wtst":\#(Int(OwnTracks.stableWaypointTime("home")))"#))
        #expect(OwnTracks.stableWaypointTime("home") != OwnTracks.stableWaypointTime("work"))
    }

    @Test func ownTracksIdentityIsUserAndDeviceLowercasedWithTheRecordersFallbacks() {
        #expect(OwnTracks.deviceID(user: "Anna", device: "Phone") == "anna/phone")
        #expect(OwnTracks.deviceID(user: nil, device: nil) == "owntracks/phone")
        #expect(OwnTracks.deviceID(user: "", device: "tab") == "owntracks/tab")
    }

    @Test func ownTracksReadsWhatTheAppsSend() throws {
        // Numbers as strings, no tst: the time of receipt.
        let strings = #"{"_type":"location","lat":"48.1","lon":"11.5","acc":"12","batt":"87","tid":"AN","conn":"w"}"#
        let r = try #require(try OwnTracks.decode(Array(strings.utf8), user: "Anna", device: "Phone", now: received))
        #expect(r.device == "anna/phone")
        #expect(r.latitude == 48.1 && r.horizontalAccuracy == 12)
        #expect(r.time == received)
        #expect(r.attributes["batt"] == "87" && r.attributes["conn"] == "w")
        // A transition without a position: kept, marked invalid.
        let bare =
            #"{"_type":"transition","event":"leave","desc":"home","tst":1715679000,"wtst":1600000000,"acc":10,"t":"c"}"#
        let t = try #require(try OwnTracks.decode(Array(bare.utf8), user: "anna", device: "phone", now: received))
        #expect(t.kind == .exit && t.region == "home" && !t.valid)
        // Empty bodies and position-less types: nothing to store.
        #expect(try OwnTracks.decode([], user: nil, device: nil, now: received) == nil)
        #expect(try OwnTracks.decode(Array(" \n".utf8), user: nil, device: nil, now: received) == nil)
        for type in ["waypoint", "waypoints", "lwt", "card", "status", "cmd", "steps"] {
            #expect(
                try OwnTracks.decode(
                    Array(#"{"_type":"\#(type)","tst":1715679000}"#.utf8), user: nil, device: nil,
                    now: received) == nil)
        }
        // Encrypted: refused as unsupported, not acknowledged and dropped.
        #expect(throws: FormatsError.self) {
            try OwnTracks.decode(
                Array(#"{"_type":"encrypted","data":"abc"}"#.utf8), user: nil, device: nil, now: received)
        }
        do {
            _ = try OwnTracks.decode(
                Array(#"{"_type":"encrypted","data":"abc"}"#.utf8), user: nil, device: nil, now: received)
        } catch {
            #expect(error.code == .unsupported)
        }
    }
}
