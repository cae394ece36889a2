import Formats
import TrackStore

/// The JSON of devices and positions: `GET /v1/devices/latest`, `GET /v1/positions` and the live
/// stream's snapshot write them alike.
enum FleetJSON {
    /// The devices of `GET /v1/devices/latest` (and of the stream's snapshot), comma-separated:
    /// `{"id","time","lat","lon",...,"points","lastReceived"}` each.
    static func appendDevices(_ devices: [LatestPosition], to out: inout [UInt8]) {
        for (i, d) in devices.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendStatic("{\"id\":", to: &out)
            ByteWriting.appendJSONString(d.device, to: &out)
            appendPosition(
                time: d.time, latitude: d.latitude, longitude: d.longitude, altitude: d.altitude,
                accuracy: d.horizontalAccuracy, speed: d.speed, course: d.course, to: &out)
            ByteWriting.appendStatic(",\"points\":", to: &out)
            ByteWriting.appendInt(Int64(d.points), to: &out)
            ByteWriting.appendStatic(",\"lastReceived\":\"", to: &out)
            ISOTime.append(d.lastReceived, to: &out)
            ByteWriting.appendStatic("\"}", to: &out)
        }
    }

    /// `,"time":ISO,"lat":..,"lon":..` and the optional members.
    static func appendPosition(
        time: Double, latitude: Double, longitude: Double, altitude: Double?,
        accuracy: Double?, speed: Double?, course: Double?, to out: inout [UInt8]
    ) {
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\",\"lat\":", to: &out)
        ByteWriting.appendFixed(latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(longitude, decimals: 7, to: &out)
        // One member at a time, no array of names per position (10,000 of them in devices/latest).
        func member(_ name: StaticString, _ value: Double?) {
            guard let value, value.isFinite else { return }
            ByteWriting.appendStatic(name, to: &out)
            ByteWriting.appendFixed(value, decimals: 2, to: &out)
        }
        member(",\"alt\":", altitude)
        member(",\"accuracy\":", accuracy)
        member(",\"speed\":", speed)
        member(",\"course\":", course)
    }
}
