import Foundation
import KeepTrackTesting
import Testing

/// `keeptrack replay --visits` end to end on the visits-night fixture, against its truth.
@Suite("keeptrack replay --visits", .offThePool)
struct VisitsCommandTests {
    struct Truth: Decodable {
        struct Visit: Decodable {
            var arrival: String
            var departure: String?
            var lat: Double
            var lon: Double
        }
        var visits: [Visit]
        var trips: [[String: JSONValue]]
    }

    /// Any JSON value (the truth's trips are only counted here).
    struct JSONValue: Decodable {
        init(from decoder: any Decoder) throws {}
    }

    static func seconds(_ iso: String) -> Double {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: iso)!.timeIntervalSince1970
    }

    /// Metres between two coordinates (equirectangular: enough for tens of metres).
    static func metres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let k = Double.pi / 180
        let x = (lon2 - lon1) * k * cos((lat1 + lat2) / 2 * k), y = (lat2 - lat1) * k
        return 6_371_008.8 * (x * x + y * y).squareRoot()
    }

    @Test func visitsNightGivesEveryVisitAndTripOfItsTruth() throws {
        let truth = try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("visits-night.truth.json"))))
        let r = try keeptrack(["replay", "--visits", "fixtures/visits-night.nmea.gz"])
        #expect(r.status == 0, "\(r.stderr)")
        var visits: [[String: Any]] = [], trips: [[String: Any]] = []
        var order: [String] = []
        for line in r.stdout.split(separator: "\n")
        where line.hasPrefix("{\"event\":\"visit\"") || line.hasPrefix("{\"event\":\"trip\"") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let event = try #require(object["event"] as? String)
            if event == "visit" { visits.append(object) } else { trips.append(object) }
            order.append(event == "trip" ? "trip" : object["departure"] is NSNull ? "arrival" : "departure")
        }
        // 4 arrivals, 3 departures, 3 trips; the last visit still open at the end of the log.
        #expect(
            order == [
                "arrival", "departure", "trip", "arrival", "departure", "trip", "arrival", "departure",
                "trip", "arrival",
            ])
        try #require(truth.visits.count == 4 && truth.trips.count == 3)
        let arrivals = visits.filter { $0["departure"] is NSNull }
        let departures = visits.filter { !($0["departure"] is NSNull) }
        try #require(arrivals.count == 4 && departures.count == 3 && trips.count == 3)
        #expect(truth.visits.last?.departure == nil)

        for (i, expected) in truth.visits.enumerated() {
            let arrival = try #require(arrivals[i]["arrival"] as? String)
            #expect(abs(Self.seconds(arrival) - Self.seconds(expected.arrival)) <= 120, "visit \(i) arrival \(arrival)")
            let lat = try #require(arrivals[i]["lat"] as? Double), lon = try #require(arrivals[i]["lon"] as? Double)
            #expect(Self.metres(lat, lon, expected.lat, expected.lon) <= 60, "visit \(i) centre")
            #expect(arrivals[i]["hAcc"] is Double && arrivals[i]["time"] is String)
            guard let truthDeparture = expected.departure else { continue }
            // The departure line repeats the arrival and adds the departure.
            #expect(departures[i]["arrival"] as? String == arrival)
            let departure = try #require(departures[i]["departure"] as? String)
            #expect(abs(Self.seconds(departure) - Self.seconds(truthDeparture)) <= 120, "visit \(i) departure")
            // A trip runs from this departure to the next arrival.
            #expect(trips[i]["start"] as? String == departure)
            #expect(trips[i]["end"] as? String == arrivals[i + 1]["arrival"] as? String)
            for key in ["distance", "duration", "avgSpeed", "maxSpeed", "startLat", "startLon", "endLat", "endLon"] {
                #expect(trips[i][key] is Double, "trip \(i) \(key)")
            }
        }
    }

    @Test func visitOptionsWithoutVisitsAreRefusedNamingTheFlag() throws {
        let r = try keeptrack(["replay", "--visit-radius", "40", "fixtures/walk-15min.nmea"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--visit-radius goes with --visits."), "\(r.stderr)")
        let zero = try keeptrack(["replay", "--visits", "--visit-gap", "0", "fixtures/walk-15min.nmea"])
        #expect(zero.status == 64)
        #expect(zero.stderr.contains("--visit-gap must be more than 0s."), "\(zero.stderr)")
    }
}
