import Testing

@testable import TrackStorePostgres

/// The live stream's cursor on PostgreSQL (``StoredCursor``) and the announcements it reads
/// (``StoredAnnouncement``): what is left to read of a range, and what a payload names.
@Suite("PostgreSQL store: the live stream's cursor")
struct StoredCursorTests {
    /// Two statements' numbers interleave (concurrent `COPY`s take them row by row): the first one's
    /// published, only the second one's are left of the shared range, and nothing once both are.
    @Test func onlyTheNumbersNotPublishedAreLeftToRead() {
        var cursor = StoredCursor()
        cursor.begin(at: 99)
        #expect(cursor.unpublished(from: 100, through: 110) == [100...110])
        #expect(cursor.unpublished(from: 50, through: 101) == [100...101])
        #expect(cursor.unpublished(from: 10, through: 99).isEmpty)
        cursor.publish(ranges: [100...100, 102...102, 104...105, 109...110])
        #expect(cursor.unpublished(from: 100, through: 110) == [101...101, 103...103, 106...108])
        #expect(cursor.unpublished(from: 104, through: 105).isEmpty)
        #expect(cursor.covers([104...105, 109...110]))
        #expect(!cursor.covers([104...106]))
        // A catch-up: the holes below the highest published and everything above it.
        #expect(cursor.unpublished(from: 100, through: nil) == [101...101, 103...103, 106...108, 111...Int64.max])
        cursor.publish([101, 103, 106, 107, 108])
        #expect(cursor.published == [100...110])
        #expect(cursor.unpublished(from: 100, through: 110).isEmpty)
        #expect(cursor.unpublished(from: 100, through: nil) == [111...Int64.max])
        #expect(!cursor.isNew(105) && cursor.isNew(111))
    }

    /// Published twice or in any order, the numbers come to the same ranges; the highest moves on.
    @Test func publishingIsIdempotentAndInAnyOrder() {
        var a = StoredCursor()
        a.begin(at: 0)
        a.publish([5, 3, 4, 9])
        a.publish(ranges: [3...5])
        var b = StoredCursor()
        b.begin(at: 0)
        b.publish(ranges: [9...9])
        b.publish([4, 5, 3])
        #expect(a == b)
        #expect(a.published == [3...5, 9...9])
        #expect(a.highest == 9)
        #expect(a.catchUpFloor == 0)
    }

    /// Ranges more than the window below the highest are forgotten (a statement committed that late
    /// is read whole again, as before).
    @Test func rangesBelowTheWindowAreForgotten() {
        var cursor = StoredCursor(window: 10)
        cursor.begin(at: 0)
        cursor.publish(ranges: [1...2, 4...5])
        cursor.publish(ranges: [30...30])
        #expect(cursor.published == [30...30])
        #expect(cursor.catchUpFloor == 20)
        #expect(cursor.unpublished(from: 21, through: nil) == [21...29, 31...Int64.max])
    }

    @Test func anAnnouncementNamesItsNumbersAndDevicesWhenTheyHoldTogether() {
        #expect(
            StoredAnnouncement(payload: "7 100 110\n100-102 105-105 109-110\nvan 1\nbus")
                == StoredAnnouncement(
                    first: 100, last: 110, ranges: [100...102, 105...105, 109...110], devices: ["van 1", "bus"]))
        // An instance from before the migration: the range alone.
        #expect(StoredAnnouncement(payload: "7 100 110") == StoredAnnouncement(first: 100, last: 110))
        // Ranges that do not begin at FIRST, end at LAST, or are out of order; no device: read instead.
        for payload in [
            "7 100 110\n101-110\nvan", "7 100 110\n100-109\nvan", "7 100 110\n100-105 104-110\nvan",
            "7 100 110\n100-110\n", "7 100 110\n100-110", "7 100 110\n100-x\nvan", "7 100 110\n110-100\nvan",
        ] {
            #expect(StoredAnnouncement(payload: payload) == StoredAnnouncement(first: 100, last: 110), "\(payload)")
        }
        for payload in ["", "7 100", "7 110 100", "7 a 110", "7 100 110 4"] {
            #expect(StoredAnnouncement(payload: payload) == nil, "\(payload)")
        }
    }
}
