import EndpointEvents
import Formats
import Geo
import KeepTrackTesting
import LocationService
import NMEA

/// A fixture's locations, every fix with a position and an accuracy (what a device's monitor sees
/// and what it uploads at one location per fix).
func fixtureLocations(_ name: String) throws -> [Location] {
    var decoder = NMEADecoder()
    var out: [Location] = []
    try decoder.decodeFile(fixturePath(name)) { fix in
        if let l = Location(fix), l.horizontalAccuracy >= 0 { out.append(l) }
    }
    return out
}

/// Records of `device` for `locations`, keyed as our JSON batch is (`id:DEVICE:SEQ`).
func keyed(_ locations: [Location], device: String = "van-1", firstSequence: Int64 = 1) -> [KeyedRecord] {
    locations.enumerated().map { i, l in
        let r = TrailRecord(device: device, sequence: firstSequence + Int64(i), location: l)
        return KeyedRecord(key: "id:\(device):\(r.sequence)", record: r)
    }
}

/// A location `metres` east of `center` (west when negative), at `t`.
func located(_ t: Double, _ center: Coordinate, metres: Double, accuracy: Double = 5) -> Location {
    Location(
        coordinate: Geodesy.destination(from: center, bearing: metres >= 0 ? 90 : 270, distance: abs(metres)),
        horizontalAccuracy: accuracy, timestamp: t)
}

let munich = Coordinate(latitude: 48.1372, longitude: 11.5755)

/// A record of `device` at `metres` east of `munich`, at `t`.
func record(
    _ t: Double, metres: Double, device: String = "van-1", sequence: Int64, speed: Double? = nil,
    battery: String? = nil
) -> KeyedRecord {
    var r = TrailRecord(
        device: device, sequence: sequence, location: located(1_700_000_000 + t, munich, metres: metres))
    r.speed = speed
    if let battery { r.attributes["batt"] = battery }
    return KeyedRecord(key: "id:\(device):\(sequence)", record: r)
}

/// The enter, exit and dwell events of a monitor's list, as (kind, region, time).
func transitions(_ events: [RegionMonitor.Event]) -> [String] {
    events.compactMap { e in
        switch e {
        case .enter(let id, let t): "enter \(id) \(t)"
        case .exit(let id, let t): "exit \(id) \(t)"
        case .dwell(let id, let t): "dwell \(id) \(t)"
        case .state: nil
        }
    }
}

/// The same of endpoint events.
func transitions(_ events: [DeviceEvent]) -> [String] {
    events.compactMap { e in
        switch e.kind {
        case .geofenceEnter: "enter \(e.subject!) \(e.time)"
        case .geofenceExit: "exit \(e.subject!) \(e.time)"
        case .geofenceDwell: "dwell \(e.subject!) \(e.time)"
        default: nil
        }
    }
}
