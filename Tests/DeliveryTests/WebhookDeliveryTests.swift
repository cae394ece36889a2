import Delivery
import EndpointEvents
import KeepTrackTesting
import Testing

/// Webhooks and Home Assistant's trigger against a real receiver on 127.0.0.1 that checks the
/// signature in Python: what each answer becomes, redirects never followed, private addresses
/// refused unless allowed.
@Suite("Webhook delivery against a real receiver", .serialized)
struct WebhookDeliveryTests {
    static func deliver(_ hook: Hook, _ e: DeviceEvent, allowPrivate: Bool = true, timeout: Double = 10) async
        -> DeliveryAnswer
    {
        let kind = WebhookDelivery(hook: hook, allowPrivate: allowPrivate, timeout: timeout)
        let answer = await kind.deliver(QueuedEvent(e))
        await kind.close()
        return answer
    }

    @Test func aPostIsSignedAndCarriesItsIdAndKind() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let e = event("van-1", 1)
        #expect(await Self.deliver(webhook("h", receiver.url("ok")), e) == .delivered)
        let post = try await receiver.next()
        #expect(post.valid, "the receiver's Python check refused the signature")
        #expect(post.id == e.id && post.bodyId == e.id)
        #expect(post.kind == "geofenceEnter" && post.device == "van-1")
        #expect(post.first)
        // A receiver that knows another secret refuses it (the check is not a formality).
        var wrong = webhook("h", receiver.url("ok"))
        wrong.secret = "another secret of 16 bytes"
        guard case .retry(_, let failure) = await Self.deliver(wrong, e) else {
            Issue.record("a wrong signature was delivered")
            return
        }
        #expect(failure.status == 401)
        #expect(try await receiver.next().valid == false)
    }

    @Test func answersOtherThan2xxAreRetriedWithTheirStatus() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        #expect(
            await Self.deliver(webhook("h", receiver.url("fail")), event("v", 1))
                == .retry(after: nil, DeliveryFailure(.status, "127.0.0.1 answered 500", status: 500)))
        #expect(
            await Self.deliver(webhook("h", receiver.url("retry-after")), event("v", 2))
                == .retry(after: 7, DeliveryFailure(.status, "127.0.0.1 answered 503", status: 503)))
        #expect(try await receiver.posts(2).map(\.status) == [500, 503])
    }

    @Test func aReceiverThatDoesNotAnswerTimesOut() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let answer = await Self.deliver(webhook("h", receiver.url("hold")), event("v", 1), timeout: 0.5)
        guard case .retry(nil, let failure) = answer else {
            Issue.record("expected a retry, got \(answer)")
            return
        }
        #expect(failure.code == .timeout)
        try await receiver.release()
    }

    @Test func aRedirectIsNeverFollowed() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        // To the receiver itself (a private address, which it would be allowed to reach): not followed.
        let target = receiver.url("ok")
        let answer = await Self.deliver(webhook("h", receiver.url("redirect") + "?to=" + target), event("v", 1))
        guard case .retry(nil, let failure) = answer else {
            Issue.record("expected a retry, got \(answer)")
            return
        }
        #expect(failure.code == .redirect && failure.status == 302)
        #expect(failure.message.contains("never follow"))
        // The receiver saw the redirecting post and nothing else before the next one.
        #expect(await Self.deliver(webhook("h", receiver.url("ok")), event("v", 2)) == .delivered)
        #expect(try await receiver.posts(2).map(\.path) == ["/hook/redirect", "/hook/ok"])
    }

    /// Nobody listens: a network failure, retried, named by the address and port and the system's
    /// word for it, as `hooks list` shows it.
    @Test func aRefusedConnectionIsNamedPlainly() async throws {
        let port = try ReservedPort()
        let answer = await Self.deliver(webhook("h", "http://127.0.0.1:\(port)/hook/ok"), event("v", 1))
        guard case .retry(nil, let failure) = answer else {
            Issue.record("expected a retry, got \(answer)")
            return
        }
        #expect(failure.code == .network)
        #expect(failure.message == "cannot reach 127.0.0.1:\(port): connection refused", "\(failure.message)")
    }

    @Test(arguments: ["127.0.0.1", "localhost", "[::1]", "169.254.169.254", "10.1.2.3", "[fd00::1]"])
    func privateAddressesAreRefusedUnlessAllowed(host: String) async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let answer = await Self.deliver(
            webhook("h", "http://\(host):\(receiver.port)/hook/ok"), event("v", 1), allowPrivate: false)
        guard case .retry(nil, let failure) = answer else {
            Issue.record("expected a refusal, got \(answer)")
            return
        }
        #expect(failure.code == .addressRefused, "\(failure)")
        #expect(failure.message.contains("not a public address"))
        // A name is said with the address it resolved to ("localhost is 127.0.0.1, not ..."); an
        // address alone ("10.1.2.3 is not ...").
        let address = host.trimmingCharacters(in: ["[", "]"])
        let said = host == "localhost" ? ", not a public address" : "\(address) is not a public address"
        #expect(failure.message.hasPrefix(host == "localhost" ? "localhost is " : said), "\(failure.message)")
        #expect(failure.message.contains(said), "\(failure.message)")
        // Nothing reached the receiver: the next post it sees is the allowed one.
        #expect(await Self.deliver(webhook("h", receiver.url("ok")), event("v", 2)) == .delivered)
        #expect(try await receiver.next().bodyId == event("v", 2).id)
    }

    @Test func homeAssistantsWebhookTriggerGetsTheEvent() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let hook = webhook(
            "ha", "http://127.0.0.1:\(receiver.port)/api/webhook/keeptrack-arrival", type: .homeassistant,
            kinds: [.geofenceEnter])
        #expect(hook.problem == nil)
        #expect(await Self.deliver(hook, event("van-1", 1)) == .delivered)
        let post = try await receiver.next()
        #expect(post.path == "/api/webhook/keeptrack-arrival" && post.valid)
        // A Home Assistant hook may go unsigned (its webhook id is its secret); this receiver
        // wants a signature all the same.
        var unsigned = hook
        unsigned.secret = ""
        #expect(unsigned.problem == nil)
        #expect(
            await Self.deliver(unsigned, event("van-1", 2))
                == .retry(after: nil, DeliveryFailure(.status, "127.0.0.1 answered 401", status: 401)))
        #expect(try await receiver.next().valid == false)
        // Its URL must be a webhook trigger's.
        let elsewhere = webhook("ha", "http://127.0.0.1:8123/api/states", type: .homeassistant)
        #expect(elsewhere.problem == .url("a Home Assistant hook's URL is http(s)://HOST:PORT/api/webhook/ID"))
    }
}
