import EndpointEvents
import Foundation
import Formats
import Geo
import KeepTrackTesting
import LocationService
import Testing

/// The endpoint's geofences decide what the device's own monitor decides on the same trail: the
/// same entries, exits and dwells at the same times (issue 37's first "done when").
@Suite("Geofences: the device's region rules, on the endpoint")
struct GeofenceEquivalenceTests {
    /// The fixture's regions, a polygon around the first of them and a dwell on the second.
    static func regions(_ name: String) throws -> [Region] {
        var out = try RegionDefinition.parseGeoJSON(try fixtureBytes("\(name).regions.geojson")).map { try Region($0) }
        if case .circle(let c, let r) = out[0].shape {
            let ring = [45.0, 135, 225, 315].map { Geodesy.destination(from: c, bearing: $0, distance: r * 1.5) }
            out.append(try Region(id: "square-\(out[0].id)", ring: ring))
        }
        if out.count > 1 { out[1].loiteringDelay = 120 }
        return out
    }

    static func truthSeconds(_ iso: String) -> Double {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: iso)!.timeIntervalSince1970
    }

    @Test(arguments: ["walk-15min", "day-24h"])
    func eachLocationDecidesOnTheEndpointWhatItDecidesOnTheDevice(_ name: String) throws {
        let locations = try fixtureLocations(name == "day-24h" ? "day-24h.nmea.gz" : "\(name).nmea")
        let regions = try Self.regions(name)
        var monitor = RegionMonitor()
        for r in regions { monitor.add(r) }
        let set = GeofenceSet(regions.map { Geofence(region: $0) })
        var state = GeofenceState()
        var compared = 0
        var differences: [String] = []
        for l in locations {
            let device = transitions(monitor.process(l)).sorted()
            let server = transitions(
                state.evaluate(
                    latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: l.horizontalAccuracy,
                    time: l.timestamp, device: "van-1", in: set)
            ).sorted()
            compared += device.count
            if device != server && differences.count < 5 {
                differences.append("at \(l.timestamp): \(device) vs \(server)")
            }
        }
        #expect(differences.isEmpty, "\(differences)")
        #expect(compared >= (name == "day-24h" ? 12 : 5), "only \(compared) transitions: the trail proves little")
        #expect(Set(state.inside) == Set(regions.map(\.id).filter { monitor.state(for: $0) == .inside }))
    }

    /// The whole server path (records in batches of 60, keyed, through the reorder window) against
    /// the fixture's true crossings: one enter and one exit per crossing, each within the device's
    /// hysteresis of the truth, and the device's own events alike.
    @Test func aDayOfBatchesGivesEveryCrossingOnceAtItsTime() throws {
        let locations = try fixtureLocations("day-24h.nmea.gz")
        let regions = try RegionDefinition.parseGeoJSON(try fixtureBytes("day-24h.regions.geojson")).map {
            try Region($0)
        }
        let set = GeofenceSet(regions.map { Geofence(region: $0) })
        var monitor = RegionMonitor()
        for r in regions { monitor.add(r) }
        var device: [String] = []
        for l in locations { device += transitions(monitor.process(l)) }
        var state = DeviceEventState()
        var events: [DeviceEvent] = []
        let records = keyed(locations)
        for start in stride(from: 0, to: records.count, by: 60) {
            let batch = Array(records[start..<min(start + 60, records.count)])
            events += state.evaluate(batch, device: "van-1", geofences: set, rules: EventRules()).events
        }
        #expect(transitions(events).sorted() == device.sorted())
        #expect(Set(events.map(\.id)).count == events.count, "an id given twice")
        struct Truth: Decodable {
            struct Region: Decodable {
                struct Event: Decodable {
                    var kind: String
                    var time: String
                }
                var id: String
                var events: [Event]
            }
            var regions: [Region]
        }
        let truth = try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("day-24h.truth.json"))))
        for region in truth.regions {
            let mine = events.filter { $0.subject == region.id }
            #expect(
                mine.map(\.kind.rawValue)
                    == region.events.map { "geofence" + $0.kind.prefix(1).uppercased() + $0.kind.dropFirst() })
            for (event, expected) in zip(mine, region.events) {
                // When the evidence began: after the true crossing by the margin, within the 20 s hold.
                let delay = event.time - Self.truthSeconds(expected.time)
                #expect(delay > -5 && delay < 20, "\(region.id) \(event.kind): \(delay) s from the truth")
                #expect(event.decidedAt! >= event.time + 20, "decided before the evidence held 20 s")
            }
        }
    }

    /// With 10,000 geofences around (the city's and the world's), the endpoint still decides what a
    /// device monitoring all of them decides.
    @Test func tenThousandGeofencesDecideAsTheDeviceDoes() throws {
        let locations = try fixtureLocations("walk-15min.nmea")
        var regions = try Self.regions("walk-15min")
        var random = SeededRandom(seed: 37)
        let start = locations[0].coordinate
        for i in 0..<10_000 {
            let center =
                i < 1_000
                ? Geodesy.destination(
                    from: start, bearing: Double.random(in: 0..<360, using: &random),
                    distance: Double.random(in: 0..<3_000, using: &random))
                : Coordinate(
                    latitude: Double.random(in: -60..<60, using: &random),
                    longitude: Double.random(in: -180..<180, using: &random))
            regions.append(try Region(id: "r\(i)", center: center, radius: Double.random(in: 30..<300, using: &random)))
        }
        var monitor = RegionMonitor()
        for r in regions { monitor.add(r) }
        let set = GeofenceSet(regions.map { Geofence(region: $0) })
        var state = GeofenceState()
        var device: [String] = []
        var server: [String] = []
        for l in locations {
            device += transitions(monitor.process(l)).sorted()
            server += transitions(
                state.evaluate(
                    latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: l.horizontalAccuracy,
                    time: l.timestamp, device: "van-1", in: set)
            ).sorted()
        }
        #expect(device.count > 10)
        #expect(server == device)
        #expect(state.watchedCount < 50, "the state keeps \(state.watchedCount) watches: not small")
    }
}
