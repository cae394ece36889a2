import Formats
import GRDB

extension Outbox {
    /// Moves dead letters back into the outbox to be sent again (after the setting that got them
    /// refused was fixed), under their own sequence numbers: an endpoint that stored one after all
    /// recognises it. `nil` moves all of them; a `target` only that target's. A target's dead letter
    /// goes to that target alone: the other registered targets are marked as having it (unless it
    /// is one of their dead letters moved back too).
    ///
    /// - Returns: how many moved.
    @discardableResult
    public func retryDeadLetters(_ sequences: [Int64]?, target: String? = nil) throws(UploadError) -> Int {
        let t = clock.now.secondsSince1970
        do {
            let moved = try pool.write { db -> Int in
                let (filter, arguments) = Outbox.deadLetterFilter(sequences, target: target)
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO outbox
                        (seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority, appended, decided,
                         \(Outbox.spanColumns))
                        SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course,
                               CASE kind WHEN 'location' THEN 1 ELSE 0 END, ?, decided, \(Outbox.spanColumns)
                        FROM dead_letter\(filter)
                        """, arguments: [t] + arguments)
                let moved = db.changesCount
                // Its own target lacks it again; the other targets have it, unless it is theirs too.
                try db.execute(
                    sql: """
                        DELETE FROM target_ack WHERE EXISTS (
                            SELECT 1 FROM (SELECT seq, target FROM dead_letter\(filter)) d
                            WHERE d.seq = target_ack.seq AND d.target = target_ack.target)
                        """, arguments: arguments)
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO target_ack (seq, target)
                        SELECT d.seq, t.name FROM (SELECT seq, target FROM dead_letter\(filter)) d, target t
                        WHERE d.target <> '' AND t.name <> d.target
                          AND NOT EXISTS (SELECT 1 FROM (SELECT seq, target FROM dead_letter\(filter)) e
                                          WHERE e.seq = d.seq AND e.target = t.name)
                        """, arguments: arguments + arguments)
                try db.execute(sql: "DELETE FROM dead_letter\(filter)", arguments: arguments)
                return moved
            }
            pendingCount.withLock { $0 += moved }
            // They come back under their old numbers, below what the targets' floors passed.
            locationFloors.withLock { $0 = [:] }
            return moved
        } catch {
            throw UploadError(.storage, "cannot move dead letters back in \(path)", path: path, underlying: error)
        }
    }

    /// The `WHERE` clause picking dead letters by sequence and target, and its arguments.
    static func deadLetterFilter(_ sequences: [Int64]?, target: String?) -> (String, StatementArguments) {
        var clauses: [String] = []
        var arguments = StatementArguments()
        if let sequences {
            clauses.append("seq IN (\(sequences.map { _ in "?" }.joined(separator: ",")))")
            arguments += StatementArguments(sequences)
        }
        if let target {
            clauses.append("target = ?")
            arguments += [target]
        }
        return (clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND "), arguments)
    }

    /// Deletes dead letters for good; `nil` deletes all of them; a `target`, only that target's.
    ///
    /// - Returns: how many went.
    @discardableResult
    public func purgeDeadLetters(_ sequences: [Int64]? = nil, target: String? = nil) throws(UploadError) -> Int {
        do {
            return try pool.write { db in
                let (filter, arguments) = Outbox.deadLetterFilter(sequences, target: target)
                try Outbox.rememberLastSequence(db)
                try db.execute(sql: "DELETE FROM dead_letter\(filter)", arguments: arguments)
                return db.changesCount
            }
        } catch {
            throw UploadError(.storage, "cannot delete dead letters in \(path)", path: path, underlying: error)
        }
    }

    /// The dead letters as JSON, one object a line (`seq`, `kind`, `region`, `time`, the endpoint's
    /// `status` and `reason`, and the `target` of a target's own), no coordinates.
    public func deadLetterLines() throws(UploadError) -> [String] {
        try deadLettersWithTargets().map { d in
            var out: [UInt8] = []
            ByteWriting.appendStatic("{\"seq\":", to: &out)
            ByteWriting.appendInt(d.record.sequence, to: &out)
            ByteWriting.appendStatic(",\"kind\":", to: &out)
            ByteWriting.appendJSONString(d.record.kind.rawValue, to: &out)
            if let region = d.record.region {
                ByteWriting.appendStatic(",\"region\":", to: &out)
                ByteWriting.appendJSONString(region, to: &out)
            }
            ByteWriting.appendStatic(",\"time\":", to: &out)
            ByteWriting.appendJSONString(ISOTime.string(d.record.time), to: &out)
            ByteWriting.appendStatic(",\"status\":", to: &out)
            ByteWriting.appendInt(Int64(d.status), to: &out)
            ByteWriting.appendStatic(",\"reason\":", to: &out)
            ByteWriting.appendJSONString(d.reason, to: &out)
            if !d.target.isEmpty {
                ByteWriting.appendStatic(",\"target\":", to: &out)
                ByteWriting.appendJSONString(d.target, to: &out)
            }
            out.append(UInt8(ascii: "}"))
            return String(decoding: out, as: UTF8.self)
        }
    }
}
