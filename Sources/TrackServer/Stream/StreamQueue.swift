/// One stream connection's queue of frames waiting to be written, bounded by a count and by bytes:
/// a client that does not read overflows it instead of growing the server's memory. A value-type
/// state machine; its owner keeps it under a lock and performs the actions it returns (resuming the
/// writer that waits, closing the connection).
struct StreamQueue<Frame, Waiter> {
    enum State {
        /// Frames are taken.
        case open
        /// Over a bound: the frames are dropped and the connection is to be closed (1008).
        case overflowed
        /// Closed by its owner (the client left, the server stops).
        case closed
    }

    /// What the owner does after ``push(_:bytes:)``.
    enum PushAction {
        case none
        /// Hand the frame to the writer that waits for it.
        case resume(Waiter, Frame)
        /// The queue went over a bound: close the connection (no writer waits: the queue was not empty).
        case overflow
    }

    /// What the owner does after ``next(waiter:)``.
    enum NextAction {
        /// Write this frame now.
        case frame(Frame)
        /// Nothing queued: the waiter is kept until a frame comes.
        case wait
        /// The stream ends (`overflowed` says why).
        case end(overflowed: Bool)
    }

    let maxMessages: Int
    let maxBytes: Int
    private(set) var state = State.open
    private var frames: [(frame: Frame, bytes: Int)] = []
    private var head = 0
    private(set) var bytes = 0
    private var waiter: Waiter?

    init(maxMessages: Int, maxBytes: Int) {
        precondition(maxMessages > 0 && maxBytes > 0, "a stream queue holds at least one message")
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
    }

    /// The frames queued.
    var count: Int { frames.count - head }

    mutating func push(_ frame: Frame, bytes size: Int) -> PushAction {
        guard case .open = state else { return .none }
        if let w = waiter {
            precondition(count == 0, "a writer waits only on an empty queue")
            waiter = nil
            return .resume(w, frame)
        }
        if count + 1 > maxMessages || bytes + size > maxBytes {
            state = .overflowed
            frames = []
            head = 0
            bytes = 0
            return .overflow
        }
        frames.append((frame, size))
        bytes += size
        return .none
    }

    mutating func next(waiter w: Waiter) -> NextAction {
        switch state {
        case .overflowed: return .end(overflowed: true)
        case .closed: return .end(overflowed: false)
        case .open: break
        }
        guard head < frames.count else {
            precondition(waiter == nil, "one writer at a time")
            waiter = w
            return .wait
        }
        let (frame, size) = frames[head]
        head += 1
        bytes -= size
        if head == frames.count {
            frames.removeAll(keepingCapacity: frames.capacity <= 64)
            head = 0
        } else if head >= 256 && head * 2 >= frames.count {
            frames.removeFirst(head)
            head = 0
        }
        return .frame(frame)
    }

    /// Ends the stream; returns the writer waiting, to resume with nothing.
    mutating func close() -> Waiter? {
        if case .open = state { state = .closed }
        frames = []
        head = 0
        bytes = 0
        defer { waiter = nil }
        return waiter
    }
}
