import Geo
import Testing

@testable import TrackFiles

/// What a reader holds does not grow with the file: long inputs generated piece by piece go
/// through with the readers' buffers at the size of one record.
@Suite("Track files: bounded memory")
struct BoundedMemoryTests {
    static let records = 50_000

    func feed(_ reader: inout some TrackReader, head: String, record: (Int) -> String, tail: String) throws -> Int {
        var count = 0
        var piece: [UInt8] = Array(head.utf8)
        for i in 0..<Self.records {
            piece.append(contentsOf: record(i).utf8)
            if piece.count >= 65_536 || i == Self.records - 1 {
                if i == Self.records - 1 { piece.append(contentsOf: tail.utf8) }
                try piece.withUnsafeBytes { b in
                    try Result { () throws(TrackFileError) in try reader.feed(b) { _ in count += 1 } }.get()
                }
                piece.removeAll(keepingCapacity: true)
            }
        }
        try Result { () throws(TrackFileError) in try reader.finish { _ in count += 1 } }.get()
        return count
    }

    func time(_ i: Int) -> String {
        GNSSTime(nanosecondsSince1970: Int64(1_715_679_000 + i) * 1_000_000_000, fractionDigits: 0).iso8601
    }

    @Test func aLongTakeoutFileKeepsOneRecord() throws {
        var reader = JSONTrackReader(format: .takeout)
        let n = try feed(
            &reader, head: "{\"locations\":[",
            record: { i in
                (i == 0 ? "" : ",")
                    + "{\"latitudeE7\":481373663,\"longitudeE7\":115754087,\"accuracy\":13,\"activity\":[{\"activity\":"
                    + "[{\"type\":\"STILL\",\"confidence\":100}],\"timestamp\":\"\(time(i))\"}],\"timestamp\":\"\(time(i))\"}"
            }, tail: "]}")
        #expect(n == Self.records)
        #expect(reader.tokenizer.token.capacity < 1024 && reader.tokenizer.stack.capacity <= 256)
        #expect(reader.consumer.positions.capacity <= 1 && reader.consumer.times.capacity <= 1)
    }

    @Test func aLongGPXKeepsOnePoint() throws {
        var reader = GPXReader()
        let n = try feed(
            &reader, head: "<gpx version='1.1'><trk><trkseg>",
            record: { i in "<trkpt lat='48.1' lon='11.5'><ele>500</ele><time>\(time(i))</time></trkpt>\n" },
            tail: "</trkseg></trk></gpx>")
        #expect(n == Self.records)
        #expect(reader.tokenizer.names.capacity <= 2048 && reader.tokenizer.attributeBytes.capacity <= 2048)
        #expect(reader.consumer.text.capacity < 1024)
    }

    @Test func aLongLineStringPairsPositionsWithTimesAsTheTimesArrive() throws {
        // Times first: each position goes out as it is read, nothing waits.
        var reader = JSONTrackReader()
        var count = 0
        var text = "{\"type\":\"Feature\",\"properties\":{\"coordTimes\":["
        text += (0..<1000).map { "\"\(time($0))\"" }.joined(separator: ",")
        text += "]},\"geometry\":{\"type\":\"LineString\",\"coordinates\":["
        text += (0..<1000).map { "[11.\($0),48.1]" }.joined(separator: ",") + "]}}"
        try Result { () throws(TrackFileError) in try reader.read(Array(text.utf8)) { _ in count += 1 } }.get()
        #expect(count == 1000)
        #expect(reader.consumer.positions.isEmpty)
    }
}
