import Geo

/// Which connections the server keeps at its connection cap, and which it closes: the decision as a
/// value (no clock read, no I/O), fed the connections' events with the time they happened.
///
/// A connection is in one of four states: it has not completed its first request head yet (new, or
/// a slowloris), it is busy with a request (from a head to the end of its answer), it is idle between
/// requests (keep-alive), or it was upgraded to another protocol (a WebSocket: never shed or timed
/// out here). When a new connection arrives at the cap, one connection is shed to make room: the
/// oldest that has not completed a request head, else the one idle the longest; only when every
/// connection is busy or upgraded is the newcomer refused. A connection that has not completed its
/// first request head within ``Settings/firstRequestTimeout`` of its opening expires.
///
/// Complexity: every event is O(1) amortized (queues with lazy removal, compacted when half stale).
struct ConnectionShedder {
    typealias ID = UInt64

    struct Settings: Equatable {
        /// The most connections kept at once.
        var cap: Int
        /// How long a new connection has to complete its first request head.
        var firstRequestTimeout: Duration
    }

    enum Phase: Equatable {
        /// Open, no complete request head yet.
        case awaitingFirstHead
        /// `requests` heads read whose answers are not written yet.
        case busy(requests: Int)
        /// Between requests since `since`.
        case idle(since: EpochInstant)
        /// Switched to another protocol: neither shed nor timed out here.
        case upgraded
    }

    struct Entry: Equatable {
        var phase: Phase
        var opened: EpochInstant
        /// When it last became sheddable: its place in the queue of its phase.
        var ticket: UInt64
    }

    /// Why a connection was shed.
    enum ShedReason: Equatable {
        case awaitingFirstHead
        case idle
    }

    enum OpenAction: Equatable {
        /// Serve the new connection `id`; first close `shed` (already forgotten here) if there is one.
        /// `armTimer`: the earliest first-request deadline changed (there was none): wake the sweeper.
        case admit(id: ID, shed: ID?, reason: ShedReason?, armTimer: Bool)
        /// At the cap with nothing to shed: refuse the newcomer.
        case refuse
    }

    var settings: Settings
    private(set) var entries: [ID: Entry] = [:]
    /// Connections awaiting their first head, in the order they opened (stale tickets skipped).
    private var fresh = TicketQueue()
    /// Connections idle between requests, in the order they became idle (stale tickets skipped).
    private var idle = TicketQueue()
    private var nextID: ID = 1
    private var nextTicket: UInt64 = 1

    init(settings: Settings) { self.settings = settings }

    /// The connections open (every state).
    var count: Int { entries.count }

    /// A connection opened at `now`.
    mutating func opened(at now: EpochInstant) -> OpenAction {
        var shed: ID?
        var reason: ShedReason?
        if entries.count >= settings.cap {
            if let id = popValid(inFresh: true) {
                (shed, reason) = (id, .awaitingFirstHead)
            } else if let id = popValid(inFresh: false) {
                (shed, reason) = (id, .idle)
            } else {
                return .refuse
            }
            entries[shed!] = nil
        }
        let hadDeadline = firstDeadline() != nil
        let id = nextID
        nextID += 1
        let ticket = takeTicket()
        entries[id] = Entry(phase: .awaitingFirstHead, opened: now, ticket: ticket)
        fresh.append(id: id, ticket: ticket)
        compact()
        return .admit(id: id, shed: shed, reason: reason, armTimer: !hadDeadline)
    }

    /// A complete request head was read on `id`.
    mutating func requestHead(_ id: ID) {
        guard var entry = entries[id] else { return }
        switch entry.phase {
        case .awaitingFirstHead, .idle: entry.phase = .busy(requests: 1)
        case .busy(let n): entry.phase = .busy(requests: n + 1)
        case .upgraded: return
        }
        entries[id] = entry
    }

    /// The end of an answer was written on `id` at `now`.
    mutating func answered(_ id: ID, at now: EpochInstant) {
        guard var entry = entries[id], case .busy(let n) = entry.phase else { return }
        if n > 1 {
            entry.phase = .busy(requests: n - 1)
        } else {
            entry.phase = .idle(since: now)
            entry.ticket = takeTicket()
            idle.append(id: id, ticket: entry.ticket)
        }
        entries[id] = entry
        compact()
    }

    /// `id` switched protocols (a WebSocket upgrade): it is no longer an HTTP connection to shed.
    mutating func upgraded(_ id: ID) {
        guard entries[id] != nil else { return }
        entries[id]!.phase = .upgraded
    }

    /// `id` closed (after a shed or an expiry too: then it is forgotten already).
    mutating func closed(_ id: ID) {
        entries[id] = nil
        compact()
    }

    /// When the oldest connection still awaiting its first head expires, if one does.
    mutating func nextDeadline() -> EpochInstant? {
        firstDeadline().map { $0.advanced(by: settings.firstRequestTimeout) }
    }

    /// The connections whose first-request time ran out at `now`, forgotten here: close them.
    mutating func expire(at now: EpochInstant) -> [ID] {
        var expired: [ID] = []
        while let opened = firstDeadline(), opened.advanced(by: settings.firstRequestTimeout) <= now,
            let id = fresh.first?.id
        {
            fresh.removeFirst()
            entries[id] = nil
            expired.append(id)
        }
        compact()
        return expired
    }

    // MARK: - Queues

    private mutating func takeTicket() -> UInt64 {
        defer { nextTicket += 1 }
        return nextTicket
    }

    /// Whether `ticket` is still the place of `id` in the queue of connections awaiting their first
    /// head (`inFresh`) or idle between requests.
    private static func isValid(_ id: ID, _ ticket: UInt64, inFresh: Bool, _ entries: [ID: Entry]) -> Bool {
        guard let entry = entries[id], entry.ticket == ticket else { return false }
        switch entry.phase {
        case .awaitingFirstHead: return inFresh
        case .idle: return !inFresh
        case .busy, .upgraded: return false
        }
    }

    /// The opening time of the oldest connection awaiting its first head (stale tickets dropped).
    private mutating func firstDeadline() -> EpochInstant? {
        while let (id, ticket) = fresh.first {
            if Self.isValid(id, ticket, inFresh: true, entries) { return entries[id]!.opened }
            fresh.removeFirst()
        }
        return nil
    }

    /// Takes the oldest valid connection out of a queue.
    private mutating func popValid(inFresh: Bool) -> ID? {
        while let (id, ticket) = inFresh ? fresh.first : idle.first {
            if inFresh { fresh.removeFirst() } else { idle.removeFirst() }
            if Self.isValid(id, ticket, inFresh: inFresh, entries) { return id }
        }
        return nil
    }

    /// Drops stale tickets once they are more than half of a queue (each queue holds at most one
    /// valid ticket per connection).
    private mutating func compact() {
        let limit = 2 * entries.count + 64
        let entries = self.entries
        if fresh.count > limit { fresh.retain { Self.isValid($0, $1, inFresh: true, entries) } }
        if idle.count > limit { idle.retain { Self.isValid($0, $1, inFresh: false, entries) } }
    }
}

/// A first-in first-out queue of (connection, ticket): an array and the index of its head.
struct TicketQueue {
    private var items: [(id: ConnectionShedder.ID, ticket: UInt64)] = []
    private var head = 0

    var count: Int { items.count - head }

    var first: (id: ConnectionShedder.ID, ticket: UInt64)? { head < items.count ? items[head] : nil }

    mutating func append(id: ConnectionShedder.ID, ticket: UInt64) { items.append((id, ticket)) }

    mutating func removeFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    mutating func retain(_ keep: (ConnectionShedder.ID, UInt64) -> Bool) {
        items = items[head...].filter { keep($0.id, $0.ticket) }
        head = 0
    }
}
