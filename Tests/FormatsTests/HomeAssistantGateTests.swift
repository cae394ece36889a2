import Formats
import Testing

/// Issue 39: when positions may go to Home Assistant (``HomeAssistantGate``), event by event.
@Suite("Home Assistant gate")
struct HomeAssistantGateTests {
    enum Event {
        case connected(Double)
        case announced(Double)
        case heard(HomeAssistantGate.Status)
        /// What the gate decides at this time.
        case decide(Double, HomeAssistantGate.Decision)
    }

    static let cases: [(String, [Event])] = [
        (
            "a first connection announces, then settles 2 s",
            [
                .connected(100), .decide(100, .announce), .announced(100.5), .decide(101, .wait(until: 102.5)),
                .decide(102.5, .publish),
            ]
        ),
        (
            "Home Assistant's offline holds positions until its online, which is answered by announcing again",
            [
                .connected(0), .announced(0), .decide(5, .publish), .heard(.offline), .decide(6, .wait(until: nil)),
                .decide(1000, .wait(until: nil)), .heard(.online), .decide(1001, .announce), .announced(1001),
                .decide(1003, .publish),
            ]
        ),
        (
            "a reconnection waits for Home Assistant's birth message, at most 30 s",
            [
                .connected(0), .announced(0), .decide(3, .publish), .connected(50), .decide(50, .announce),
                .announced(50), .decide(53, .wait(until: 80)), .decide(80, .publish),
            ]
        ),
        (
            "a birth message ends a reconnection's wait (and is answered by announcing again)",
            [
                .connected(0), .announced(0), .connected(50), .announced(50), .decide(55, .wait(until: 80)),
                .heard(.online), .decide(56, .announce), .announced(56), .decide(58, .publish),
            ]
        ),
        (
            "an offline heard before a reconnection is stale after it: the birth wait bounds it",
            [
                .connected(0), .announced(0), .heard(.offline), .connected(10), .announced(10),
                .decide(20, .wait(until: 40)), .decide(40, .publish),
            ]
        ),
        (
            "an online without an offline before (Home Assistant reconnected) announces again",
            [.connected(0), .announced(0), .decide(2, .publish), .heard(.online), .decide(3, .announce)]
        ),
    ]

    @Test(arguments: cases)
    func decides(_ name: String, events: [Event]) {
        var gate = HomeAssistantGate()
        for (i, event) in events.enumerated() {
            switch event {
            case .connected(let now): gate.connected(now: now)
            case .announced(let now): gate.announced(now: now)
            case .heard(let status): gate.heard(status)
            case .decide(let now, let expected):
                #expect(gate.decide(now: now) == expected, "\(name): event \(i)")
            }
        }
    }

    @Test func theStatusTopicsPayloadIsReadAsHomeAssistantWritesIt() {
        #expect(HomeAssistantGate.Status(payload: Array("online".utf8)) == .online)
        #expect(HomeAssistantGate.Status(payload: Array("offline".utf8)) == .offline)
        #expect(HomeAssistantGate.Status(payload: Array("Online".utf8)) == .unknown)
        #expect(HomeAssistantGate.Status(payload: []) == .unknown)
    }
}
