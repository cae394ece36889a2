import Geo

/// The JSON Lines schema of the tracker's events (docs/protocols.md, "Location events"): one object per line,
/// `event` first. Every writer of these lines goes through here, as fixes go through ``FixWriter``.
///
/// ```json
/// {"event":"location","time":"2024-05-14T09:30:02.000Z","lat":48.137,"lon":11.575,"hAcc":9.10,"alt":536.100,"speed":1.2,"course":32.32}
/// {"event":"enter","region":"home","time":"..."}
/// {"event":"background","time":"...","reason":"entered the background","backgroundTimeRemaining":180.000}
/// ```
public enum EventJSON {
    /// `{"event":KIND,"time":...,"lat":...,"lon":...,"hAcc":...,"alt":...,"speed":...,"course":...}`: a
    /// delivered location (`location`) or a significant change (`significant-change`). Invalid
    /// CoreLocation values (−1) are `null`.
    public static func appendLocation(_ kind: StaticString, _ l: Location, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out)
        ByteWriting.appendStatic(kind, to: &out)
        ByteWriting.appendStatic("\",\"time\":\"", to: &out)
        ISOTime.append(l.timestamp, to: &out)
        ByteWriting.appendStatic("\",\"lat\":", to: &out)
        ByteWriting.appendFixed(l.coordinate.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(l.coordinate.longitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"hAcc\":", to: &out)
        ByteWriting.appendFixed(l.horizontalAccuracy, decimals: 2, to: &out)
        ByteWriting.appendStatic(",\"alt\":", to: &out)
        if l.verticalAccuracy >= 0 {
            ByteWriting.appendFixed(l.altitude, decimals: 3, to: &out)
        } else {
            ByteWriting.appendStatic("null", to: &out)
        }
        ByteWriting.appendStatic(",\"speed\":", to: &out)
        if l.speed >= 0 {
            ByteWriting.appendFixed(l.speed, decimals: 3, nullText: "null", to: &out)
        } else {
            ByteWriting.appendStatic("null", to: &out)
        }
        ByteWriting.appendStatic(",\"course\":", to: &out)
        if l.course >= 0 {
            ByteWriting.appendFixed(l.course, decimals: 2, to: &out)
        } else {
            ByteWriting.appendStatic("null", to: &out)
        }
        ByteWriting.appendStatic("}\n", to: &out)
    }

    /// `{"event":KIND,"time":...}` (`updates-paused`, `updates-resumed`).
    public static func appendTimed(_ kind: StaticString, time: Double, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out)
        ByteWriting.appendStatic(kind, to: &out)
        ByteWriting.appendStatic("\",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\"}\n", to: &out)
    }

    /// `{"event":KIND,"region":ID,"time":...}` (`enter`, `exit`, `dwell`).
    public static func appendRegion(_ kind: StaticString, id: String, time: Double, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out)
        ByteWriting.appendStatic(kind, to: &out)
        ByteWriting.appendStatic("\",\"region\":", to: &out)
        ByteWriting.appendJSONString(id, to: &out)
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\"}\n", to: &out)
    }

    /// A one-line object whose values are all strings: `{"k1":"v1","k2":"v2"}` (`state`, `error`,
    /// `source` events).
    public static func appendStringObject(_ pairs: KeyValuePairs<StaticString, String>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, (key, value)) in pairs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            ByteWriting.appendStatic(key, to: &out)
            ByteWriting.appendStatic("\":", to: &out)
            ByteWriting.appendJSONString(value, to: &out)
        }
        ByteWriting.appendStatic("}\n", to: &out)
    }

    /// `{"event":NAME,"time":...,"reason":...[,"backgroundTimeRemaining":S|null]}`: a lifecycle
    /// transition (`background`, `resumed`, `suspended`, `active`, `inactive`, `terminated`). The
    /// remaining time is written when given (`.some(nil)` is unbounded: `null`).
    public static func appendLifecycle(
        _ name: StaticString, time: Double, reason: String,
        backgroundTimeRemaining: Double?? = nil, to out: inout [UInt8]
    ) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out)
        ByteWriting.appendStatic(name, to: &out)
        ByteWriting.appendStatic("\",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\",\"reason\":", to: &out)
        ByteWriting.appendJSONString(reason, to: &out)
        if let remaining = backgroundTimeRemaining {
            ByteWriting.appendStatic(",\"backgroundTimeRemaining\":", to: &out)
            if let remaining {
                ByteWriting.appendFixed(remaining, decimals: 3, to: &out)
            } else {
                ByteWriting.appendStatic("null", to: &out)
            }
        }
        ByteWriting.appendStatic("}\n", to: &out)
    }

    /// `{"event":"visit","time":...,"arrival":...,"departure":...|null,"lat":...,"lon":...,"hAcc":...}`:
    /// a visit (`LocationService`'s `Visit`) at arrival (`departure` null: still there) or at departure,
    /// decided at `time`; `hAcc` is how far its fixes spread, in metres.
    public static func appendVisit(
        time: Double, arrival: Double, departure: Double?, coordinate: Coordinate,
        horizontalAccuracy: Double, to out: inout [UInt8]
    ) {
        ByteWriting.appendStatic("{\"event\":\"visit\",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\",\"arrival\":\"", to: &out)
        ISOTime.append(arrival, to: &out)
        ByteWriting.appendStatic("\",\"departure\":", to: &out)
        ISOTime.appendQuoted(departure, to: &out)
        ByteWriting.appendStatic(",\"lat\":", to: &out)
        ByteWriting.appendFixed(coordinate.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(coordinate.longitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"hAcc\":", to: &out)
        ByteWriting.appendFixed(horizontalAccuracy, decimals: 2, to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
    }

    /// `{"event":"trip","start":...,"end":...,"distance":M,"duration":S,"avgSpeed":M/S,"maxSpeed":M/S,
    /// "startLat":...,"startLon":...,"endLat":...,"endLon":...}`: the trip (`LocationService`'s `Trip`)
    /// an arrival ended, from `start` to `end` (seconds since 1970), `distance` metres long, its
    /// highest speed `maximumSpeed` m/s.
    public static func appendTrip(
        start: Double, end: Double, distance: Double, maximumSpeed: Double,
        from startCoordinate: Coordinate, to endCoordinate: Coordinate,
        to out: inout [UInt8]
    ) {
        let duration = end - start
        ByteWriting.appendStatic("{\"event\":\"trip\",\"start\":\"", to: &out)
        ISOTime.append(start, to: &out)
        ByteWriting.appendStatic("\",\"end\":\"", to: &out)
        ISOTime.append(end, to: &out)
        ByteWriting.appendStatic("\",\"distance\":", to: &out)
        ByteWriting.appendFixed(distance, decimals: 1, to: &out)
        ByteWriting.appendStatic(",\"duration\":", to: &out)
        ByteWriting.appendFixed(duration, decimals: 3, to: &out)
        ByteWriting.appendStatic(",\"avgSpeed\":", to: &out)
        ByteWriting.appendFixed(duration > 0 ? distance / duration : 0, decimals: 3, to: &out)
        ByteWriting.appendStatic(",\"maxSpeed\":", to: &out)
        ByteWriting.appendFixed(maximumSpeed, decimals: 3, to: &out)
        ByteWriting.appendStatic(",\"startLat\":", to: &out)
        ByteWriting.appendFixed(startCoordinate.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"startLon\":", to: &out)
        ByteWriting.appendFixed(startCoordinate.longitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"endLat\":", to: &out)
        ByteWriting.appendFixed(endCoordinate.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"endLon\":", to: &out)
        ByteWriting.appendFixed(endCoordinate.longitude, decimals: 9, to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
    }

    /// `{"event":"expiring","task":NAME,"time":...}`: a background task's expiration handler ran.
    public static func appendExpiring(task: String, time: Double, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"event\":\"expiring\",\"task\":", to: &out)
        ByteWriting.appendJSONString(task, to: &out)
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\"}\n", to: &out)
    }

    /// `{"event":"outbox-evicted","count":N,"byCount":N,"byAge":N}`: the outbox's caps removed records.
    public static func appendOutboxEvicted(count: Int, byCount: Int, byAge: Int, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"event\":\"outbox-evicted\",\"count\":", to: &out)
        ByteWriting.appendInt(Int64(count), to: &out)
        ByteWriting.appendStatic(",\"byCount\":", to: &out)
        ByteWriting.appendInt(Int64(byCount), to: &out)
        ByteWriting.appendStatic(",\"byAge\":", to: &out)
        ByteWriting.appendInt(Int64(byAge), to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
    }
}
