import EndpointEvents
import Formats
import Geo
import KeepTrackTesting
import LocationService
import Testing

/// The geofence document: what `keeptrack regions import` reads plus the devices, taken whole or
/// refused whole, with every problem named by feature; hostile documents refused within bounds.
@Suite("Geofence document")
struct GeofenceDocumentTests {
    static func parse(_ text: String, limits: GeofenceDocument.Limits = .init()) throws(EventsError) -> [Geofence] {
        try GeofenceDocument.parse(Array(text.utf8), limits: limits)
    }

    static func feature(_ id: String, _ geometry: String, _ properties: String = "") -> String {
        #"{"type":"Feature","id":"\#(id)","geometry":\#(geometry),"properties":{\#(properties)}}"#
    }

    static func collection(_ features: [String]) -> String {
        #"{"type":"FeatureCollection","features":["# + features.joined(separator: ",") + "]}"
    }

    static let point = #"{"type":"Point","coordinates":[11.5755,48.1372]}"#
    static let square =
        #"{"type":"Polygon","coordinates":[[[11.50,48.10],[11.52,48.10],[11.52,48.12],[11.50,48.12],[11.50,48.10]]]}"#

    @Test func readsCirclesAndPolygonsWithTheirDevicesAndWritesThemBack() throws {
        let text = Self.collection([
            Self.feature("depot", Self.point, #""radius":150,"dwell":300,"devices":["van-1","van-2"]"#),
            Self.feature("yard", Self.square, #""notifyOnExit":false"#),
        ])
        let geofences = try Self.parse(text)
        #expect(geofences.map(\.name) == ["depot", "yard"])
        #expect(geofences[0].devices == ["van-1", "van-2"])
        #expect(geofences[0].region.loiteringDelay == 300)
        #expect(geofences[1].devices == nil)
        #expect(geofences[1].region.notifyOnExit == false)
        #expect(geofences[0].applies(to: "van-2") && !geofences[0].applies(to: "van-3"))
        #expect(geofences[1].applies(to: "anyone"))
        #expect(try GeofenceDocument.parse(GeofenceDocument.geoJSON(geofences)) == geofences)
        #expect(try GeofenceDocument.parse(GeofenceDocument.feature(geofences[1])) == [geofences[1]])
    }

    @Test func theRegionFixturesReadAsGeofences() throws {
        for name in ["walk-15min", "day-24h", "drive-1h"] {
            let geofences = try GeofenceDocument.parse(try fixtureBytes("\(name).regions.geojson"))
            #expect(!geofences.isEmpty)
        }
    }

    @Test func everyInvalidGeofenceIsNamedAndNothingIsTaken() {
        let text = Self.collection([
            Self.feature("ok", Self.point, #""radius":50"#),
            Self.feature(
                "bow", #"{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}"#),
            Self.feature("north", #"{"type":"Point","coordinates":[0,91]}"#, #""radius":50"#),
            Self.feature("ok", Self.point, #""radius":60"#),
            Self.feature("lazy", Self.point, #""radius":50,"dwell":-1"#),
            Self.feature("nobody", Self.point, #""radius":50,"devices":[]"#),
            Self.feature("ctl", Self.point, #""radius":50,"devices":["van\u0001"]"#),
            Self.feature("huge", Self.point, #""radius":2000000"#),
        ])
        do throws(EventsError) {
            _ = try Self.parse(text)
            Issue.record("an invalid document was taken")
        } catch {
            #expect(error.code == .invalidGeofences)
            #expect(error.failures.map(\.feature) == [2, 3, 4, 5, 6, 7, 8])
            #expect(error.failures.map(\.geofence) == ["bow", "north", "ok", "lazy", "nobody", "ctl", "huge"])
            let text = error.description
            #expect(text.contains("feature 2 (bow): the polygon intersects itself (edge 0 crosses edge 2)"), "\(text)")
            #expect(text.contains("feature 4 (ok): the id is feature 1's too"), "\(text)")
            #expect(text.contains("nothing stored"))
            // Positions are never quoted.
            #expect(!text.contains("11.5755") && !text.contains("91"))
        }
    }

    @Test(arguments: [
        ("NaN", #"[NaN,48.1]"#, EventsError.Code.invalidDocument),
        ("infinite", #"[1e999,48.1]"#, .invalidDocument),
        ("text", #"["11.5","48.1"]"#, .invalidDocument),
    ])
    func numbersThatAreNoCoordinatesAreRefused(_ what: String, _ coordinates: String, _ code: EventsError.Code) {
        let text = Self.feature("x", #"{"type":"Point","coordinates":\#(coordinates)}"#, #""radius":5"#)
        do throws(EventsError) {
            _ = try Self.parse(text)
            Issue.record("\(what) was taken")
        } catch {
            #expect(error.code == code, "\(what): \(error)")
        }
    }

    @Test func aDocumentOfTenMillionVerticesIsRefusedAtItsFirstBound() throws {
        // The most compact form (6 bytes a vertex): 60 MB, under the 64 MiB byte bound, so the
        // vertex bound of one polygon is what stops it, a little past its 10,000th vertex (as many
        // values as 10,000 vertices with altitudes), without reading on.
        let vertices = 10_000_000
        var bytes = Array(
            #"{"type":"Feature","id":"big","properties":{},"geometry":{"type":"Polygon","coordinates":[["#.utf8)
        bytes.reserveCapacity(vertices * 6 + 100)
        for _ in 0..<vertices { bytes += Array("[0,0],".utf8) }
        bytes.removeLast()
        bytes += Array("]]}}".utf8)
        #expect(bytes.count < GeofenceDocument.Limits().bytes)
        do throws(EventsError) {
            _ = try GeofenceDocument.parse(bytes)
            Issue.record("ten million vertices were taken")
        } catch {
            #expect(error.code == .tooLarge)
            #expect(error.description.contains("feature 1: more coordinates than 10000 vertices"), "\(error)")
            // It stopped near the bound, not at the end: the offset is where it gave up.
            #expect(error.byteOffset! < 14_000 * 6 + 200)
        }
    }

    @Test func theBoundsAreEachSaid() {
        var limits = GeofenceDocument.Limits()
        limits.geofences = 2
        limits.vertices = 7
        limits.devicesPerGeofence = 2
        limits.bytes = 2_000
        let circle = Self.feature("a", Self.point, #""radius":5"#)
        func refused(_ text: String, _ expected: String) {
            do throws(EventsError) {
                _ = try Self.parse(text, limits: limits)
                Issue.record("taken: \(expected)")
            } catch {
                #expect(error.code == .tooLarge)
                #expect(error.description.contains(expected), "\(error)")
            }
        }
        refused(Self.collection([circle, circle, circle]), "more than 2 features")
        refused(
            Self.collection([Self.feature("a", Self.square), Self.feature("b", Self.square)]),
            "feature 2 (b): more than 7 vertices in all")
        refused(Self.feature("a", Self.point, #""radius":5,"devices":["a","b","c"]"#), "feature 1: more than 2 devices")
        refused(String(repeating: " ", count: 2_001), "more than 2000")
    }

    @Test func whatIsNoGeofenceDocumentIsRefusedWithWhere() {
        for (text, expected) in [
            ("", "not valid JSON"),
            (#"{"type":"FeatureCollection"}"#, "without features"),
            (
                #"{"type":"Feature","id":"x","geometry":{"type":"LineString","coordinates":[[0,0],[1,1]]}}"#,
                "not supported"
            ),
            (Self.feature("x", Self.point), "radius"),
            (Self.feature("x", Self.point, #""radius":5,"devices":"van-1""#), "must be an array"),
        ] {
            do throws(EventsError) {
                _ = try Self.parse(text)
                Issue.record("taken: \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }
}
