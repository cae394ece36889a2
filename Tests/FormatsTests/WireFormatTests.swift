import Formats
import Geo
import Testing

let sample = TrailRecord(
    device: "van-1", sequence: 17, time: 1_715_679_000.25, latitude: 48.137366333,
    longitude: 11.575408667, altitude: 536.1, horizontalAccuracy: 9.1, verticalAccuracy: 14,
    speed: 1.5, course: 32.32)
let now = 1_800_000_000.0

@Suite("Wire formats")
struct WireFormatTests {
    @Test func theJSONBatchRoundTrips() throws {
        var enter = sample
        enter.sequence = 18
        enter.kind = .enter
        enter.region = "home \"A\""
        enter.altitude = nil
        let body = JSONBatch.encode(device: "van-1", records: [sample, enter])
        let text = String(decoding: body, as: UTF8.self)
        #expect(
            text.hasPrefix(
                #"{"device":"van-1","records":[{"id":"van-1:17","seq":17,"kind":"location","time":"2024-05-14T09:30:00.250Z","lat":48.137366333,"lon":11.575408667,"alt":536.100,"hAcc":9.10,"vAcc":14.00,"speed":1.500,"course":32.32}"#
            ))
        let decoded = try JSONBatch.decode(body, now: now)
        #expect(decoded.device == "van-1")
        #expect(decoded.records == [sample, enter])
    }

    @Test(arguments: [
        (
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":95,"lon":1}]}"#,
            "records[0]: lat 95.0 is out of range [-90, 90]"
        ),
        (
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lon":1}]}"#,
            "records[0].lat: missing"
        ),
        (
            #"{"device":"d","records":[{"seq":1,"kind":"teleport","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#,
            "records[0].kind: 'teleport' is not location, enter, exit, dwell, visit, trip or heartbeat"
        ),
        (
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"yesterday","lat":1,"lon":1}]}"#,
            "records[0].time: 'yesterday' is not an ISO 8601 UTC time"
        ),
        (
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"1970-01-01T00:00:00Z","lat":1,"lon":1}]}"#,
            "records[0]: time 1970-01-01T00:00:00.000Z is impossible (before 1980-01-06 or more than a day ahead)"
        ),
        (
            #"{"device":"d","records":[{"id":"d:2","seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#,
            "records[0].id: 'd:2' is not device:seq ('d:1')"
        ),
        (
            #"{"device":"d","records":[{"seq":1,"kind":"enter","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#,
            "records[0]: a enter record needs a region"
        ),
        (#"{"device":"d","records":[{"seq":"#, "malformed JSON: the body ends early"),
        (#"{"device":"d","records":[{"seq":1,,"#, "malformed JSON at byte 34: expected a string"),
        (
            #"{"device":"d","records":[{"seq":"one","kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#,
            "records[0].seq: expected a number"
        ),
        (#"{"records":[]}"#, "device: missing"),
    ])
    func badBatchesSayWhatAndWhere(body: String, message: String) {
        let error = #expect(throws: FormatsError.self) { try JSONBatch.decode(Array(body.utf8), now: now) }
        #expect(error?.message == message)
    }

    /// Traccar's OsmAnd parameters: id, timestamp (Unix seconds, or milliseconds at 2^31 and above),
    /// lat, lon, speed in knots, bearing, altitude, accuracy.
    @Test func osmAndSpeaksTraccarsParameters() throws {
        var whole = sample
        whole.time = 1_715_679_000
        #expect(
            OsmAnd.parameters(whole)
                == "id=van-1&timestamp=1715679000&lat=48.137366333&lon=11.575408667&speed=2.916&bearing=32.32&altitude=536.100&accuracy=9.10"
        )
        #expect(OsmAnd.parameters(sample).contains("timestamp=1715679000250&"))
        let decoded = try OsmAnd.decode(OsmAnd.parameters(sample), now: now)
        #expect(decoded.time == sample.time)
        #expect(abs(decoded.speed! - 1.5) < 0.001)
        #expect(decoded.device == "van-1")
        // What the OsmAnd app and Traccar Client send, query style, with the names Traccar accepts.
        let app = try OsmAnd.decode("deviceid=phone%201&lat=48.1&lon=11.5&timestamp=2024-05-14T09:30:00Z", now: now)
        #expect(app.device == "phone 1")
        #expect(app.time == 1_715_679_000)
        #expect(throws: FormatsError(.invalid, "id: missing (the device identifier is mandatory)")) {
            try OsmAnd.decode("lat=1&lon=1&timestamp=1715679000", now: now)
        }
        #expect(throws: FormatsError(.invalid, "lat: 'north' is not a number")) {
            try OsmAnd.decode("id=a&lat=north&lon=1&timestamp=1715679000", now: now)
        }
    }

    /// OwnTracks' location and transition payloads: _type, tst, lat, lon, acc, alt, vel (km/h), cog,
    /// tid, t; transitions with event enter|leave, desc, wtst.
    @Test func ownTracksSpeaksItsJSON() throws {
        let body = try #require(OwnTracks.encode(sample))
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"_type":"location","tst":1715679000,"lat":48.1373663,"lon":11.5754087,"acc":9,"alt":536,"vac":14,"vel":5,"cog":32,"tid":"VA"}"#
        )
        var exit = sample
        exit.kind = .exit
        exit.region = "home"
        let transition = String(decoding: try #require(OwnTracks.encode(exit)), as: UTF8.self)
        #expect(
            transition
                == #"{"_type":"transition","event":"leave","desc":"home","wtst":\#(Int(OwnTracks.stableWaypointTime("home"))),"t":"c","tst":1715679000,"lat":48.1373663,"lon":11.5754087,"acc":9,"tid":"VA"}"#
        )
        var dwell = sample
        dwell.kind = .dwell
        #expect(OwnTracks.encode(dwell) == nil)
        let back = try #require(try OwnTracks.decode(Array(transition.utf8), device: "van-1", now: now))
        #expect(back.kind == .exit)
        #expect(back.region == "home")
        #expect(try OwnTracks.decode(Array(#"{"_type":"lwt","tst":1}"#.utf8), device: "d", now: now) == nil)
        #expect(throws: FormatsError(.invalid, "lat: missing")) {
            try OwnTracks.decode(Array(#"{"_type":"location","lon":1,"tst":1715679000}"#.utf8), device: "d", now: now)
        }
    }

    @Test(arguments: [0, 1, 100, 100_000])
    func gzipRoundTrips(size: Int) throws {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 * 7 / 3) }
        let packed = Gzip.compress(bytes)
        #expect(packed.prefix(2) == [0x1f, 0x8b])
        #expect(try Gzip.decompress(packed, limit: size + 1) == bytes)
    }

    @Test func gzipRefusesBombsAndGarbage() {
        let bomb = Gzip.compress([UInt8](repeating: 0, count: 1_000_000))
        #expect(throws: FormatsError(.tooLarge, "body inflates beyond 1000 bytes")) {
            try Gzip.decompress(bomb, limit: 1000)
        }
        #expect(throws: FormatsError.self) { try Gzip.decompress(Array("not gzip".utf8), limit: 1000) }
    }

    @Test func trailsExportAsGeoJSONAndGPX() {
        var enter = sample
        enter.kind = .enter
        enter.region = "home"
        let geo = String(decoding: TrailExport.geoJSON(device: "van-1", records: [sample, enter]), as: UTF8.self)
        // One location: a Point (a one-position LineString is not valid RFC 7946).
        #expect(geo.contains(#""geometry":{"type":"Point","coordinates":[11.575408667,48.137366333,536.100]}"#))
        var later = sample
        later.time += 1
        let two = String(decoding: TrailExport.geoJSON(device: "van-1", records: [sample, later]), as: UTF8.self)
        #expect(
            two.contains(
                #""geometry":{"type":"LineString","coordinates":[[11.575408667,48.137366333,536.100],[11.575408667,48.137366333,536.100]]}"#
            ))
        let none = String(decoding: TrailExport.geoJSON(device: "van-1", records: [enter]), as: UTF8.self)
        #expect(none.contains(#""times":[]},"geometry":null}"#))
        #expect(geo.contains(#"{"event":"enter","region":"home","time":"2024-05-14T09:30:00.250Z"}"#))
        let gpx = String(decoding: TrailExport.gpx(device: "van-1", records: [sample, enter]), as: UTF8.self)
        #expect(
            gpx.contains(
                #"<wpt lat="48.137366333" lon="11.575408667"><ele>536.100</ele><time>2024-05-14T09:30:00.250Z</time><name>enter home</name></wpt>"#
            ))
        #expect(gpx.contains("<trkpt"))
    }

    @Test(arguments: [
        ("2024-05-14T09:30:00Z", 1_715_679_000.0), ("2024-05-14T09:30:00.5Z", 1_715_679_000.5),
        ("2024-05-14 09:30:00+00:00", 1_715_679_000.0),
    ])
    func isoTimesParse(text: String, seconds: Double) {
        #expect(ISOTime.parse(text) == seconds)
    }

    @Test(arguments: [
        "2024-05-14T09:30:00", "2024-13-14T09:30:00Z", "2024-05-14T09:30:00+02:00", "", "2024-05-14T25:00:00Z",
    ])
    func badISOTimesDoNot(text: String) {
        #expect(ISOTime.parse(text) == nil)
    }
}

@Suite("Trail pictures")
struct TrailSVGTests {
    /// 10 minutes still, then a walk away, then 2 minutes still.
    var trail: [TrailRecord] {
        var out: [TrailRecord] = []
        for i in 0..<600 {
            out.append(
                TrailRecord(
                    device: "d", sequence: Int64(i + 1), time: 1000 + Double(i),
                    latitude: 48.1 + Double(i % 3) * 1e-5, longitude: 11.5))
        }
        for i in 0..<300 {
            out.append(
                TrailRecord(
                    device: "d", sequence: Int64(601 + i), time: 1600 + Double(i),
                    latitude: 48.1 + Double(i) * 1.2e-5, longitude: 11.5))
        }
        return out
    }

    @Test func stopsAreWhereTheTrailStayedFiveMinutes() {
        let stops = TrailSVG.stops(trail)
        #expect(stops.count == 1)
        #expect(stops.first.map { $0.end - $0.start >= 599 } == true)
    }

    @Test func thePictureHasTheTrackRegionsStopsAndTransitions() throws {
        var records = trail
        var enter = records[700]
        enter.kind = .enter
        enter.region = "park <north>"
        records.append(enter)
        let region = try RegionDefinition.parseGeoJSON(
            Array(
                #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"park <north>","properties":{"radius":60},"geometry":{"type":"Point","coordinates":[11.5,48.102]}}]}"#
                    .utf8))
        let svg = TrailSVG.render(title: "van & co", records: records, regions: region)
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.contains("<polyline class=\"track\""))
        #expect(svg.contains("<circle class=\"region\""))
        #expect(svg.contains(">park &lt;north&gt;</text>"))
        #expect(svg.contains("stop 11 min"))  // 10 still, and the first 50 m of the walk
        #expect(svg.contains("<circle class=\"enter\""))
        #expect(svg.contains(">van &amp; co</text>"))
        #expect(svg.contains("900 points"))
        // Nothing fetched: the only URL is the SVG namespace.
        #expect(svg.split(separator: "http", omittingEmptySubsequences: false).count == 2)
    }
}
