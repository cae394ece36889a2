import Formats
import Geo
import Logging
import NIOCore
import PostgresNIO
import TrackServer

/// A batch by `COPY`: the fast path of ``PostgresTrackStore/insert(_:format:received:)``.
///
/// `INSERT ... SELECT ... ON CONFLICT` inserts its rows one at a time; `COPY` hands them to the heap in
/// groups (PostgreSQL's multi-insert), which measured here about a third less PostgreSQL CPU per row
/// (README, "PostgreSQL"). `COPY` knows no `ON CONFLICT`, so it is the path for the usual batch, whose
/// records are all new: the rows go in by key (the order the statement locks them in), the trigger
/// `positions_devices` adds them to their devices' summaries in the same transaction, and the one
/// statement is committed before its answer, as the statement's is. A key that is already stored (a
/// retried batch, or the same batch at another instance at the same time) fails the `COPY` with a
/// unique violation: nothing of it is kept, and the batch goes through the statement, which tells
/// new records from duplicates.
extension PostgresTrackStore {
    /// Stores `records` (their keys in `keys`) with `COPY`, all of them new, and returns `true`; or
    /// returns `false`, having stored nothing, when one of them is stored already or the batch has a
    /// value the text form here does not write (a time outside years 1970–9999).
    func copyBatch(_ records: [TrailRecord], keys: [String], format: String, received: Double) async throws -> Bool {
        guard let rows = CopyRows(records, keys: keys, format: format, received: received) else { return false }
        return try await coalescer.copy(rows.buffer, rows: records.count)
    }

    /// One `COPY` of `buffer`'s rows on a connection of the pool: `true` once committed, `false` when
    /// a key was stored already or it lost a deadlock (nothing of it kept).
    static func copy(_ buffer: ByteBuffer, client: PostgresClient, logger: Logger) async throws -> Bool {
        do {
            try await client.withConnection { connection in
                try await connection.copyFrom(table: "positions", columns: CopyRows.columns, logger: logger) {
                    try await $0.write(buffer)
                }
            }
            return true
        } catch where ["23505", "40P01", "40001"].contains((error as? PSQLError)?.serverInfo?[.sqlState]) {
            // A key stored already (23505), or two batches waiting on each other's keys: rolled back.
            return false
        }
    }
}

/// Batches that arrive while `COPY`s are under way go together in the next one: under load, one
/// commit, one trigger and one statement's overhead for several batches; when idle, a batch is sent
/// at once. At most ``maxInFlight`` run at a time, of at most ``maxRows`` rows each (whole batches).
/// When a merged `COPY` meets a stored key, each of its batches is answered `false` and goes through
/// the statement on its own, which tells its new records from its duplicates.
actor CopyCoalescer {
    static let maxInFlight = 3
    static let maxRows = 1_000

    struct Waiting {
        var buffer: ByteBuffer
        var rows: Int
        var continuation: CheckedContinuation<Bool, any Error>
    }

    let run: @Sendable (ByteBuffer) async throws -> Bool
    var queue: [Waiting] = []
    var inFlight = 0

    init(run: @escaping @Sendable (ByteBuffer) async throws -> Bool) {
        self.run = run
    }

    /// Copies `buffer` (`rows` rows), alone or with others: `true` once committed.
    func copy(_ buffer: ByteBuffer, rows: Int) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Waiting(buffer: buffer, rows: rows, continuation: continuation))
            startNext()
        }
    }

    private func startNext() {
        guard inFlight < Self.maxInFlight, !queue.isEmpty else { return }
        var group = [queue.removeFirst()]
        var rows = group[0].rows
        while let next = queue.first, rows + next.rows <= Self.maxRows {
            group.append(queue.removeFirst())
            rows += next.rows
        }
        inFlight += 1
        Task { await self.flush(group) }
    }

    private func flush(_ group: [Waiting]) async {
        var buffer = group[0].buffer
        for w in group.dropFirst() { buffer.writeImmutableBuffer(w.buffer) }
        let result: Result<Bool, any Error>
        do { result = .success(try await run(buffer)) } catch { result = .failure(error) }
        for w in group { w.continuation.resume(with: result) }
        inFlight -= 1
        startNext()
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
            guard r.latitude.isFinite, r.longitude.isFinite else { return nil }
            Self.text(keys[i], &buffer)
            Self.text(r.device, &buffer)
            Self.value(format == "json" ? String(r.sequence) : nil, &buffer)
            Self.text(r.kind.rawValue, &buffer)
            Self.value(r.region.map(Self.escaped), &buffer)
            guard Self.writeTimestamp(r.time, &buffer) else { return nil }
            buffer.writeInteger(UInt8(ascii: "\t"))
            Self.point(latitude: r.latitude, longitude: r.longitude, &buffer)
            Self.value(r.altitude?.description, &buffer)
            Self.value(r.horizontalAccuracy?.description, &buffer)
            Self.value(r.verticalAccuracy?.description, &buffer)
            Self.value(r.speed?.description, &buffer)
            Self.value(r.course?.description, &buffer)
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
        func hex(_ v: Double) {
            var bits = v.bitPattern
            for _ in 0..<8 {
                let byte = UInt8(truncatingIfNeeded: bits)
                buffer.writeInteger(byte >> 4 < 10 ? 48 + byte >> 4 : 55 + byte >> 4)
                buffer.writeInteger(byte & 0xF < 10 ? 48 + byte & 0xF : 55 + byte & 0xF)
                bits >>= 8
            }
        }
        hex(longitude)
        hex(latitude)
        buffer.writeInteger(UInt8(ascii: "\t"))
    }

    /// `to_timestamp(seconds)` as text, to the microsecond PostgreSQL rounds it to: it moves the value
    /// to its own epoch (2000-01-01) first, then rounds seconds × 10⁶ half to even, as done here.
    /// `nil` outside years 1970–9999.
    static func timestamp(_ seconds: Double) -> String? {
        var buffer = ByteBuffer()
        guard writeTimestamp(seconds, &buffer) else { return nil }
        return buffer.readString(length: buffer.readableBytes)
    }

    /// Writes ``timestamp(_:)``'s text, digit by digit (no `String` per field: a batch writes one per
    /// record); `false`, having written nothing, outside years 1970–9999.
    static func writeTimestamp(_ seconds: Double, _ buffer: inout ByteBuffer) -> Bool {
        guard seconds.isFinite, seconds >= 0, seconds < 253_402_300_800 else { return false }
        let sincePostgresEpoch = ((seconds - 946_684_800) * 1_000_000).rounded(.toNearestOrEven)
        let micros = Int64(sincePostgresEpoch) + 946_684_800_000_000
        let (days, inDay) = micros.quotientAndRemainder(dividingBy: 86_400_000_000)
        let (year, month, day) = GNSSTime.civilFromDays(Int(days))
        let second = inDay / 1_000_000
        func digits(_ value: Int64, _ width: Int, then separator: UInt8) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                buffer.writeInteger(UInt8(48 + v / divisor))
                v %= divisor
                divisor /= 10
            }
            buffer.writeInteger(separator)
        }
        digits(Int64(year), 4, then: UInt8(ascii: "-"))
        digits(Int64(month), 2, then: UInt8(ascii: "-"))
        digits(Int64(day), 2, then: UInt8(ascii: " "))
        digits(second / 3600, 2, then: UInt8(ascii: ":"))
        digits(second / 60 % 60, 2, then: UInt8(ascii: ":"))
        digits(second % 60, 2, then: UInt8(ascii: "."))
        digits(inDay % 1_000_000, 6, then: UInt8(ascii: "+"))
        buffer.writeStaticString("00")
        return true
    }
}
