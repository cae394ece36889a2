import Testing

@testable import TrackServer

/// The stream's per-connection queue (``StreamQueue``): a value-type state machine, event by event.
@Suite("The live stream's bounded queue")
struct StreamQueueTests {
    typealias Queue = StreamQueue<Int, String>

    /// A frame pushed while the writer waits goes straight to it; queued frames come out in order.
    @Test func framesComeOutInOrderAndAWaitingWriterGetsTheNextAtOnce() {
        var q = Queue(maxMessages: 3, maxBytes: 100)
        guard case .wait = q.next(waiter: "writer") else { Issue.record("an empty queue made the writer wait"); return }
        guard case .resume("writer", 1) = q.push(1, bytes: 10) else { Issue.record("the waiting writer got 1"); return }
        for n in 2...4 { guard case .none = q.push(n, bytes: 10) else { Issue.record("\(n) queued"); return } }
        var out: [Int] = []
        while case .frame(let n) = q.next(waiter: "writer") { out.append(n) }
        #expect(out == [2, 3, 4])
        #expect(q.count == 0 && q.bytes == 0)
    }

    /// Over the message count or the bytes: overflowed, the frames dropped, the stream ends with
    /// `overflowed`; later pushes are ignored.
    @Test(arguments: [(3, 1000, 10), (100, 25, 10)])
    func overflowingEitherBoundEndsTheStream(maxMessages: Int, maxBytes: Int, size: Int) {
        var q = Queue(maxMessages: maxMessages, maxBytes: maxBytes)
        var pushed = 0
        while true {
            let action = q.push(pushed, bytes: size)
            pushed += 1
            if case .overflow = action { break }
            #expect(pushed <= max(maxMessages, maxBytes / size) + 1)
        }
        #expect(pushed == min(maxMessages, maxBytes / size) + 1)
        #expect(q.count == 0 && q.bytes == 0)
        guard case .none = q.push(99, bytes: 1) else { Issue.record("a push after the overflow was taken"); return }
        guard case .end(overflowed: true) = q.next(waiter: "w") else { Issue.record("the stream did not end"); return }
    }

    /// Closing hands back the waiting writer (to resume with nothing) and ends the stream.
    @Test func closingReturnsTheWaiterAndEndsTheStream() {
        var q = Queue(maxMessages: 2, maxBytes: 100)
        _ = q.next(waiter: "writer")
        #expect(q.close() == "writer")
        guard case .end(overflowed: false) = q.next(waiter: "w") else { Issue.record("the stream did not end"); return }
        guard case .none = q.push(1, bytes: 1) else { Issue.record("a push after close was taken"); return }
    }
}
