import Formats
import Geo
import Logging
import NIOCore
import PostgresNIO
import TrackStore

/// A batch by `COPY`: the fast path of ``PostgresTrackStore/insert(_:format:received:)``.
///
/// `INSERT ... SELECT ... ON CONFLICT` inserts its rows one at a time; `COPY` hands them to the heap in
/// groups (PostgreSQL's multi-insert), which measured here about a third less PostgreSQL CPU per row
/// (docs/endpoint.md, "On PostgreSQL + PostGIS"). `COPY` knows no `ON CONFLICT`, so it is the path for
/// the usual batch, whose records are all new: the rows go in by key (the order the statement locks
/// them in), the trigger `positions_devices` adds them to their devices' summaries in the same
/// transaction, and the one statement is committed before its answer, as the statement's is. A key that
/// is already stored (a retried batch, or the same batch at another instance at the same time) fails
/// the `COPY` with a unique violation: nothing of it is kept, and the batch goes through the statement,
/// which tells new records from duplicates.
extension PostgresTrackStore {
    /// Stores `records` (their keys in `keys`) with `COPY`, all of them new, and returns `true`; or
    /// returns `false`, having stored nothing, when one of them is stored already or the batch has a
    /// value the text form here does not write (a time outside years 1970–9999).
    func copyBatch(_ records: [TrailRecord], keys: [String], format: String, received: Double) async throws -> Bool {
        guard let rows = CopyRows(records, keys: keys, format: format, received: received) else { return false }
        return try await coalescer.copy(rows)
    }

    /// One `COPY` of `buffer`'s rows on a connection of the pool: `true` once committed (and the
    /// live stream told, ``notifyStored(_:logger:)``), `false` when a key was stored already or it
    /// lost a deadlock (nothing of it kept).
    static func copy(_ buffer: ByteBuffer, client: PostgresClient, ends: ConnectionEnds, logger: Logger) async throws
        -> Bool
    {
        do {
            try await withLiveConnection(client: client, ends: ends) { connection in
                try await connection.copyFrom(table: "positions", columns: CopyRows.columns, logger: logger) {
                    try await $0.write(buffer)
                }
                await notifyStored(connection, logger: logger)
            }
            return true
        } catch let error as PSQLError
            where [.uniqueViolation, .deadlockDetected, .serializationFailure].contains(error.condition)
        {
            // A key stored already, or two batches waiting on each other's keys: rolled back.
            return false
        }
    }
}

/// Batches that arrive while `COPY`s are under way go together in the next one: under load, one
/// commit, one trigger and one statement's overhead for several batches; when idle, a batch is sent
/// at once. At most ``limit`` run at a time, of at most ``maxRows`` rows each (whole batches, their
/// rows merged in key order: ``CopyRows/merged(_:)``).
/// When a merged `COPY` meets a stored key, each of its batches is answered `false` and goes through
/// the statement on its own, which tells its new records from its duplicates.
///
/// ``budget`` `COPY`s at a time serve the database best from one instance; from several, each taking
/// as many, the database runs more transactions at once on the same cores, each commits fewer rows,
/// and the commits wait on each other's WAL writes (two instances, 3 each: 157 rows a commit, and a
/// record cost keeptrack 15.3 µs of CPU against one instance's 12.2, PostgreSQL 37.6 against 32.9;
/// docs/performance.md, "The endpoint on PostgreSQL: load and figures"). So the instances share the
/// budget: `countInstances` says how many are loading the database (``PostgresTrackStore/instances()``),
/// counted again under load every ``recount``, and each takes its share (``share(of:)``). It is a
/// pace, not state: instances that count differently for a moment still store the same rows.
actor CopyCoalescer {
    /// `COPY`s in flight at once, over all the instances loading one database.
    static let budget = 3
    static let maxRows = 1_000
    /// How often the instances are counted again while batches arrive.
    static let recount: Duration = .seconds(2)

    struct Waiting {
        var rows: CopyRows
        var continuation: CheckedContinuation<Bool, any Error>
    }

    let run: @Sendable (ByteBuffer) async throws -> Bool
    let countInstances: (@Sendable () async throws -> Int)?
    /// The clock the recounts are timed on.
    let clock: any EpochClock
    let logger: Logger?
    var queue: [Waiting] = []
    var inFlight = 0
    /// The `COPY`s this instance runs at once: its share of ``budget``.
    private(set) var limit = budget
    private(set) var instances = 1
    private(set) var counts = 0
    var countedAt: EpochInstant?
    var counting = false

    /// - Parameters:
    ///   - run: one `COPY` of the rows given: `true` once committed, `false` when nothing was kept.
    ///   - countInstances: how many instances load the database, this one included; `nil`: this
    ///     one alone, always.
    ///   - clock: the clock the recounts are timed on. The default is the wall clock.
    ///   - logger: hears when the share changes.
    init(
        run: @escaping @Sendable (ByteBuffer) async throws -> Bool,
        countInstances: (@Sendable () async throws -> Int)? = nil,
        clock: any EpochClock = WallClock(), logger: Logger? = nil
    ) {
        self.run = run
        self.countInstances = countInstances
        self.clock = clock
        self.logger = logger
    }

    /// This instance's share of the ``budget`` when `instances` load the database: at least one.
    static func share(of instances: Int) -> Int {
        max(1, budget / max(1, instances))
    }

    /// Copies `rows`, alone or with others: `true` once committed.
    func copy(_ rows: CopyRows) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Waiting(rows: rows, continuation: continuation))
            startNext()
        }
    }

    private func startNext() {
        recountIfDue()
        while inFlight < limit, !queue.isEmpty {
            var group = [queue.removeFirst()]
            var rows = group[0].rows.count
            while let next = queue.first, rows + next.rows.count <= Self.maxRows {
                group.append(queue.removeFirst())
                rows += next.rows.count
            }
            inFlight += 1
            Task { await self.flush(group) }
        }
    }

    /// Counts the instances again when it is due, without holding up a `COPY`: the last count holds
    /// until the new one is in.
    private func recountIfDue() {
        guard let countInstances, !counting else { return }
        if let countedAt, countedAt.duration(to: clock.now) < Self.recount { return }
        counting = true
        Task {
            let counted = try? await countInstances()
            self.counted(counted)
        }
    }

    private func counted(_ count: Int?) {
        counting = false
        countedAt = clock.now
        counts += 1
        if let count {
            instances = max(1, count)
            let share = Self.share(of: instances)
            if share != limit {
                logger?.info(
                    "COPYs at once: this instance's share of the budget changed",
                    metadata: ["serve.instances": "\(instances)", "serve.copies": "\(share)"])
            }
            limit = share
        }
        startNext()
    }

    private func flush(_ group: [Waiting]) async {
        let buffer = CopyRows.merged(group.map(\.rows))
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
///
/// The rows are written into a byte array, then handed to a `ByteBuffer` at once: written byte by
/// byte into the `ByteBuffer` itself, each byte paid a capacity check and an exclusivity check of
/// its storage: about an eighth of `serve`'s CPU time under load (perf, `tools/bench-pg.py`).
///
/// The rows go in by key, and so do the rows of a `COPY` that merges several batches
/// (``merged(_:)``): every `COPY` and every statement takes its keys in one order, so no two wait
/// on each other's keys. A merged `COPY` that took its batches one after the other could: two
/// instances merging the same batches in another order each hold keys the other needs next, and
/// one of them waits out `deadlock_timeout` before PostgreSQL rolls it back.
struct CopyRows {
    static let columns = [
        "key", "device", "seq", "kind", "region", "time", "position", "alt", "h_acc", "v_acc",
        "speed", "course", "format", "received", "valid", "attributes",
    ]

    /// The rows' text, in key order.
    var bytes: [UInt8]
    /// Each row's key (UTF-8, unescaped), in the rows' order.
    var keys: [[UInt8]]
    /// Where each row ends in ``bytes``.
    var ends: [Int]

    var count: Int { ends.count }
    var buffer: ByteBuffer { ByteBuffer(bytes: bytes) }

    init(bytes: [UInt8], keys: [[UInt8]], ends: [Int]) {
        precondition(keys.count == ends.count, "one key a row")
        self.bytes = bytes
        self.keys = keys
        self.ends = ends
    }

    /// `nil` when a time is outside what the text form here writes (years 1970–9999) or a position is
    /// not finite: the statement then stores the batch, or says what is wrong with it.
    init?(_ records: [TrailRecord], keys: [String], format: String, received: Double) {
        var receivedText: [UInt8] = []
        guard Self.writeTimestamp(received, &receivedText) else { return nil }
        let sequences = format == "json"
        var out: [UInt8] = []
        out.reserveCapacity(records.count * 256)
        let utf8 = keys.map { Array($0.utf8) }
        let order = Self.keyOrder(utf8)
        var ends: [Int] = []
        ends.reserveCapacity(records.count)
        for i in order {
            let r = records[i]
            guard r.latitude.isFinite, r.longitude.isFinite else { return nil }
            Self.text(keys[i], &out)
            Self.text(r.device, &out)
            if sequences && r.sequence > 0 { Self.integer(r.sequence, &out) } else { Self.null(&out) }
            Self.text(r.kind.rawValue, &out)
            if let region = r.region { Self.text(region, &out) } else { Self.null(&out) }
            guard Self.writeTimestamp(r.time, &out) else { return nil }
            out.append(UInt8(ascii: "\t"))
            Self.point(latitude: r.latitude, longitude: r.longitude, &out)
            Self.double(r.altitude, &out)
            Self.double(r.horizontalAccuracy, &out)
            Self.double(r.verticalAccuracy, &out)
            Self.double(r.speed, &out)
            Self.double(r.course, &out)
            Self.text(format, &out)
            out.append(contentsOf: receivedText)
            out.append(UInt8(ascii: "\t"))
            out.append(r.valid ? UInt8(ascii: "t") : UInt8(ascii: "f"))
            out.append(UInt8(ascii: "\t"))
            if let attributes = TrailRecord.attributesJSON(r.attributes) {
                Self.escape(attributes, &out)
            } else {
                out.append(UInt8(ascii: "\\"))
                out.append(UInt8(ascii: "N"))
            }
            out.append(UInt8(ascii: "\n"))
            ends.append(out.count)
        }
        self.init(bytes: out, keys: order.map { utf8[$0] }, ends: ends)
    }

    /// The keys' indices by key, in the byte order of the column's "C" collation: the order the
    /// statement locks keys in.
    static func keyOrder(_ keys: [[UInt8]]) -> [Int] {
        keys.indices.sorted { keys[$0].lexicographicallyPrecedes(keys[$1]) }
    }

    /// The rows of `parts` (each in key order) as one `COPY`'s, all in key order.
    static func merged(_ parts: [CopyRows]) -> ByteBuffer {
        if parts.count == 1 { return parts[0].buffer }
        var rows: [(part: Int, row: Int)] = []
        rows.reserveCapacity(parts.reduce(0) { $0 + $1.count })
        for (p, part) in parts.enumerated() {
            for r in 0..<part.count { rows.append((p, r)) }
        }
        rows.sort { parts[$0.part].keys[$0.row].lexicographicallyPrecedes(parts[$1.part].keys[$1.row]) }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(parts.reduce(0) { $0 + $1.bytes.count })
        for (p, r) in rows {
            let part = parts[p]
            let start = r == 0 ? 0 : part.ends[r - 1]
            buffer.writeBytes(part.bytes[start..<part.ends[r]])
        }
        return buffer
    }

    static func null(_ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        out.append(UInt8(ascii: "N"))
        out.append(UInt8(ascii: "\t"))
    }

    static func text(_ text: String, _ out: inout [UInt8]) {
        escape(text, &out)
        out.append(UInt8(ascii: "\t"))
    }

    /// COPY's text escapes: a backslash, tab, newline or carriage return would end or change a field.
    static func escape(_ text: String, _ out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            default: out.append(byte)
            }
        }
    }

    static func integer(_ value: Int64, _ out: inout [UInt8]) {
        var text = String(value)
        text.withUTF8 { out.append(contentsOf: $0) }
        out.append(UInt8(ascii: "\t"))
    }

    /// A double as Swift writes it, the shortest text that reads back to the same bits (as
    /// PostgreSQL's `float8in` reads it); `\N` for `nil`.
    static func double(_ value: Double?, _ out: inout [UInt8]) {
        guard let value else { return null(&out) }
        var text = value.description
        text.withUTF8 { out.append(contentsOf: $0) }
        out.append(UInt8(ascii: "\t"))
    }

    /// Hex EWKB of a point with SRID 4326: byte order, type (point with an SRID), the SRID, x, y.
    static func point(latitude: Double, longitude: Double, _ out: inout [UInt8]) {
        out.append(contentsOf: "0101000020E6100000".utf8)
        func hex(_ v: Double) {
            var bits = v.bitPattern
            for _ in 0..<8 {
                let byte = UInt8(truncatingIfNeeded: bits)
                out.append(byte >> 4 < 10 ? 48 + byte >> 4 : 55 + byte >> 4)
                out.append(byte & 0xF < 10 ? 48 + byte & 0xF : 55 + byte & 0xF)
                bits >>= 8
            }
        }
        hex(longitude)
        hex(latitude)
        out.append(UInt8(ascii: "\t"))
    }

    /// `to_timestamp(seconds)` as text, to the microsecond PostgreSQL rounds it to: it moves the value
    /// to its own epoch (2000-01-01) first, then rounds seconds × 10⁶ half to even, as done here.
    /// `nil` outside years 1970–9999.
    static func timestamp(_ seconds: Double) -> String? {
        var bytes: [UInt8] = []
        guard writeTimestamp(seconds, &bytes) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes ``timestamp(_:)``'s text, digit by digit (no `String` per field: a batch writes one per
    /// record); `false`, having written nothing, outside years 1970–9999.
    static func writeTimestamp(_ seconds: Double, _ out: inout [UInt8]) -> Bool {
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
                out.append(UInt8(48 + v / divisor))
                v %= divisor
                divisor /= 10
            }
            out.append(separator)
        }
        digits(Int64(year), 4, then: UInt8(ascii: "-"))
        digits(Int64(month), 2, then: UInt8(ascii: "-"))
        digits(Int64(day), 2, then: UInt8(ascii: " "))
        digits(second / 3600, 2, then: UInt8(ascii: ":"))
        digits(second / 60 % 60, 2, then: UInt8(ascii: ":"))
        digits(second % 60, 2, then: UInt8(ascii: "."))
        digits(inDay % 1_000_000, 6, then: UInt8(ascii: "+"))
        out.append(UInt8(ascii: "0"))
        out.append(UInt8(ascii: "0"))
        return true
    }
}
