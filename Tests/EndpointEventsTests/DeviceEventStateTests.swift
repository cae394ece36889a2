import EndpointEvents
import Formats
import Geo
import LocationService
import Testing

/// A device's evaluation as a store runs it, batch by batch: time order whatever the arrival order
/// within the reorder window, late records counted, nothing reported twice, the state kept between
/// batches.
@Suite("Device event state: order, late records, once only")
struct DeviceEventStateTests {
    /// A circle of 100 m at Munich's centre, and a walk through it: 1 record a second from 300 m
    /// west to 300 m east at 2 m/s (enter and exit, a dwell after 30 s inside).
    static let set: GeofenceSet = {
        var r = try! Region(id: "centre", center: munich, radius: 100)
        r.loiteringDelay = 30
        return GeofenceSet([Geofence(region: r)])
    }()

    static func walk(device: String = "van-1") -> [KeyedRecord] {
        (0...300).map { (i: Int) -> KeyedRecord in
            record(Double(i), metres: Double(2 * i - 300), device: device, sequence: Int64(i + 1))
        }
    }

    static func run(_ batches: [[KeyedRecord]], rules: EventRules = EventRules()) -> (
        events: [DeviceEvent], late: Int, state: DeviceEventState
    ) {
        var state = DeviceEventState()
        var events: [DeviceEvent] = []
        var late = 0
        for b in batches {
            let e = state.evaluate(b, device: "van-1", geofences: set, rules: rules)
            events += e.events
            late += e.late
        }
        return (events, late, state)
    }

    @Test func aWalkThroughAGeofenceIsOneEntryOneDwellOneExit() {
        let (events, late, _) = Self.run([Self.walk()])
        #expect(events.map(\.kind) == [.geofenceEnter, .geofenceDwell, .geofenceExit])
        #expect(late == 0)
        // As the device's monitor reports them: the entry when its evidence began (5 m inside the
        // edge, x = -94 at t = 103 s), decided 20 s later.
        #expect(events[0].time == 1_700_000_000 + 103)
        #expect(events[0].decidedAt == 1_700_000_123.0)
        #expect(events[1].time == 1_700_000_000 + 133)
        #expect(events[2].time == 1_700_000_000 + 203)
    }

    @Test(arguments: [1, 7, 50, 301])
    func batchesOfAnySizeGiveTheSameEvents(size: Int) {
        let walk = Self.walk()
        let batches = stride(from: 0, to: walk.count, by: size).map { Array(walk[$0..<min($0 + size, walk.count)]) }
        #expect(Self.run(batches).events == Self.run([walk]).events)
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func recordsOvertakingEachOtherWithinTheWindowGiveTheSameEvents(seed: UInt64) {
        // Batches of 5 whose order is shuffled within runs of 2 batches (10 s: inside the window of
        // 30 s and 16 locations), as uploads in flight at once arrive.
        let walk = Self.walk()
        var batches = stride(from: 0, to: walk.count, by: 5).map { Array(walk[$0..<min($0 + 5, walk.count)]) }
        var random = SeededRandom(seed: seed)
        for start in stride(from: 0, to: batches.count, by: 2) {
            let end = min(start + 2, batches.count)
            batches[start..<end].shuffle(using: &random)
        }
        let shuffled = Self.run(batches)
        let inOrder = Self.run([walk])
        // Each decision once, in the same order; a decision may be made by a later record than in
        // order (one that arrived first), so its id may be that record's.
        #expect(shuffled.events.map(\.kind) == inOrder.events.map(\.kind))
        #expect(Set(shuffled.events.map(\.id)).count == shuffled.events.count)
        #expect(shuffled.late == 0)
        #expect(
            shuffled.state.inside(device: "van-1", geofences: Self.set, rules: EventRules())
                == inOrder.state.inside(device: "van-1", geofences: Self.set, rules: EventRules()))
    }

    @Test func aBatchStoredAgainReportsNothing() {
        var state = DeviceEventState()
        let walk = Self.walk()
        let first = state.evaluate(walk, device: "van-1", geofences: Self.set, rules: EventRules())
        // A store passes only new records; one that passes them again (a retry that raced) still
        // gets nothing twice: those in the window are known, the older ones are late.
        let again = state.evaluate(walk, device: "van-1", geofences: Self.set, rules: EventRules())
        #expect(first.events.count == 3)
        #expect(again.events.isEmpty)
        #expect(again.evaluated == 0)
    }

    @Test func aRecordOlderThanTheWindowIsCountedLateAndNotEvaluated() {
        var state = DeviceEventState()
        let walk = Self.walk()
        // Everything but the entry's evidence (t = 90...140 s) first, then the entry's records.
        let gap = walk.filter { !(90...140).contains($0.record.time - 1_700_000_000) }
        let missing = walk.filter { (90...140).contains($0.record.time - 1_700_000_000) }
        let first = state.evaluate(gap, device: "van-1", geofences: Self.set, rules: EventRules())
        let late = state.evaluate(missing, device: "van-1", geofences: Self.set, rules: EventRules())
        #expect(late.late == missing.count)
        #expect(late.events.isEmpty)
        // Without those records the entry is decided later, from the first evidence it saw.
        #expect(first.events.map(\.kind) == [.geofenceEnter, .geofenceDwell, .geofenceExit])
        #expect(first.events[0].time == 1_700_000_000 + 141)
    }

    @Test func aLatePointThatMovesACrossingDoesNotReportItTwice() {
        // Records every 10 s through the circle; the record that would restart the entry's wait
        // (one in the band at the edge) arrives after the entry was decided.
        let times = Array(stride(from: 0.0, through: 300, by: 10))
        func at(_ t: Double) -> Double { -300 + t * 2 }
        var all: [KeyedRecord] = times.enumerated().map { i, t in record(t, metres: at(t), sequence: Int64(i + 1)) }
        // A record at t = 125 s in the band (98 m west: within the 5 m margin of the edge).
        all.append(record(125, metres: -98, sequence: 1_000))
        let inOrder = all.sorted { $0.record.time < $1.record.time }
        let expected = Self.run([inOrder]).events
        let withoutBand = all.filter { $0.record.sequence != 1_000 }
        var state = DeviceEventState()
        var events = state.evaluate(
            withoutBand.filter { $0.record.time <= 1_700_000_000 + 150 }, device: "van-1",
            geofences: Self.set, rules: EventRules()
        ).events
        // Entered at 110 s (decided at 130 s), dwelt 30 s at 140 s.
        #expect(events.map(\.kind) == [.geofenceEnter, .geofenceDwell])
        // The band record arrives now: the entry is decided again, later (the evidence restarts at
        // 130 s, decided at 150 s; the dwell would come at 160 s), but both were told already.
        events += state.evaluate([all.last!], device: "van-1", geofences: Self.set, rules: EventRules()).events
        events +=
            state.evaluate(
                withoutBand.filter { $0.record.time > 1_700_000_000 + 150 }, device: "van-1",
                geofences: Self.set, rules: EventRules()
            ).events
        #expect(events.map(\.kind) == expected.map(\.kind))
        #expect(events.filter { $0.kind == .geofenceEnter }.count == 1)
    }

    @Test func theStateKeptBetweenBatchesReadsBackAndGoesOnTheSame() throws {
        let walk = Self.walk()
        var kept = DeviceEventState()
        var events = kept.evaluate(Array(walk[0..<115]), device: "van-1", geofences: Self.set, rules: EventRules())
            .events
        let bytes = kept.encoded()
        #expect(bytes.count < 1_500, "the state takes \(bytes.count) bytes")
        var restored = try DeviceEventState(encoded: bytes)
        #expect(restored == kept)
        events +=
            restored.evaluate(Array(walk[115...]), device: "van-1", geofences: Self.set, rules: EventRules()).events
        #expect(events == Self.run([walk]).events)
        #expect(throws: EventsError.self) { try DeviceEventState(encoded: Array("{\"nope\":1".utf8)) }
        // Cut anywhere, or with a byte more, it is refused, never misread.
        for n in 0..<bytes.count {
            #expect(throws: EventsError.self) { try DeviceEventState(encoded: Array(bytes.prefix(n))) }
        }
        #expect(throws: EventsError.self) { try DeviceEventState(encoded: bytes + [0]) }
    }

    @Test func theDevicesOwnRegionAndVisitRecordsAreEventsAsTheyAre() {
        var enter = TrailRecord(
            device: "phone", sequence: 9, kind: .enter, region: "home", time: 1_700_000_100, latitude: 48.1,
            longitude: 11.5)
        enter.decidedAt = 1_700_000_120
        var visit = TrailRecord(
            device: "phone", sequence: 10, kind: .visit, time: 1_700_000_200, latitude: 48.1, longitude: 11.5)
        visit.span = TrailRecord.Span(end: 1_700_003_800)
        var state = DeviceEventState()
        let result = state.evaluate(
            [KeyedRecord(key: "id:phone:10", record: visit), KeyedRecord(key: "id:phone:9", record: enter)],
            device: "phone", geofences: GeofenceSet(), rules: EventRules())
        #expect(result.events.map(\.kind) == [.regionEnter, .visitEnd])
        #expect(result.events[0].subject == "home")
        #expect(result.events[0].decidedAt == 1_700_000_120)
        #expect(result.evaluated == 0)
    }
}
