import Formats
import NIOCore
import PostgresNIO
import TrackServer

/// A batch by `COPY`: the fast path of ``PostgresTrackStore/insert(_:format:received:)``.
///
/// `INSERT ... SELECT ... ON CONFLICT` inserts its rows one at a time; `COPY` hands them to the heap in
/// groups (PostgreSQL's multi-insert), which measured here about a third less PostgreSQL CPU per row
/// (README, "PostgreSQL"). `COPY` knows no `ON CONFLICT`, so it is the path for the usual batch, whose
/// records are all new: the rows go in by key (the order the statement locks them in), the devices'
/// summaries follow in the same transaction, and the whole is committed before the answer. A key
/// that is already stored (a retried batch, or the same batch at another instance at the same time)
/// fails the `COPY` with a unique violation: the transaction is rolled back, nothing of it is kept,
/// and the batch goes through the statement, which tells new records from duplicates.
extension PostgresTrackStore {
    /// Stores `records` (their keys in `keys`) with `COPY`, all of them new, and returns `true`; or
    /// returns `false`, having stored nothing, when one of them is stored already or the batch has a
    /// value the text form can't carry as the statement would (a time outside years 1970–9999).
    func copyBatch(_ records: [TrailRecord], keys: [String], format: String, received: Double) async throws -> Bool {
        guard let rows = CopyRows(records, keys: keys, format: format, received: received) else { return false }
        let summaries = DeviceBatchSummary.of(records)
        do {
            try await client.withConnection { connection in
                try await connection.withTransaction(logger: self.logger) { connection in
                    try await connection.copyFrom(table: "positions", columns: CopyRows.columns, logger: self.logger) {
                        try await $0.write(rows.buffer)
                    }
                    for try await _ in try await connection.execute(UpsertDevices(summaries, received: received),
                                                                     logger: self.logger) {}
                }
            }
            return true
        } catch where ["23505", "40P01", "40001"].contains(Self.sqlState(error)) {
            // A key stored already (23505), or two batches waiting on each other's keys: rolled back.
            return false
        } catch let error as PostgresTransactionError {
            // PostgreSQL's own error, as the statement path throws it (the caller words it).
            throw error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError ?? error
        }
    }

    /// The SQLSTATE of PostgreSQL's error, also when a transaction wraps it.
    static func sqlState(_ error: any Error) -> String? {
        if let error = error as? PSQLError { return error.serverInfo?[.sqlState] }
        if let error = error as? PostgresTransactionError {
            return (error.closureError ?? error.commitError).flatMap { sqlState($0) }
        }
        return nil
    }

    /// The devices' summaries after a batch whose every record was new, as the statement keeps them.
    struct UpsertDevices: PostgresPreparedStatement {
        typealias Row = Int64
        static let name = "keeptrack_upsert_devices_v1"
        static let sql = """
            INSERT INTO devices AS d (id, points, first, last, last_received, latest_time, latest_lat, latest_lon,
                                      latest_alt, latest_h_acc, latest_speed, latest_course)
            SELECT id, n, to_timestamp(first), to_timestamp(last), to_timestamp($12), to_timestamp(latest_time),
                   lat, lon, alt, h_acc, speed, course
            FROM unnest($1::text[], $2::int8[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[],
                        $8::float8[], $9::float8[], $10::float8[], $11::float8[])
                AS t(id, n, first, last, latest_time, lat, lon, alt, h_acc, speed, course)
            ORDER BY id
            \(PostgresTrackStore.devicesConflictSQL)
            RETURNING 1
            """
        let bindings: PostgresBindings

        init(_ summaries: [DeviceBatchSummary], received: Double) {
            var binds = PostgresBindings(capacity: 12)
            binds.append(PostgresArray.texts(summaries.map(\.device)))
            binds.append(PostgresArray.integers(summaries.map { Int64($0.points) }))
            binds.append(PostgresArray.doubles(summaries.map(\.first)))
            binds.append(PostgresArray.doubles(summaries.map(\.last)))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.time }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.latitude }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.longitude }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.altitude }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.horizontalAccuracy }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.speed }))
            binds.append(PostgresArray.doubles(summaries.map { $0.latest?.course }))
            binds.append(received)
            bindings = binds
        }

        func makeBindings() -> PostgresBindings { bindings }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
    }
}

/// What a batch adds to one device's summary: how many points, their first and last time, and the
/// newest valid one (a later record wins a tie, as in the SQLite store).
struct DeviceBatchSummary {
    var device: String
    var points: Int
    var first: Double
    var last: Double
    var latest: TrailRecord?

    /// One per device, in the order the devices first appear.
    static func of(_ records: [TrailRecord]) -> [DeviceBatchSummary] {
        var index: [String: Int] = [:]
        var out: [DeviceBatchSummary] = []
        for r in records {
            let latest = r.valid ? r : nil
            guard let i = index[r.device] else {
                index[r.device] = out.count
                out.append(DeviceBatchSummary(device: r.device, points: 1, first: r.time, last: r.time, latest: latest))
                continue
            }
            out[i].points += 1
            out[i].first = min(out[i].first, r.time)
            out[i].last = max(out[i].last, r.time)
            if r.valid, out[i].latest.map({ $0.time <= r.time }) ?? true { out[i].latest = r }
        }
        return out
    }
}

/// A batch as the rows of `COPY ... FROM STDIN` in its text format: tab-separated columns, `\N` for
/// NULL, backslash escapes in text; times as PostgreSQL's `to_timestamp` would round them; the
/// position as hex EWKB (SRID 4326), which the geography type reads as it reads
/// `ST_SetSRID(ST_MakePoint(lon, lat), 4326)`.
struct CopyRows {
    static let columns = ["key", "device", "seq", "kind", "region", "time", "position", "alt", "h_acc", "v_acc",
                          "speed", "course", "format", "received", "valid", "attributes"]

    var buffer: ByteBuffer

    /// `nil` when a time is outside what the text form here writes (years 1970–9999) or a position is
    /// not finite: the statement then stores the batch, or says what is wrong with it.
    init?(_ records: [TrailRecord], keys: [String], format: String, received: Double) {
        guard let receivedText = Self.timestamp(received) else { return nil }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(records.count * 240)
        // By key, in the byte order of the column's "C" collation: the order the statement locks keys in.
        let order = keys.indices.sorted { keys[$0].utf8.lexicographicallyPrecedes(keys[$1].utf8) }
        for i in order {
            let r = records[i]
            guard let time = Self.timestamp(r.time), r.latitude.isFinite, r.longitude.isFinite else { return nil }
            Self.text(keys[i], &buffer)
            Self.text(r.device, &buffer)
            Self.value(format == "json" ? "\(r.sequence)" : nil, &buffer)
            Self.text(r.kind.rawValue, &buffer)
            Self.value(r.region.map(Self.escaped), &buffer)
            Self.value(time, &buffer)
            Self.point(latitude: r.latitude, longitude: r.longitude, &buffer)
            for v in [r.altitude, r.horizontalAccuracy, r.verticalAccuracy, r.speed, r.course] {
                Self.value(v.map { "\($0)" }, &buffer)
            }
            Self.text(format, &buffer)
            Self.value(receivedText, &buffer)
            Self.value(r.valid ? "t" : "f", &buffer)
            Self.value(TrailRecord.attributesJSON(r.attributes).map(Self.escaped), &buffer, last: true)
        }
        self.buffer = buffer
    }

    static func value(_ text: String?, _ buffer: inout ByteBuffer, last: Bool = false) {
        if let text { buffer.writeString(text) } else { buffer.writeStaticString("\\N") }
        buffer.writeInteger(last ? UInt8(ascii: "\n") : UInt8(ascii: "\t"))
    }

    static func text(_ text: String, _ buffer: inout ByteBuffer) {
        value(escaped(text), &buffer)
    }

    /// COPY's text escapes: a backslash, tab, newline or carriage return would end or change a field.
    static func escaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x5C || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Hex EWKB of a point with SRID 4326: byte order, type (point with an SRID), the SRID, x, y.
    static func point(latitude: Double, longitude: Double, _ buffer: inout ByteBuffer) {
        buffer.writeStaticString("0101000020E6100000")
        let digits = Array("0123456789ABCDEF".utf8)
        for v in [longitude, latitude] {
            var bits = v.bitPattern
            for _ in 0..<8 {
                let byte = UInt8(truncatingIfNeeded: bits)
                buffer.writeInteger(digits[Int(byte >> 4)])
                buffer.writeInteger(digits[Int(byte & 0xF)])
                bits >>= 8
            }
        }
        buffer.writeInteger(UInt8(ascii: "\t"))
    }

    /// `to_timestamp(seconds)` as text, to the microsecond PostgreSQL rounds it to: it moves the value
    /// to its own epoch (2000-01-01) first, then rounds seconds × 10⁶ half to even, as done here.
    /// `nil` outside years 1970–9999.
    static func timestamp(_ seconds: Double) -> String? {
        guard seconds.isFinite, seconds >= 0, seconds < 253_402_300_800 else { return nil }
        let sincePostgresEpoch = ((seconds - 946_684_800) * 1_000_000).rounded(.toNearestOrEven)
        let micros = Int64(sincePostgresEpoch) + 946_684_800_000_000
        let (days, inDay) = micros.quotientAndRemainder(dividingBy: 86_400_000_000)
        // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm; days >= 0 here).
        let z = days + 719_468
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        let second = inDay / 1_000_000, fraction = inDay % 1_000_000
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2)) \(pad(second / 3600, 2)):\(pad(second / 60 % 60, 2))"
            + ":\(pad(second % 60, 2)).\(pad(fraction, 6))+00"
    }
}
