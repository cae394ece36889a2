import Foundation
import KeepTrackTesting
import Testing

@testable import LocationService

/// `keeptrack regions` as library calls: import, remove, list, state.
@Suite("Region store editing")
struct RegionStoreEditingTests {
    let store = RegionStore(directory: temporaryDirectory("kt-edit") + "/regions")

    func geoJSON(_ circles: [(id: String, radius: Double)]) throws -> String {
        let features = circles.map { c in
            #"{"type":"Feature","id":"\#(c.id)","properties":{"radius":\#(c.radius)},"#
                + #""geometry":{"type":"Point","coordinates":[11.57,48.13]}}"#
        }
        let path = store.directory + "-\(UUID().uuidString).geojson"
        try #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func anImportReplacesTheSameIdInPlaceAndAppendsNewOnes() throws {
        let first = try store.importGeoJSON(file: geoJSON([("a", 100), ("b", 200)]))
        #expect(first == .init(imported: 2, added: 2, total: 2))
        let second = try store.importGeoJSON(file: geoJSON([("c", 50), ("a", 300)]))
        #expect(second == .init(imported: 2, added: 1, total: 3))
        let regions = try store.loadRegions()
        #expect(regions.map(\.id) == ["a", "b", "c"])
        guard case .circle(_, let radius) = regions[0].shape else { Issue.record("a is not a circle"); return }
        #expect(radius == 300)
    }

    @Test func anInvalidRegionImportsNothingAndIsNamed() throws {
        _ = try store.importGeoJSON(file: geoJSON([("a", 100)]))
        #expect(throws: LocationError.self) { try store.importGeoJSON(file: geoJSON([("b", 10), ("bad", -5)])) }
        let path = try geoJSON([("bad", -5)])
        do throws(LocationError) {
            _ = try store.importGeoJSON(file: path)
            Issue.record("imported an invalid region")
        } catch {
            #expect(error.description.contains("nothing imported"), "\(error)")
        }
        #expect(try store.loadRegions().map(\.id) == ["a"])
    }

    /// An id is one region within a file (an import still replaces a stored region of its id).
    @Test func anIdTwiceInOneFileImportsNothingAndNamesBothFeatures() throws {
        _ = try store.importGeoJSON(file: geoJSON([("a", 100)]))
        let twice = try geoJSON([("b", 10), ("a", 20), ("b", 30)])
        do throws(LocationError) {
            _ = try store.importGeoJSON(file: twice)
            Issue.record("imported an id twice")
        } catch {
            #expect(
                error.description.hasSuffix(
                    ": region b: feature 3 has the id of feature 1 (an id is one region) (nothing imported)"),
                "\(error)")
        }
        #expect(try store.loadRegions().map(\.id) == ["a"])
    }

    @Test func removingAnUnknownIdRemovesNothing() throws {
        _ = try store.importGeoJSON(file: geoJSON([("a", 100), ("b", 200)]))
        do throws(LocationError) {
            _ = try store.remove(ids: ["a", "zz"])
            Issue.record("removed despite an unknown id")
        } catch {
            #expect(error.description.contains("zz"))
        }
        #expect(try store.loadRegions().count == 2)
        #expect(try store.remove(ids: ["a"]) == 1)
    }

    @Test func listAndStateLinesAreJSON() throws {
        _ = try store.importGeoJSON(file: geoJSON([("b", 200), ("a", 100)]))
        var bytes: [UInt8] = []
        try store.writeList { bytes += $0 }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix(#"{"region":"a","shape":"circle","lat":48.130000000,"#), "\(lines[0])")
        #expect(lines[0].hasSuffix(#","radius":100.0,"state":"unknown"}"#), "\(lines[0])")
        #expect(
            String(decoding: try store.stateLine(of: "b"), as: UTF8.self) == #"{"region":"b","state":"unknown"}"# + "\n"
        )
        #expect(throws: LocationError.self) { try store.stateLine(of: "nope") }
    }
}
