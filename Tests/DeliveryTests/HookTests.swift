import Delivery
import EndpointEvents
import Testing

/// Hooks' settings, their addresses, topics and signatures.
@Suite("Hooks: settings, addresses, signatures")
struct HookTests {
    @Test(arguments: [
        ("127.0.0.1", false), ("10.0.0.1", false), ("172.16.5.4", false), ("172.32.0.1", true),
        ("192.168.1.1", false), ("100.64.0.1", false), ("100.128.0.1", true), ("169.254.169.254", false),
        ("0.0.0.0", false), ("224.0.0.1", false), ("255.255.255.255", false), ("192.0.2.7", false),
        ("198.51.100.1", false), ("203.0.113.9", false), ("198.18.0.1", false), ("8.8.8.8", true),
        ("93.184.216.34", true), ("::1", false), ("::", false), ("fe80::1", false), ("fd12:3456::1", false),
        ("fec0::1", false), ("ff02::1", false), ("2001:db8::1", false), ("::ffff:127.0.0.1", false),
        ("::ffff:8.8.8.8", true), ("64:ff9b::a00:1", false), ("64:ff9b::808:808", true), ("2002:0a00:0001::1", false),
        ("2002:0808:0808::1", true), ("2001::1", false), ("2606:4700:4700::1111", true), ("4000::1", false),
    ])
    func onlyPublicUnicastAddressesAreAllowed(address: String, isPublic: Bool) throws {
        let bytes = try #require(HookAddresses.literal(address), "\(address) is no literal")
        #expect(HookAddresses.isPublic(bytes) == isPublic, "\(address)")
    }

    @Test func namesAreResolvedAndEveryAddressChecked() async throws {
        await #expect(throws: DeliveryFailure.self) {
            _ = try await HookAddresses.checked("localhost", allowPrivate: false)
        }
        let allowed = try await HookAddresses.checked("localhost", allowPrivate: true)
        #expect(!HookAddresses.isPublic(allowed))
        do {
            _ = try await HookAddresses.checked("no-such-host.invalid", allowPrivate: true)
            Issue.record("an unresolvable name resolved")
        } catch {
            #expect(error.code == .unresolvable)
        }
    }

    @Test func aHooksSettingsAreCheckedByField() {
        let ok = Hook(
            name: "n", type: .webhook, url: "https://example.com/hook", secret: String(repeating: "s", count: 16))
        #expect(ok.problem == nil)
        var h = ok
        h.name = ""
        #expect(h.problem == .name("the name must have 1 to 128 bytes, has 0"))
        h = ok
        h.secret = "short"
        #expect(h.problem == .secret)
        for url in [
            "ftp://example.com/", "https://", "example.com/hook", "https://user:pw@example.com/", "https://e.com/#x",
        ] {
            h = ok
            h.url = url
            guard case .url = h.problem else {
                Issue.record("\(url) taken")
                continue
            }
        }
        h = ok
        h.devices = []
        #expect(h.problem == .devices("the device list is empty (leave it out for every device)"))
        h = ok
        h.kinds = []
        #expect(h.problem == .kinds)
        var mqtt = Hook(name: "m", type: .mqtt, url: "mqtt://broker.example.com", secret: "")
        #expect(mqtt.problem == nil)
        #expect(mqtt.target.port == 1883)
        mqtt.topic = "keeptrack/+/event"
        #expect(mqtt.problem == .topic("a topic to publish to has no wildcards (+, #)"))
        mqtt.url = "https://example.com"
        guard case .url = mqtt.problem else {
            Issue.record("an MQTT hook took an https URL")
            return
        }
    }

    @Test func aHookWantsItsKindsAndDevices() {
        var h = Hook(name: "n", type: .webhook, url: "https://example.com/", secret: String(repeating: "s", count: 16))
        #expect(h.wants(event("van-1", 1)))
        h.kinds = [.geofenceExit]
        #expect(!h.wants(event("van-1", 1)))
        #expect(h.wants(event("van-1", 1, kind: .geofenceExit)))
        h.devices = ["van-2"]
        #expect(!h.wants(event("van-1", 1, kind: .geofenceExit)))
        #expect(h.wants(event("van-2", 1, kind: .geofenceExit)))
    }

    @Test func theTopicNamesTheDeviceAsOneLevel() {
        let h = Hook(name: "m", type: .mqtt, url: "mqtt://b", secret: "", topic: "fleet/{device}/{kind}")
        #expect(h.topic(device: "van-1", kind: .geofenceEnter) == "fleet/van-1/geofenceEnter")
        #expect(h.topic(device: "a/b+c#d%", kind: .online) == "fleet/a%2Fb%2Bc%23d%25/online")
        // A test event (`hooks test`) is published under `test`, never under a kind acted on.
        let test = QueuedEvent.test(id: "test-1", device: "keeptrack-test", body: [])
        #expect(h.topic(device: test.device, kindName: test.kindName) == "fleet/keeptrack-test/test")
        #expect(
            Hook(name: "m", type: .mqtt, url: "mqtt://b", secret: "").topic(device: "v", kind: .offline)
                == "keeptrack/v/event")
    }

    @Test func signaturesAreHMACSHA256InHexAsGitHubSigns() {
        // RFC 4231, test case 2.
        let body = Array("what do ya want for nothing?".utf8)
        let signature = EventSignature.signature(body: body, secret: "Jefe")
        #expect(signature == "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(EventSignature.verify(signature, body: body, secret: "Jefe"))
        #expect(!EventSignature.verify(signature, body: body + [0x20], secret: "Jefe"))
        #expect(!EventSignature.verify(signature, body: body, secret: "jefe"))
    }

    /// A secret longer than SHA-256's 64-byte block is hashed first (RFC 2104), and an empty one is
    /// a key of no bytes: as Python's hmac computes them.
    @Test func aLongOrEmptySecretSignsAsPythonsHMACDoes() {
        let body = Array(#"{"id":"x"}"#.utf8)
        #expect(
            EventSignature.signature(body: body, secret: String(repeating: "k", count: 100))
                == "sha256=4c5ab2a8bcf165ed20307867b6f620d2f892d3da030b533f975bf6ea48fb0da3")
        #expect(
            EventSignature.signature(body: body, secret: "")
                == "sha256=d0c6ee8e2cd73b8179aa131117bcee783d18ccf08c9a69d566aa3069f2b318cf")
    }

    @Test func anAttemptBecomesDeliveredRetriedOrDead() throws {
        let policy = DeliveryPolicy(maximumAttempts: 3, maximumAge: 1000)
        var random = SeededRandomForTests()
        let failure = DeliveryFailure(.status, "answered 500", status: 500)
        #expect(policy.outcome(of: .delivered, attempts: 5, queued: 0, now: 10, random: &random) == .delivered)
        /// When the outcome of `after` at `attempts` failures retries (`nil`: it does not).
        func retryTime(_ p: DeliveryPolicy, after: Double?, attempts: Int) -> Double? {
            guard
                case .retry(let at, _) = p.outcome(
                    of: .retry(after: after, failure), attempts: attempts, queued: 0, now: 10, random: &random)
            else { return nil }
            return at
        }
        // The first retry waits between half the first ceiling (5 s) and it.
        let at = try #require(retryTime(policy, after: nil, attempts: 0))
        #expect(at >= 12.5 && at <= 15)
        // Retry-After is the least wait: 7 s, or the backoff's (5-10 s at the second failure) when longer.
        let later = try #require(retryTime(policy, after: 7, attempts: 1))
        #expect(later >= 17 && later <= 20)
        // `Retry-After: 0` is no reason to try again at once.
        let zero = try #require(
            retryTime(DeliveryPolicy(maximumAttempts: 15, maximumAge: 1e9), after: 0, attempts: 5))
        #expect(zero >= 10 + 80, "the sixth failure waits half its 160 s ceiling at least")
        #expect(
            policy.outcome(of: .retry(after: nil, failure), attempts: 2, queued: 0, now: 10, random: &random)
                == .dead(reason: "answered 500 (3 attempts)"))
        #expect(
            policy.outcome(of: .retry(after: nil, failure), attempts: 0, queued: 0, now: 1000, random: &random)
                == .dead(reason: "answered 500 (still failing after 1000 s)"))
        #expect(
            policy.outcome(of: .retry(after: 1e9, failure), attempts: 0, queued: 0, now: 10, random: &random)
                == .retry(at: 3610, reason: "answered 500"))
    }
}

/// Fixed numbers for the policy's jitter.
struct SeededRandomForTests: RandomNumberGenerator {
    var state: UInt64 = 1
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state
    }
}
