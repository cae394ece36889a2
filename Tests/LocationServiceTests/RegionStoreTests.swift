import Foundation
import Geo
import Testing

@testable import LocationService

@Suite("Region persistence")
struct RegionStoreTests {
    func tempStore() throws -> RegionStore {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kt-store-\(UUID().uuidString)")
        return RegionStore(directory: dir.path)
    }

    @Test func regionsAndTheirStatesSurviveARestart() throws {
        let store = try tempStore()
        var square = try Region(id: "square", ring: [
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
