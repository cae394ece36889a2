import Lifecycle
import Testing

typealias State = AppLifecycle.State

/// The transitions in `events`, as (to, time).
func transitions(_ events: [AppLifecycle.Event]) -> [(State, Double)] {
    events.compactMap { if case .transition(let t) = $0 { (t.to, t.time) } else { nil } }
}

func reasons(_ events: [AppLifecycle.Event]) -> [AppLifecycle.Reason] {
    events.compactMap { if case .transition(let t) = $0 { t.reason } else { nil } }
}

/// A launched app moved to the background at t = 100.
func backgrounded(_ policy: BackgroundPolicy = .ios7, modes: BackgroundModes = []) -> AppLifecycle {
    var app = AppLifecycle(policy: policy, modes: modes)
    _ = app.launch(at: 0)
    _ = app.enterBackground(at: 100)
    return app
}

@Suite("AppLifecycle: states")
struct StateTests {
    @Test func launchesActiveAndGoesToTheBackgroundThroughInactive() {
        var app = AppLifecycle()
        #expect(app.state == .notRunning)
        #expect(transitions(app.launch(at: 0)).map(\.0) == [.active])
        #expect(transitions(app.enterBackground(at: 10)).map(\.0) == [.inactive, .background])
        #expect(transitions(app.enterForeground(at: 12)).map(\.0) == [.inactive, .active])
        #expect(transitions(app.resignActive(at: 13)).map(\.0) == [.inactive])
        #expect(transitions(app.becomeActive(at: 14)).map(\.0) == [.active])
    }

    @Test func backgroundTimeIsUnboundedInTheForegroundAndCountsDownInTheBackground() {
        var app = AppLifecycle()
        _ = app.launch(at: 0)
        #expect(app.backgroundTimeRemaining(at: 50) == .greatestFiniteMagnitude)
        _ = app.enterBackground(at: 100)
        #expect(app.backgroundTimeRemaining(at: 100) == 180)
        #expect(app.backgroundTimeRemaining(at: 130) == 150)
        #expect(app.backgroundTimeRemaining(at: 400) == 0)
    }

    @Test(arguments: [(BackgroundPolicy.ios6, 600.0), (.ios7, 180), (.ios13, 30)])
    func eachPolicyStartsTheCountdownAtItsBudget(policy: BackgroundPolicy, budget: Double) {
        let app = backgrounded(policy)
        #expect(app.backgroundTimeRemaining(at: 100) == budget)
    }

    @Test func foregroundInputsDoNothingInOtherStates() {
        var app = AppLifecycle()
        #expect(app.enterForeground(at: 0).isEmpty)
        #expect(app.enterBackground(at: 0).isEmpty)
        #expect(app.begin(name: "x", at: 0) == .invalid)
        _ = app.launch(at: 0)
        #expect(app.becomeActive(at: 1).isEmpty)
    }

    @Test func terminatedIsFinal() {
        var app = backgrounded()
        #expect(transitions(app.terminate(at: 101)).map(\.0) == [.terminated])
        #expect(app.begin(name: "late", at: 102) == .invalid)
        #expect(app.wake(.significantChange, at: 103).isEmpty)
        #expect(app.enterForeground(at: 104).isEmpty)
        #expect(app.nextDeadline == nil)
    }
}

@Suite("AppLifecycle: keep-alive rules")
struct KeepAliveRuleTests {
    @Test func rule1_anIdleAppIsSuspendedAfterTheGracePeriod() {
        var app = backgrounded()
        #expect(app.nextDeadline == 105)
        #expect(app.advance(to: 104.9).isEmpty)
        let events = app.advance(to: 200)
        #expect(transitions(events).map(\.0) == [.suspended])
        #expect(transitions(events).map(\.1) == [105])
        #expect(reasons(events) == [.noBackgroundWork(grace: 5)])
        #expect(app.backgroundTimeRemaining(at: 200) == 0)
    }

    @Test func rule1_graceStartsAgainWhenTheLastTaskEnds() {
        var app = backgrounded()
        let id = app.begin(name: "save", at: 101)
        #expect(app.advance(to: 140).isEmpty)
        app.end(id, at: 140)
        #expect(app.nextDeadline == 145)
        #expect(transitions(app.advance(to: 145)).map(\.1) == [145])
    }

    @Test func rule2_expirationHandlersRunAtTheWarningLeadAndTheAppSuspendsAtZero() {
        var app = backgrounded()
        let a = app.begin(name: "upload", at: 100)
        let b = app.begin(name: "save", at: 101)
        #expect(app.nextDeadline == 275)
        let warned = app.advance(to: 275)
        #expect(warned == [.expiring(a, name: "upload", time: 275), .expiring(b, name: "save", time: 275)])
        // The handlers end their tasks.
        app.end(a, at: 275)
        app.end(b, at: 275)
        let events = app.advance(to: 1000)
        #expect(transitions(events).map(\.0) == [.suspended])
        #expect(transitions(events).map(\.1) == [280])
        #expect(reasons(events) == [.backgroundTimeExpired(budget: 180)])
    }

    /// A lead longer than the grace: the handlers end the task with time left, and the idle app is
    /// suspended the grace after, said as no background work (the time did not run out).
    @Test func rule2_tasksEndedByTheirHandlersBeforeZeroLeaveTheAppIdle() {
        var app = backgrounded(BackgroundPolicy(budget: 60, warningLead: 20, grace: 2))
        let task = app.begin(name: "upload", at: 100)
        #expect(app.advance(to: 140) == [.expiring(task, name: "upload", time: 140)])
        app.end(task, at: 140)
        let events = app.advance(to: 1000)
        #expect(transitions(events).map(\.0) == [.suspended])
        #expect(transitions(events).map(\.1) == [142])
        #expect(reasons(events) == [.noBackgroundWork(grace: 2)])
    }

    @Test func rule2_eachHandlerRunsOnce() {
        var app = backgrounded()
        _ = app.begin(name: "upload", at: 100)
        #expect(app.advance(to: 275).count == 1)
        #expect(app.advance(to: 279).isEmpty)
    }

    @Test func rule3_aTaskNeverEndedGetsTheAppTerminatedWithItsName() {
        var app = backgrounded()
        _ = app.begin(name: "upload", at: 100)
        let events = app.advance(to: 1000)
        #expect(events.count == 2)
        #expect(transitions(events).map(\.0) == [.terminated])
        #expect(transitions(events).map(\.1) == [280])
        #expect(reasons(events) == [.tasksNotEnded(["upload"])])
        #expect(
            AppLifecycle.Reason.tasksNotEnded(["upload"]).description
                == "background task 'upload' not ended before the background time ran out")
    }

    @Test func rule4_beginningTasksDoesNotExtendTheBudget() {
        var app = backgrounded()
        var id = app.begin(name: "work", at: 100)
        // Restart in the last seconds before the warning: still the same end.
        for t in stride(from: 110.0, to: 270, by: 20) {
            let next = app.begin(name: "work", at: t)
            #expect(next != .invalid)
            app.end(id, at: t)
            id = next
        }
        #expect(app.backgroundTimeRemaining(at: 270) == 10)
        // In the handler (remaining = warning lead) a new task is refused.
        _ = app.advance(to: 275)
        #expect(app.begin(name: "work", at: 275) == .invalid)
        app.end(id, at: 275)
        #expect(transitions(app.advance(to: 280)).map(\.0) == [.suspended])
    }

    @Test func rule4_tasksAreRefusedWhenNotRunning() {
        var app = backgrounded()
        _ = app.advance(to: 105)
        #expect(app.state == .suspended)
        #expect(app.begin(name: "late", at: 106) == .invalid)
        #expect(app.end(.invalid, at: 106) == false)
    }

    @Test func rule5_wakesNeverGiveTaskTimePastTheCap() {
        // ios7: 180 s budget, 600 s cap from entering the background at 100.
        var app = backgrounded(.ios7)
        _ = app.advance(to: 105)
        _ = app.wake(.significantChange, at: 400)
        #expect(app.backgroundTimeRemaining(at: 400) == 10)
        let early = app.begin(name: "upload", at: 401)
        #expect(early != .invalid)
        #expect(app.backgroundTimeRemaining(at: 401) == 179)
        app.end(early, at: 402)
        _ = app.advance(to: 600)
        #expect(app.state == .suspended)
        // At 650 only 50 s of the cap remain.
        _ = app.wake(.significantChange, at: 650)
        let late = app.begin(name: "upload", at: 650)
        #expect(app.backgroundTimeRemaining(at: 650) == 50)
        app.end(late, at: 651)
        // Past the cap a wake gives only its window, and tasks are refused in its last 5 s.
        _ = app.advance(to: 800)
        _ = app.wake(.significantChange, at: 900)
        #expect(app.begin(name: "upload", at: 904) != .invalid)
        #expect(app.backgroundTimeRemaining(at: 904) == 6)
        #expect(app.begin(name: "upload", at: 905) == .invalid)
    }

    @Test func rule5_ios13HasNoCap() {
        var app = backgrounded(.ios13)
        _ = app.advance(to: 105)
        _ = app.wake(.significantChange, at: 5000)
        _ = app.begin(name: "upload", at: 5000)
        #expect(app.backgroundTimeRemaining(at: 5000) == 30)
    }

    @Test func rule6_deliveredLocationsRefreshTheBudgetOnlyWithTheModeAndActiveUpdates() {
        var withMode = backgrounded(modes: .location)
        withMode.setLocationUpdates(active: true, at: 100)
        var withoutMode = backgrounded()
        withoutMode.setLocationUpdates(active: true, at: 100)
        for t in stride(from: 101.0, through: 3600, by: 1) {
            _ = withMode.advance(to: t)
            _ = withMode.locationDelivered(at: t)
            _ = withoutMode.advance(to: t)
            _ = withoutMode.locationDelivered(at: t)
        }
        #expect(withMode.state == .background)
        #expect(withMode.backgroundTimeRemaining(at: 3600) == 180)
        #expect(withoutMode.state == .suspended)
        // Stopped updates don't refresh.
        withMode.setLocationUpdates(active: false, at: 3600)
        #expect(withMode.locationDelivered(at: 3601).isEmpty)
        #expect(transitions(withMode.advance(to: 4000)).map(\.1) == [3605])
    }

    @Test func rule6_withUpdatesActiveButNoLocationTheAppLastsOneBudget() {
        var app = backgrounded(modes: .location)
        app.setLocationUpdates(active: true, at: 100)
        _ = app.locationDelivered(at: 150)
        let events = app.advance(to: 1000)
        #expect(transitions(events).map(\.1) == [330])
        #expect(reasons(events) == [.backgroundTimeExpired(budget: 180)])
    }

    @Test func rule6_aRefreshWarnsOpenTasksAgainOnlyAfterTheNewBudget() {
        var app = backgrounded(modes: .location)
        app.setLocationUpdates(active: true, at: 100)
        let id = app.begin(name: "pulse", at: 100)
        _ = app.locationDelivered(at: 160)
        #expect(app.nextDeadline == 335)
        #expect(app.advance(to: 335) == [.expiring(id, name: "pulse", time: 335)])
    }

    @Test func rule7_playbackKeepsTheAppRunningWithoutACountdown() {
        var app = backgrounded(modes: .audio)
        app.setAudio(playing: true, at: 100)
        #expect(app.nextDeadline == nil)
        #expect(app.backgroundTimeRemaining(at: 100_000) == .greatestFiniteMagnitude)
        app.setAudio(playing: false, at: 100_000)
        #expect(transitions(app.advance(to: 200_000)).map(\.1) == [100_005])
        // Without the declared mode, playback changes nothing.
        var undeclared = backgrounded()
        undeclared.setAudio(playing: true, at: 100)
        #expect(transitions(undeclared.advance(to: 200)).map(\.1) == [105])
    }

    @Test(arguments: [AppLifecycle.WakeReason.significantChange, .region("home")])
    func rule8_aWakeRunsASuspendedAppForTheWakeWindow(reason: AppLifecycle.WakeReason) {
        var app = backgrounded()
        _ = app.advance(to: 105)
        let woken = app.wake(reason, at: 1000)
        #expect(transitions(woken).map(\.0) == [.background])
        #expect(reasons(woken) == [.woken(reason)])
        // Suspended again at the window's end, said as such (it said the 180 s budget had run out).
        let ended = app.advance(to: 2000)
        #expect(transitions(ended).map(\.1) == [1010])
        #expect(reasons(ended) == [.wakeWindowEnded(window: 10)])
        #expect(reasons(ended).map(\.description) == ["the wake window ended (10 s) with no background task begun"])
    }

    @Test func rule8_aWakeLaunchesAnAppThatIsNotRunning() {
        var app = AppLifecycle()
        let events = app.wake(.significantChange, at: 0)
        #expect(transitions(events).map(\.0) == [.background])
        #expect(reasons(events) == [.launched])
        #expect(transitions(app.advance(to: 100)).map(\.1) == [10])
    }

    @Test func rule8_fetchWakesASuspendedAppEveryFetchInterval() {
        var app = backgrounded(modes: .fetch)
        let events = app.advance(to: 3000)
        let states = transitions(events)
        #expect(
            states.map(\.0) == [.suspended, .background, .suspended, .background, .suspended, .background, .suspended])
        #expect(states.map(\.1) == [105, 1005, 1015, 1915, 1925, 2825, 2835])
    }

    @Test func rule9_tasksNeverExpireInTheForegroundAndABackgroundStretchStartsAfresh() {
        var app = AppLifecycle()
        _ = app.launch(at: 0)
        let id = app.begin(name: "long", at: 0)
        #expect(app.nextDeadline == nil)
        _ = app.enterBackground(at: 5000)
        #expect(app.nextDeadline == 5175)
        _ = app.enterForeground(at: 5100)
        #expect(app.nextDeadline == nil)
        app.end(id, at: 6000)
        _ = app.enterBackground(at: 7000)
        #expect(app.backgroundTimeRemaining(at: 7000) == 180)
    }
}

@Suite("BackgroundPolicy and modes")
struct PolicyTests {
    @Test func namedPoliciesAndTheirNumbers() {
        #expect(BackgroundPolicy(named: "ios6")?.budget == 600)
        #expect(BackgroundPolicy(named: "ios7")?.totalCap == 600)
        #expect(BackgroundPolicy(named: "ios13")?.totalCap == nil)
        #expect(BackgroundPolicy(named: "ios99") == nil)
    }

    @Test(arguments: [
        (BackgroundPolicy(budget: 0), "the budget must be a positive number of seconds"),
        (BackgroundPolicy(budget: 10, warningLead: 10), "the warning lead must be at least 0 and less than the budget"),
        (BackgroundPolicy(budget: 10, totalCap: 5), "the total cap must be at least the budget"),
        (BackgroundPolicy(budget: 10, grace: -1), "the grace period must be 0 or more seconds"),
    ])
    func invalidCustomPoliciesSayWhy(policy: BackgroundPolicy, problem: String) {
        #expect(policy.problem?.requirement == problem)
    }

    @Test func modesParseFromAList() {
        #expect(BackgroundModes(list: "location,fetch") == [.location, .fetch])
        #expect(BackgroundModes(list: "none") == [])
        #expect(BackgroundModes(list: "location,gps") == nil)
        #expect(BackgroundModes([.audio, .location]).description == "location,audio")
    }
}

@Suite("AppLifecycle: every state × input")
struct TransitionTableTests {
    enum Input: String, CaseIterable {
        case resignActive, becomeActive, enterBackground, enterForeground, wake, terminate
    }

    /// An app in `state` at t = 100.
    static func app(in state: State) -> AppLifecycle {
        var app = AppLifecycle()
        switch state {
        case .notRunning: break
        case .active: _ = app.launch(at: 0)
        case .inactive:
            _ = app.launch(at: 0)
            _ = app.resignActive(at: 0)
        case .background: app = backgrounded()
        case .suspended:
            app = backgrounded()
            _ = app.advance(to: 105)
        case .terminated:
            _ = app.launch(at: 0)
            _ = app.terminate(at: 0)
        }
        #expect(app.state == state)
        return app
    }

    static let expected: [State: [Input: State]] = [
        .notRunning: [
            .resignActive: .notRunning, .becomeActive: .notRunning, .enterBackground: .notRunning,
            .enterForeground: .notRunning, .wake: .background, .terminate: .terminated,
        ],
        .active: [
            .resignActive: .inactive, .becomeActive: .active, .enterBackground: .background,
            .enterForeground: .active, .wake: .active, .terminate: .terminated,
        ],
        .inactive: [
            .resignActive: .inactive, .becomeActive: .active, .enterBackground: .background,
            .enterForeground: .inactive, .wake: .inactive, .terminate: .terminated,
        ],
        .background: [
            .resignActive: .background, .becomeActive: .background, .enterBackground: .background,
            .enterForeground: .active, .wake: .background, .terminate: .terminated,
        ],
        .suspended: [
            .resignActive: .suspended, .becomeActive: .suspended, .enterBackground: .suspended,
            .enterForeground: .active, .wake: .background, .terminate: .terminated,
        ],
        .terminated: [
            .resignActive: .terminated, .becomeActive: .terminated, .enterBackground: .terminated,
            .enterForeground: .terminated, .wake: .terminated, .terminate: .terminated,
        ],
    ]

    @Test(arguments: State.allCases)
    func eachInputLeadsToTheDocumentedState(from state: State) {
        for input in Input.allCases {
            var app = Self.app(in: state)
            let events: [AppLifecycle.Event]
            switch input {
            case .resignActive: events = app.resignActive(at: 200)
            case .becomeActive: events = app.becomeActive(at: 200)
            case .enterBackground: events = app.enterBackground(at: 200)
            case .enterForeground: events = app.enterForeground(at: 200)
            case .wake: events = app.wake(.significantChange, at: 200)
            case .terminate: events = app.terminate(at: 200)
            }
            let want = Self.expected[state]![input]!
            #expect(app.state == want, "\(state) + \(input)")
            // A change of state is always reported, and nothing is reported without one.
            #expect(transitions(events).last?.0 == (want == state ? nil : want), "\(state) + \(input)")
        }
    }
}
