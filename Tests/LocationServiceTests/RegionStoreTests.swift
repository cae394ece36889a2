import Foundation
import Geo
import KeepTrackTesting
import Testing

@testable import LocationService

@Suite("Region persistence")
struct RegionStoreTests {
    func tempStore() throws -> RegionStore {
        RegionStore(directory: try TemporaryDirectory("kt-store").path + "/regions")
    }

    @Test func regionsAndTheirStatesSurviveARestart() throws {
        let store = try tempStore()
        var square = try Region(
            id: "square",
            ring: [
                Coordinate(latitude: 48.13, longitude: 11.57), Coordinate(latitude: 48.13, longitude: 11.58),
                Coordinate(latitude: 48.14, longitude: 11.58), Coordinate(latitude: 48.14, longitude: 11.57),
            ])
        square.loiteringDelay = 60
        var home = circle("home")
        home.notifyOnExit = false
        try store.saveRegions([home, square, circle("far", at: Coordinate(latitude: 0, longitude: 0))])

        var first = try store.loadMonitor()
        #expect(first.count == 3)
        #expect(first.state(for: "home") == .unknown)
        // Stand at the origin: inside home, outside the others.
        for t in 0..<30 { _ = first.process(at(Double(t))) }
        #expect(first.state(for: "home") == .inside)
        try store.saveStates(of: first)

        // A new process: same regions, same states, no state events for settled regions.
        var second = try store.loadMonitor()
        #expect(second.regions.map(\.id).sorted() == ["far", "home", "square"])
        #expect(second.regions.first { $0.id == "square" }?.loiteringDelay == 60)
        #expect(second.regions.first { $0.id == "home" }?.notifyOnExit == false)
        #expect(second.state(for: "home") == .inside)
        #expect(second.state(for: "far") == .outside)
        #expect(second.process(at(40)).isEmpty)
    }

    @Test func saysWhichFileIsBroken() throws {
        let store = try tempStore()
        try FileManager.default.createDirectory(atPath: store.directory, withIntermediateDirectories: true)
        try Data("[{\"id\":\"x\"}]".utf8).write(to: URL(fileURLWithPath: store.directory + "/regions.json"))
        do {
            _ = try store.loadRegions()
            Issue.record("a broken regions.json was accepted")
        } catch {
            #expect(error.description.contains("regions.json"))
        }
    }

    @Test func anEmptyStoreHasNoRegions() throws {
        #expect(try tempStore().loadRegions().isEmpty)
    }
}

@Suite("Region persistence: the files")
struct RegionStoreFileTests {
    func tempStore() -> RegionStore {
        RegionStore(directory: temporaryDirectory("kt-store") + "/regions")
    }

    @Test func readsTheFilesTheFormerEncoderWrote() throws {
        let store = tempStore()
        try FileManager.default.createDirectory(atPath: store.directory, withIntermediateDirectories: true)
        try Data(
            #"[{"id":"a","lat":48.1,"lon":11.5,"notifyOnEntry":true,"notifyOnExit":false,"radius":50},{"dwell":60,"id":"b","notifyOnEntry":true,"notifyOnExit":true,"ring":[[48.13,11.57],[48.13,11.58],[48.14,11.58]]}]"#
                .utf8
        )
        .write(to: URL(fileURLWithPath: store.directory + "/regions.json"))
        try Data(#"{"inside":[{"dwellReported":false,"enteredAt":1715679000,"id":"a"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: store.directory + "/region-states.json"))
        let regions = try store.loadRegions()
        #expect(regions.map(\.id) == ["a", "b"])
        #expect(regions[0].notifyOnExit == false)
        #expect(regions[1].loiteringDelay == 60)
        let monitor = try store.loadMonitor()
        #expect(monitor.state(for: "a") == .inside)
        #expect(monitor.state(for: "b") == .outside)
        #expect(monitor.insideRegions.first?.enteredAt == 1_715_679_000)
    }

    @Test func numbersSurviveARoundTripExactly() throws {
        let store = tempStore()
        let regions = (0..<200).map { i in
            circle(
                "c\(i)", radius: 10 + Double(i) / 7,
                at: Coordinate(
                    latitude: 48.137 + Double(i) * 1e-7 / 3,
                    longitude: -179.9 + Double(i) * 0.123456789))
        }
        try store.saveRegions(regions)
        #expect(try store.loadRegions() == regions)
    }

    @Test func answersASavedStateByID() throws {
        let store = tempStore()
        try store.saveRegions([circle("home"), circle("far", at: Coordinate(latitude: 0, longitude: 0))])
        #expect(try store.savedState(of: "home") == .unknown)
        #expect(try store.savedState(of: "nowhere") == nil)
        var monitor = try store.loadMonitor()
        _ = monitor.process(at(0))
        try store.saveStates(of: monitor)
        #expect(try store.savedState(of: "home") == .inside)
        #expect(try store.savedState(of: "far") == .outside)
    }
}
