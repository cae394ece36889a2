import Foundation
import Formats
import Geo
import Testing

/// Issue 27, item 3: visits and trips as trail records, on every wire that can carry them.
@Suite("Wire formats: visit and trip records")
struct VisitRecordTests {
    static let arrival: TrailRecord = {
        var r = TrailRecord(
            device: "van-1", sequence: 5, kind: .visit, time: 1_715_679_000, latitude: 48.1373663,
            longitude: 11.5754087, horizontalAccuracy: 6.25)
        r.span = TrailRecord.Span(end: nil)
        return r
    }()
    static let departure: TrailRecord = {
        var r = arrival
        r.sequence = 9
        r.span = TrailRecord.Span(end: 1_715_681_400)
        return r
    }()
    static let trip: TrailRecord = {
        var r = TrailRecord(
            device: "van-1", sequence: 10, kind: .trip, time: 1_715_681_400, latitude: 48.1373663,
            longitude: 11.5754087)
        r.span = TrailRecord.Span(
            end: 1_715_682_000, endLatitude: 48.1651548, endLongitude: 11.5301382,
            distance: 5187.8, maximumSpeed: 14.107)
        return r
    }()

    @Test func visitsAndTripsRoundTripThroughTheJSONBatch() throws {
        let body = JSONBatch.encode(device: "van-1", records: [Self.arrival, Self.departure, Self.trip])
        let text = String(decoding: body, as: UTF8.self)
        #expect(
            text.contains(
                #""kind":"visit","time":"2024-05-14T09:30:00.000Z","lat":48.137366300,"lon":11.575408700,"alt":null,"hAcc":6.25,"vAcc":null,"speed":null,"course":null,"departure":null}"#
            ))
        #expect(text.contains(#""departure":"2024-05-14T10:10:00.000Z"}"#))
        #expect(
            text.contains(
                #""kind":"trip","time":"2024-05-14T10:10:00.000Z","lat":48.137366300,"lon":11.575408700,"alt":null,"hAcc":null,"vAcc":null,"speed":null,"course":null,"end":"2024-05-14T10:20:00.000Z","endLat":48.165154800,"endLon":11.530138200,"distance":5187.8,"duration":600.000,"avgSpeed":8.646,"maxSpeed":14.107}"#
            ))
        let decoded = try JSONBatch.decode(body, now: 1_800_000_000)
        #expect(decoded.records == [Self.arrival, Self.departure, Self.trip])
    }

    @Test func aStoreKeepsTheSpanAsJSONAndReadsItBack() {
        for r in [Self.arrival, Self.departure, Self.trip] {
            let text = TrailRecord.spanJSON(r)
            #expect(text?.hasPrefix("{\"") == true && text?.hasSuffix("}") == true)
            #expect(TrailRecord.span(fromJSON: text) == r.span ?? TrailRecord.Span())
        }
        #expect(TrailRecord.spanJSON(sample) == nil)
        #expect(TrailRecord.span(fromJSON: nil) == nil)
        #expect(TrailRecord.span(fromJSON: "{\"end\":") == nil)
        #expect(TrailRecord.span(fromJSON: "[]") == nil)
    }

    /// Members of a span on a location are unknown keys there: ignored, as any unknown key.
    @Test func spanMembersOnALocationAreIgnored() throws {
        let body =
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","distance":5}]}"#
        let r = try JSONBatch.decode(Array(body.utf8), now: 1_800_000_000).records[0]
        #expect(r.span == nil)
    }

    @Test(arguments: [
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}"#,
            "records[0]: a trip record needs end, endLat, endLon and distance"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:20:00Z","endLat":1,"endLon":1,"distance":3}"#,
            "records[0]: the end must lie between the record's time and a day after now"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","endLat":91,"endLon":1,"distance":3}"#,
            "records[0]: endLat is out of range [-90, 90]"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","endLat":1,"endLon":-181,"distance":3}"#,
            "records[0]: endLon is out of range [-180, 180]"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","endLat":1,"endLon":1,"distance":-3}"#,
            "records[0]: distance must be 0 to 40,000,000,000 metres"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","endLat":1,"endLon":1,"distance":3,"maxSpeed":1e9}"#,
            "records[0]: maxSpeed must be 0 to 100,000 m/s"
        ),
        (
            #"{"seq":1,"kind":"visit","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"departure":"2024-05-14T09:40:00Z","distance":3}"#,
            "records[0]: a visit record has only a departure"
        ),
        (
            #"{"seq":1,"kind":"visit","region":"home","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}"#,
            "records[0]: a visit record has no region"
        ),
        (
            #"{"seq":1,"kind":"visit","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"departure":"tomorrow"}"#,
            "records[0].departure: 'tomorrow' is not an ISO 8601 UTC time"
        ),
        (
            #"{"seq":1,"kind":"visit","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"departure":5}"#,
            "records[0].departure: expected a string"
        ),
        (
            #"{"seq":1,"kind":"trip","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,"end":"2024-05-14T09:40:00Z","endLat":"1","endLon":1,"distance":3}"#,
            "records[0].endLat: expected a number"
        ),
    ])
    func badVisitsAndTripsAreRefusedByName(record: String, message: String) {
        let body = #"{"device":"d","records":["# + record + "]}"
        // A record's problem is an invalid-record error naming its key; the others are invalid.
        #expect { try JSONBatch.decode(Array(body.utf8), now: 1_800_000_000) } throws: {
            ($0 as? FormatsError)?.message == message
        }
    }

    /// The fuzz target's property: a trip with times finer than a millisecond, written, read back and
    /// written again, gives the same bytes (duration and speed come from the values as written).
    @Test func aTripWrittenTwiceGivesTheSameBytes() throws {
        var trip = Self.trip
        trip.time += 0.0004
        trip.span?.end = 1_715_682_000.0006
        trip.span?.distance = 5187.84
        let first = JSONBatch.encode(device: "van-1", records: [trip])
        let again = JSONBatch.encode(device: "van-1", records: try JSONBatch.decode(first, now: 1_800_000_000).records)
        #expect(String(decoding: again, as: UTF8.self) == String(decoding: first, as: UTF8.self))
    }

    /// A batch of a visit cut at every byte: never a crash, and only the whole one decodes.
    @Test func aVisitCutAtEveryByteIsRefusedNotTrappedOn() {
        let body = JSONBatch.encode(device: "van-1", records: [Self.departure, Self.trip])
        for n in 0..<body.count {
            #expect(throws: FormatsError.self) { try JSONBatch.decode(Array(body[..<n]), now: 1_800_000_000) }
        }
    }

    /// OwnTracks: a visit as the iOS app reports one (a location with trigger `v`, at the arrival,
    /// then at the departure); a trip has no OwnTracks form.
    @Test func ownTracksSendsAVisitAsALocationWithTriggerV() throws {
        let arrival = String(decoding: try #require(OwnTracks.encode(Self.arrival)), as: UTF8.self)
        #expect(
            arrival
                == #"{"_type":"location","t":"v","tst":1715679000,"lat":48.1373663,"lon":11.5754087,"acc":6,"tid":"VA"}"#
        )
        let departure = String(decoding: try #require(OwnTracks.encode(Self.departure)), as: UTF8.self)
        #expect(departure.contains(#""t":"v","tst":1715681400,"#))
        #expect(OwnTracks.encode(Self.trip) == nil)
        // Read back by the endpoint as a location (the trigger kept as an attribute).
        let read = try #require(try OwnTracks.decode(Array(arrival.utf8), device: "u/phone", now: 1_800_000_000))
        #expect(read.kind == .location && read.time == Self.arrival.time)
        #expect(read.attributes["t"] == "v")
    }

    @Test func exportsDrawVisitsAsWaypointsAndLeaveTripsToTheTrack() {
        let gpx = String(
            decoding: TrailExport.gpx(device: "van-1", records: [sample, Self.departure, Self.trip]),
            as: UTF8.self)
        #expect(gpx.contains("<name>visit</name><desc>until 2024-05-14T10:10:00.000Z</desc></wpt>"))
        #expect(!gpx.contains("trip"))
        let geo = String(
            decoding: TrailExport.geoJSON(device: "van-1", records: [sample, Self.departure, Self.trip]),
            as: UTF8.self)
        #expect(geo.contains(#""event":"visit""#) && !geo.contains(#""event":"trip""#))
    }

    /// A visit is recorded twice (at arrival, and at departure with both times): exported once, as
    /// its latest record says it; one still open says so.
    @Test func exportsGiveAVisitRecordedTwiceOnce() throws {
        let records = [Self.arrival, sample, Self.departure, Self.trip]
        let gpx = String(decoding: TrailExport.gpx(device: "van-1", records: records), as: UTF8.self)
        #expect(gpx.components(separatedBy: "<name>visit</name>").count == 2, "\(gpx)")
        #expect(gpx.contains("<desc>until 2024-05-14T10:10:00.000Z</desc>"))
        let open = String(decoding: TrailExport.gpx(device: "van-1", records: [Self.arrival]), as: UTF8.self)
        #expect(open.contains("<name>visit</name><desc>still there</desc>"))
        let geo = TrailExport.geoJSON(device: "van-1", records: records)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(geo)) as? [String: Any])
        let visits = (object["features"] as? [[String: Any]] ?? []).compactMap { $0["properties"] as? [String: Any] }
            .filter { $0["event"] as? String == "visit" }
        #expect(visits.count == 1)
        #expect(visits.first?["time"] as? String == "2024-05-14T09:30:00.000Z")
        #expect(visits.first?["departure"] as? String == "2024-05-14T10:10:00.000Z")
        #expect(visits.first?["region"] == nil)
    }

    /// The picture marks visits (times, duration, a disc of their radius) and colours each trip's
    /// part of the track; the old stops are not drawn then.
    @Test func thePictureMarksVisitsAndColoursTrips() {
        func latitude(_ i: Int) -> Double {
            if i < 40 { return 48.1 }
            if i < 60 { return 48.1 + Double(i - 40) * 1e-3 }
            return 48.12
        }
        let trail: [TrailRecord] = (0..<100).map { (i: Int) -> TrailRecord in
            TrailRecord(
                device: "d", sequence: Int64(i + 1), time: 1_715_679_000 + Double(i) * 60,
                latitude: latitude(i), longitude: 11.5)
        }
        let marks = TrailSVG.Marks(
            visits: [
                .init(
                    center: Coordinate(latitude: 48.1, longitude: 11.5), radius: 4, arrival: 1_715_679_000,
                    departure: 1_715_681_340),
                .init(
                    center: Coordinate(latitude: 48.12, longitude: 11.5), radius: 5, arrival: 1_715_682_600,
                    departure: nil),
            ],
            trips: [.init(start: 1_715_681_340, end: 1_715_682_600, distance: 2_224)])
        let svg = TrailSVG.render(title: "d", records: trail, marks: marks)
        #expect(
            svg.contains(
                #"<circle class="visit" data-arrival="2024-05-14T09:30:00.000Z" data-departure="2024-05-14T10:09:00.000Z""#
            ))
        #expect(svg.contains(">09:30–10:09 UTC · 39 min</text>"))
        #expect(svg.contains(">from 10:30 UTC, still there</text>"))
        #expect(svg.contains(#"<polyline class="trip" data-start="2024-05-14T10:09:00.000Z""#))
        #expect(svg.contains(">trip 1: 2.2 km, 21 min</text>"))
        #expect(!svg.contains("class=\"stop\""))
        #expect(TrailSVG.render(title: "d", records: trail).contains("class=\"stop\""))
    }
}
