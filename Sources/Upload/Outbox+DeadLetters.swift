import Formats
import GRDB

extension Outbox {
    /// Moves dead letters back into the outbox to be sent again (after the setting that got them
    /// refused was fixed), under their own sequence numbers: an endpoint that stored one after all
    /// recognises it. `nil` moves all of them.
    ///
    /// - Returns: how many moved.
    @discardableResult
    public func retryDeadLetters(_ sequences: [Int64]?) throws(UploadError) -> Int {
        let t = clock.now.secondsSince1970
        do {
            let moved = try pool.write { db -> Int in
                let filter = sequences.map { " WHERE seq IN (\($0.map { _ in "?" }.joined(separator: ",")))" } ?? ""
                let arguments = StatementArguments(sequences ?? [])
                try db.execute(sql: """
                    INSERT OR IGNORE INTO outbox
                    (seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority, appended, decided,
                     \(Outbox.spanColumns))
                    SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course,
                           CASE kind WHEN 'location' THEN 1 ELSE 0 END, ?, decided, \(Outbox.spanColumns)
                    FROM dead_letter\(filter)
                    """, arguments: [t] + arguments)
                let moved = db.changesCount
                try db.execute(sql: "DELETE FROM dead_letter\(filter)", arguments: arguments)
                return moved
            }
            pendingCount.withLock { $0 += moved }
            return moved
        } catch {
            throw UploadError(.storage, "cannot move dead letters back in \(path)", path: path, underlying: error)
        }
    }

    /// Deletes dead letters for good; `nil` deletes all of them.
    ///
    /// - Returns: how many went.
    @discardableResult
    public func purgeDeadLetters(_ sequences: [Int64]? = nil) throws(UploadError) -> Int {
        do {
            return try pool.write { db in
                let filter = sequences.map { " WHERE seq IN (\($0.map { _ in "?" }.joined(separator: ",")))" } ?? ""
                try Outbox.rememberLastSequence(db)
                try db.execute(sql: "DELETE FROM dead_letter\(filter)", arguments: StatementArguments(sequences ?? []))
                return db.changesCount
            }
        } catch {
            throw UploadError(.storage, "cannot delete dead letters in \(path)", path: path, underlying: error)
        }
    }

    /// The dead letters as JSON, one object a line (`seq`, `kind`, `region`, `time`, the endpoint's
    /// `status` and `reason`), no coordinates.
    public func deadLetterLines() throws(UploadError) -> [String] {
        try deadLetters().map { d in
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
            out.append(UInt8(ascii: "}"))
            return String(decoding: out, as: UTF8.self)
        }
    }
}
