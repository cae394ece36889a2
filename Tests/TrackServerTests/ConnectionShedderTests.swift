import Geo
import Testing

@testable import TrackServer

/// The connection cap's decisions, without sockets: which connection is shed to make room, which is
/// refused, which expires, on instants a test chooses.
@Suite("ConnectionShedder: the connection cap's decisions")
struct ConnectionShedderTests {
    typealias Shedder = ConnectionShedder

    static let t0 = EpochInstant(secondsSince1970: 1_700_000_000)

    static func at(_ seconds: Double) -> EpochInstant { t0.advanced(by: .milliseconds(Int64(seconds * 1000))) }

    static func shedder(cap: Int, timeout: Duration = .seconds(10)) -> Shedder {
        Shedder(settings: .init(cap: cap, firstRequestTimeout: timeout))
    }

    /// Opens a connection that must be admitted without shedding anything; its id.
    static func open(_ s: inout Shedder, at seconds: Double) -> Shedder.ID {
        guard case .admit(let id, nil, nil, _) = s.opened(at: at(seconds)) else {
            Issue.record("expected an admission without shedding")
            return 0
        }
        return id
    }

    /// One complete request and its answer.
    static func serve(_ s: inout Shedder, _ id: Shedder.ID, at seconds: Double) {
        s.requestHead(id)
        s.answered(id, at: at(seconds))
    }

    @Test func admitsBelowTheCapWithoutSheddingAndArmsTheTimerForTheFirstDeadlineOnly() {
        var s = Self.shedder(cap: 3)
        #expect(s.opened(at: Self.at(0)) == .admit(id: 1, shed: nil, reason: nil, armTimer: true))
        #expect(s.opened(at: Self.at(1)) == .admit(id: 2, shed: nil, reason: nil, armTimer: false))
        #expect(s.count == 2)
        #expect(s.nextDeadline() == Self.at(10))
    }

    @Test func shedsTheOldestConnectionWithoutARequestHeadAtTheCap() {
        var s = Self.shedder(cap: 3)
        let a = Self.open(&s, at: 0)
        let b = Self.open(&s, at: 1)
        let c = Self.open(&s, at: 2)
        #expect(s.opened(at: Self.at(3)) == .admit(id: 4, shed: a, reason: .awaitingFirstHead, armTimer: false))
        #expect(s.opened(at: Self.at(4)) == .admit(id: 5, shed: b, reason: .awaitingFirstHead, armTimer: false))
        #expect(s.count == 3)
        #expect(s.entries[c]?.phase == .awaitingFirstHead)
    }

    @Test func prefersAConnectionWithoutAHeadToAnOlderIdleOne() {
        var s = Self.shedder(cap: 2)
        let keepAlive = Self.open(&s, at: 0)
        Self.serve(&s, keepAlive, at: 0.1)
        let silent = Self.open(&s, at: 5)
        #expect(s.opened(at: Self.at(6)) == .admit(id: 3, shed: silent, reason: .awaitingFirstHead, armTimer: true))
        #expect(s.entries[keepAlive]?.phase == .idle(since: Self.at(0.1)))
    }

    @Test func shedsTheConnectionIdleTheLongestWhenEveryOtherIsIdleOrBusy() {
        var s = Self.shedder(cap: 3)
        let a = Self.open(&s, at: 0)
        let b = Self.open(&s, at: 0)
        let c = Self.open(&s, at: 0)
        Self.serve(&s, b, at: 1)  // b idle since 1
        Self.serve(&s, a, at: 2)  // a idle since 2
        s.requestHead(c)  // c busy
        #expect(s.opened(at: Self.at(3)) == .admit(id: 4, shed: b, reason: .idle, armTimer: true))
        // a was served again: idle since 4, now newer than nothing else idle; c is still busy.
        Self.serve(&s, a, at: 4)
        s.requestHead(4)
        #expect(s.opened(at: Self.at(5)) == .admit(id: 5, shed: a, reason: .idle, armTimer: true))
    }

    @Test func refusesWhenEveryConnectionIsBusyOrUpgraded() {
        var s = Self.shedder(cap: 2)
        let a = Self.open(&s, at: 0)
        let b = Self.open(&s, at: 0)
        s.requestHead(a)
        s.requestHead(b)
        s.answered(b, at: Self.at(1))
        s.upgraded(b)  // an upgrade answered with its 101 is a WebSocket now, not an idle connection
        #expect(s.opened(at: Self.at(2)) == .refuse)
        #expect(s.count == 2)
        // The busy one answers: it is idle, and makes room.
        s.answered(a, at: Self.at(3))
        #expect(s.opened(at: Self.at(4)) == .admit(id: 3, shed: a, reason: .idle, armTimer: true))
    }

    @Test func anUpgradedConnectionNeitherExpiresNorIsShed() {
        var s = Self.shedder(cap: 1)
        let ws = Self.open(&s, at: 0)
        s.requestHead(ws)
        s.upgraded(ws)
        #expect(s.nextDeadline() == nil)
        #expect(s.expire(at: Self.at(100)) == [])
        #expect(s.opened(at: Self.at(100)) == .refuse)
        // Later HTTP events on it (there are none after an upgrade) change nothing.
        s.answered(ws, at: Self.at(101))
        s.requestHead(ws)
        #expect(s.entries[ws]?.phase == .upgraded)
    }

    @Test func pipelinedRequestsKeepAConnectionBusyUntilTheLastAnswer() {
        var s = Self.shedder(cap: 1)
        let a = Self.open(&s, at: 0)
        s.requestHead(a)
        s.requestHead(a)
        s.answered(a, at: Self.at(1))
        #expect(s.entries[a]?.phase == .busy(requests: 1))
        #expect(s.opened(at: Self.at(1)) == .refuse)
        s.answered(a, at: Self.at(2))
        #expect(s.entries[a]?.phase == .idle(since: Self.at(2)))
    }

    @Test func expiresConnectionsWithoutAHeadAtTheirFirstRequestDeadlineOnly() {
        var s = Self.shedder(cap: 10)
        let a = Self.open(&s, at: 0)
        let b = Self.open(&s, at: 1)
        let c = Self.open(&s, at: 2)
        Self.serve(&s, b, at: 3)  // b completed a head: no first-request deadline any more
        #expect(s.nextDeadline() == Self.at(10))
        #expect(s.expire(at: Self.at(9.999)) == [])
        #expect(s.expire(at: Self.at(10)) == [a])
        #expect(s.nextDeadline() == Self.at(12))  // b's ticket is skipped: c is next
        #expect(s.expire(at: Self.at(30)) == [c])
        #expect(s.nextDeadline() == nil)
        #expect(s.count == 1)
        #expect(s.entries[b] != nil, "an idle connection is the keep-alive timeout's, not the first request's")
    }

    @Test func aHeadStartedButNotCompletedStillExpires() {
        // The decoder reports a head only once complete: a slowloris dripping bytes stays awaiting.
        var s = Self.shedder(cap: 10, timeout: .seconds(10))
        let slow = Self.open(&s, at: 0)
        #expect(s.expire(at: Self.at(10)) == [slow])
    }

    @Test func eventsForAConnectionAlreadyShedOrExpiredAreIgnored() {
        var s = Self.shedder(cap: 1)
        let a = Self.open(&s, at: 0)
        guard case .admit(let b, .some(a), .awaitingFirstHead?, _) = s.opened(at: Self.at(1)) else {
            Issue.record("a is shed")
            return
        }
        s.requestHead(a)
        s.answered(a, at: Self.at(2))
        s.upgraded(a)
        s.closed(a)  // its channel's close arrives after the shed
        #expect(s.count == 1)
        #expect(s.entries[b]?.phase == .awaitingFirstHead)
        #expect(s.expire(at: Self.at(11)) == [b])
        s.closed(b)
        #expect(s.count == 0)
    }

    @Test(arguments: [1, 20, 716])
    func anIdleFloodNeverDisplacesARequestThatArrivedAfterIt(cap: Int) {
        // `cap` idle connections, then a real client's connection sends its head; then the flood
        // goes on, 10 times the cap: the real client stays, the flood sheds itself, oldest first.
        var s = Self.shedder(cap: cap + 1)
        var flood: [Shedder.ID] = []
        for i in 0..<cap { flood.append(Self.open(&s, at: Double(i) * 0.001)) }
        let real = Self.open(&s, at: 1)
        s.requestHead(real)
        var shed: [Shedder.ID] = []
        for i in 0..<(10 * cap) {
            guard
                case .admit(let id, let victim?, .awaitingFirstHead?, _) = s.opened(at: Self.at(2 + Double(i) * 0.001))
            else {
                Issue.record("each newcomer sheds a connection without a head")
                return
            }
            shed.append(victim)
            flood.append(id)
        }
        #expect(shed == Array(flood.prefix(10 * cap)), "oldest first")
        #expect(s.entries[real]?.phase == .busy(requests: 1))
        #expect(s.count == cap + 1)
    }

    @Test func staleTicketsDoNotAccumulateOnALongKeepAliveConnection() {
        var s = Self.shedder(cap: 2)
        let a = Self.open(&s, at: 0)
        for i in 0..<100_000 { Self.serve(&s, a, at: Double(i) * 0.001) }
        let b = Self.open(&s, at: 200)
        // Each newcomer is alone awaiting its head once the other is shed: the timer is armed anew.
        #expect(s.opened(at: Self.at(201)) == .admit(id: 3, shed: b, reason: .awaitingFirstHead, armTimer: true))
        #expect(s.opened(at: Self.at(202)) == .admit(id: 4, shed: 3, reason: .awaitingFirstHead, armTimer: true))
        s.requestHead(4)
        #expect(s.opened(at: Self.at(203)) == .admit(id: 5, shed: a, reason: .idle, armTimer: true))
    }

    /// A naive model of the rules, checked against the shedder over random event sequences: the cap
    /// holds, only connections without a head or idle ones are shed (those without a head first,
    /// oldest first), a newcomer is refused only when nothing can be shed, and exactly the
    /// connections whose first-request deadline passed expire.
    @Test(arguments: [1, 2, 7, 50] as [UInt64])
    func agreesWithANaiveModelOverRandomEvents(seed: UInt64) {
        struct Model {
            var phase: Shedder.Phase
            var opened: Int  // milliseconds
            var since: Int  // the order it became sheddable in
        }
        var random = SeededRandom(seed: seed)
        let cap = Int(seed % 5) + 2
        var s = Self.shedder(cap: cap, timeout: .seconds(10))
        var model: [Shedder.ID: Model] = [:]
        var now = 0  // milliseconds
        var order = 0
        for _ in 0..<20_000 {
            now += Int(random.next() % 1000)
            order += 1
            let ids = model.keys.sorted()
            let pick = ids.isEmpty ? nil : ids[Int(random.next() % UInt64(ids.count))]
            switch random.next() % 7 {
            case 0, 1:
                let awaiting = model.filter { $0.value.phase == .awaitingFirstHead }
                let idle = model.filter { if case .idle = $0.value.phase { true } else { false } }
                let action = s.opened(at: Self.t0.advanced(by: .milliseconds(now)))
                if model.count < cap {
                    guard case .admit(let id, nil, nil, _) = action else {
                        Issue.record("below the cap: \(action)")
                        return
                    }
                    model[id] = Model(phase: .awaitingFirstHead, opened: now, since: order)
                } else if let oldest = awaiting.min(by: { $0.value.since < $1.value.since }) {
                    guard case .admit(let id, oldest.key?, .awaitingFirstHead?, _) = action else {
                        Issue.record("expected \(oldest.key) shed (no head yet): \(action)")
                        return
                    }
                    model[oldest.key] = nil
                    model[id] = Model(phase: .awaitingFirstHead, opened: now, since: order)
                } else if let oldest = idle.min(by: { $0.value.since < $1.value.since }) {
                    guard case .admit(let id, oldest.key?, .idle?, _) = action else {
                        Issue.record("expected \(oldest.key) shed (idle): \(action)")
                        return
                    }
                    model[oldest.key] = nil
                    model[id] = Model(phase: .awaitingFirstHead, opened: now, since: order)
                } else {
                    #expect(action == .refuse)
                }
            case 2:
                guard let id = pick else { continue }
                s.requestHead(id)
                switch model[id]!.phase {
                case .awaitingFirstHead, .idle: model[id]!.phase = .busy(requests: 1)
                case .busy(let n): model[id]!.phase = .busy(requests: n + 1)
                case .upgraded: break
                }
            case 3, 4:
                guard let id = pick else { continue }
                s.answered(id, at: Self.t0.advanced(by: .milliseconds(now)))
                if case .busy(let n) = model[id]!.phase {
                    if n > 1 {
                        model[id]!.phase = .busy(requests: n - 1)
                    } else {
                        model[id]!.phase = .idle(since: Self.t0.advanced(by: .milliseconds(now)))
                        model[id]!.since = order
                    }
                }
            case 5:
                guard let id = pick else { continue }
                if random.next() % 4 == 0 {
                    s.upgraded(id)
                    model[id]!.phase = .upgraded
                } else {
                    s.closed(id)
                    model[id] = nil
                }
            default:
                let due = model.filter { $0.value.phase == .awaitingFirstHead && $0.value.opened + 10_000 <= now }
                #expect(Set(s.expire(at: Self.t0.advanced(by: .milliseconds(now)))) == Set(due.keys))
                for id in due.keys { model[id] = nil }
            }
            #expect(s.count == model.count)
            #expect(s.count <= cap)
            #expect(s.entries.mapValues(\.phase) == model.mapValues(\.phase))
        }
    }

    @Test(arguments: [(1024, 716), (20_000, 15_897), (1_048_576, 16_384), (Int.max, 16_384), (300, 108), (100, 1)])
    func sizesTheCapFromTheDescriptorLimit(descriptors: Int, cap: Int) {
        #expect(TrackServer.Configuration.connectionCap(descriptors: descriptors) == cap)
    }
}
