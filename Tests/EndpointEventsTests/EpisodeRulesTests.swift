import EndpointEvents
import Formats
import Testing

/// Overspeed and low battery: one event per episode, with hysteresis; battery levels as each
/// format carries them.
@Suite("Overspeed and low battery")
struct EpisodeRulesTests {
    @Test func overspeedIsOneEventPerEpisode() {
        let rule = OverspeedRule(limit: 25)
        var state = OverspeedRule.State()
        // Hovering about the limit (24 to 26 m/s) is one episode: the speed never falls to 22.5.
        let speeds: [Double?] = [20, 26, 24, 26, 25.5, nil, 23, 26, 22.5, 24, 27, 30]
        let events = speeds.enumerated().compactMap { i, v in rule.evaluate(speed: v, time: Double(i), state: &state) }
        #expect(events == [26, 27])
    }

    @Test func overspeedCanWaitForAMinimumDuration() {
        let rule = OverspeedRule(limit: 25, minimumDuration: 10)
        var state = OverspeedRule.State()
        // A 5 s burst is no episode; a 10 s one is, reported at its 10th second.
        var events: [(Double, Double)] = []
        for (t, v) in [(0.0, 30.0), (5, 30), (6, 20), (20, 26), (25, 27), (30, 28), (31, 29)] {
            if let s = rule.evaluate(speed: v, time: t, state: &state) { events.append((t, s)) }
        }
        #expect(events.map(\.0) == [30])
        #expect(events.map(\.1) == [28])
    }

    @Test func lowBatteryIsOneEventUntilCharged() {
        let rule = BatteryRule(threshold: 20, rearm: 25)
        var state = BatteryRule.State()
        let levels: [Double?] = [50, 21, 20, 19, nil, 18, 24, 22, 19, 30, 20, 5]
        let events = levels.compactMap { rule.evaluate(level: $0, state: &state) }
        #expect(events == [20, 20])
    }

    @Test func theBatteryLevelIsReadAsEachFormatCarriesIt() throws {
        let now = 1_700_000_100.0
        let ownTracks = try OwnTracks.decode(
            Array(#"{"_type":"location","tst":1700000000,"lat":48.1,"lon":11.5,"acc":5,"batt":17}"#.utf8),
            device: "phone", now: now)
        #expect(ownTracks?.batteryPercent == 17)
        let osmAnd = try OsmAnd.decode("id=van&lat=48.1&lon=11.5&timestamp=1700000000&batt=64.5", now: now)
        #expect(osmAnd.batteryPercent == 64.5)
        let traccar = try OsmAnd.decodeJSON(
            Array(
                #"{"device_id":"van","location":{"timestamp":"2023-11-14T22:13:20Z","coords":{"latitude":48.1,"longitude":11.5},"battery":{"level":0.42,"is_charging":false}}}"#
                    .utf8), now: now)
        #expect(traccar.batteryPercent == 42)
        let overland = try Overland.decode(
            Array(
                #"{"locations":[{"type":"Feature","geometry":{"type":"Point","coordinates":[11.5,48.1]},"properties":{"timestamp":"2023-11-14T22:13:20Z","battery_level":0.15,"battery_state":"unplugged"}}]}"#
                    .utf8), device: "bike", now: now)
        #expect(overland.first?.batteryPercent == 15)
        // No level, or one that is not a level.
        #expect(TrailRecord(device: "x", sequence: 1, time: now, latitude: 0, longitude: 0).batteryPercent == nil)
        var odd = TrailRecord(device: "x", sequence: 1, time: now, latitude: 0, longitude: 0)
        odd.attributes["battery_level"] = "-1"
        #expect(odd.batteryPercent == nil)
    }

    @Test func overspeedAndBatteryComeThroughTheDeviceState() {
        var rules = EventRules()
        rules.overspeed = OverspeedRule(limit: 30)
        var state = DeviceEventState()
        let records = [
            record(0, metres: 0, sequence: 1, speed: 10, battery: "40"),
            record(1, metres: 20, sequence: 2, speed: 31, battery: "21"),
            record(2, metres: 50, sequence: 3, speed: 32, battery: "19"),
            record(3, metres: 80, sequence: 4, speed: 20, battery: "18"),
        ]
        let events = state.evaluate(records, device: "van-1", geofences: GeofenceSet(), rules: rules).events
        #expect(events.map(\.kind) == [.overspeed, .lowBattery])
        #expect(events[0].details == .overspeed(speed: 31, limit: 30))
        #expect(events[1].details == .battery(level: 19, threshold: 20))
        #expect(events[1].time == records[2].record.time)
    }
}
