import Formats
import Testing

/// A body of one Point feature at `coordinates` with `properties`.
func overlandBody(_ properties: String, at coordinates: String = "[1,2]") -> String {
    #"{"locations":[{"geometry":{"type":"Point","coordinates":"# + coordinates + #"},"properties":"# + properties
        + "}]}"
}

/// Overland's batch (aaronpk/Overland-iOS, "API"): what the app sends, what we send, and what
/// hostile bodies get.
@Suite("Wire formats: Overland")
struct OverlandTests {
    let now = 1_715_688_000.0
    let feature =
        #"{"type":"Feature","geometry":{"type":"Point","coordinates":[11.5,48.1]},"#
        + #""properties":{"timestamp":"2024-05-14T09:30:00Z","device_id":"anna"}}"#

    func body(_ features: [String], extra: String = "") -> [UInt8] {
        Array(("{\"locations\":[" + features.joined(separator: ",") + "]" + extra + "}").utf8)
    }

    @Test func readsAFeatureAsTheAppWritesIt() throws {
        let text =
            #"{"locations":[{"type":"Feature","geometry":{"type":"Point","coordinates":[-122.030581,37.3318]},"#
            + #""properties":{"timestamp":"2015-10-01T08:00:00-0700","altitude":12.5,"speed":-1,"#
            + #""horizontal_accuracy":30,"vertical_accuracy":4,"course":-1,"motion":["driving","stationary"],"#
            + #""pauses":false,"battery_level":0.89,"#
            + #""device_id":"","wifi":"home"}}],"current":{"type":"Feature","properties":{}},"trip":{"distance":10}}"#
        let records = try Overland.decode(Array(text.utf8), device: "fallback", now: now)
        #expect(records.count == 1)
        let r = try #require(records.first)
        #expect(r.device == "fallback")
        #expect(r.time == 1_443_711_600)
        #expect(r.altitude == 12.5 && r.verticalAccuracy == 4 && r.horizontalAccuracy == 30)
        #expect(r.speed == nil && r.course == nil)
        #expect(r.attributes == ["pauses": "false", "battery_level": "0.89", "wifi": "home"])
    }

    @Test func whatWeSendReadsBackTheSame() throws {
        var r = TrailRecord(
            device: "van", sequence: 7, time: 1_715_679_000.25, latitude: 48.1372, longitude: 11.5755,
            altitude: 519.5, horizontalAccuracy: 4.5, verticalAccuracy: 3, speed: 1.25, course: 270)
        var transition = r
        transition.kind = .enter
        transition.region = "home"
        let body = Overland.encode(device: "van", records: [r, transition])
        let back = try Overland.decode(body, device: "x", now: now)
        r.sequence = 1
        #expect(back == [r])  // the transition has no Overland form
        #expect(Overland.encode(device: "van", records: back) == Overland.encode(device: "van", records: [r]))
    }

    @Test func acknowledgementIsResultOkOnly() {
        #expect(Overland.isAcknowledgement(Array(#"{"result":"ok"}"#.utf8)))
        #expect(Overland.isAcknowledgement(Array(#" { "saved": 3, "result" : "ok" } "#.utf8)))
        for other in [
            #"{"result":"error"}"#, "{}", "[]", "ok", "", #"{"result":"ok"} x"#, "<html>ok</html>",
            #"{"result":true}"#, #"{"result":"ok""#,
        ] {
            #expect(!Overland.isAcknowledgement(Array(other.utf8)), "\(other)")
        }
    }

    @Test(arguments: [
        ("", "malformed JSON"),
        ("[]", "malformed JSON"),
        ("{}", "locations: missing"),
        (#"{"locations":{}}"#, "malformed JSON"),
        (#"{"locations":[1]}"#, "malformed JSON"),
        (#"{"locations":[{}]}"#, "locations[0].geometry: missing"),
        (#"{"locations":[{"type":"Polygon"}]}"#, "locations[0].type: expected \"Feature\""),
        (
            #"{"locations":[{"geometry":{"type":"LineString","coordinates":[1,2]},"properties":{}}]}"#,
            "locations[0].geometry.type: expected \"Point\""
        ),
        (
            #"{"locations":[{"geometry":{"type":"Point","coordinates":[1]},"properties":{}}]}"#,
            "locations[0].geometry.coordinates: expected [longitude, latitude]"
        ),
        (
            #"{"locations":[{"geometry":{"type":"Point","coordinates":[1,2,3,4]},"properties":{}}]}"#,
            "locations[0].geometry.coordinates"
        ),
        (
            #"{"locations":[{"geometry":{"type":"Point","coordinates":["1","2"]},"properties":{}}]}"#,
            "locations[0].geometry.coordinates"
        ),
        (#"{"locations":[{"geometry":{"type":"Point","coordinates":[1,2]}}]}"#, "locations[0].properties: missing"),
        (
            overlandBody("{}"),
            "locations[0].properties.timestamp: missing"
        ),
        (
            overlandBody(#"{"timestamp":1715679000}"#),
            "timestamp: expected an ISO 8601 string"
        ),
        (
            overlandBody(#"{"timestamp":"yesterday"}"#),
            "'yesterday' is not ISO 8601"
        ),
        (
            overlandBody(#"{"timestamp":"2024-05-14T09:30:00Z"}"#, at: "[1,95]"),
            "locations[0]: lat 95.0 is out of range"
        ),
        (
            overlandBody(#"{"timestamp":"2024-05-14T09:30:00Z","speed":"fast"}"#),
            "locations[0].properties.speed: expected a number"
        ),
        (
            overlandBody(#"{"timestamp":"2124-05-14T09:30:00Z"}"#),
            "is impossible"
        ),
        (#"{"locations":[],"locations":[]}"#, "locations: given twice"),
    ])
    func refusesMalformedBodiesNamingWhere(text: String, message: String) {
        let error = #expect(throws: FormatsError.self) {
            try Overland.decode(Array(text.utf8), device: "d", now: now)
        }
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func refusesTruncatedBodiesByteByByte() throws {
        let whole = body([feature, feature])
        #expect(try Overland.decode(whole, device: "d", now: now).count == 2)
        for n in 0..<whole.count {
            #expect(throws: FormatsError.self) { try Overland.decode(Array(whole.prefix(n)), device: "d", now: now) }
        }
    }

    @Test func refusesMoreLocationsThanTheLimitAsTooLarge() throws {
        let small =
            #"{"geometry":{"type":"Point","coordinates":[1,2]},"properties":{"timestamp":"2024-05-14T09:30:00Z"}}"#
        #expect(
            try Overland.decode(body(Array(repeating: small, count: Overland.maxLocations)), device: "d", now: now)
                .count
                == Overland.maxLocations)
        let error = #expect(throws: FormatsError.self) {
            try Overland.decode(body(Array(repeating: small, count: Overland.maxLocations + 1)), device: "d", now: now)
        }
        #expect(error?.code == .tooLarge)
        // Deep nesting in a skipped member is refused, not recursed into.
        let deep = body([], extra: ",\"trip\":" + String(repeating: "[", count: 100_000))
        #expect(throws: FormatsError.self) { try Overland.decode(deep, device: "d", now: now) }
    }

    @Test func keepsAtMostTheAttributeLimit() throws {
        let many = (0..<200).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let text = overlandBody(#"{"timestamp":"2024-05-14T09:30:00Z","# + many + "}")
        let r = try Overland.decode(Array(text.utf8), device: "d", now: now)
        #expect(r[0].attributes.count == TrailRecord.maxAttributes)
    }
}
