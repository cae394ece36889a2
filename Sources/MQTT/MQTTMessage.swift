/// A message to publish: where, what, at which QoS, and whether the broker keeps it for later
/// subscribers (retained). A connection's last will is one too (``MQTTConnection/Options/will``).
public struct MQTTMessage: Hashable, Sendable {
    public var topic: String
    public var payload: [UInt8]
    /// 0 or 1. The default is 1.
    public var qos: Int32
    /// Whether the broker keeps it as the topic's last message, handed to each new subscriber.
    /// The default is false.
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    /// A message whose payload is `text`'s UTF-8 bytes.
    public init(topic: String, text: String, qos: Int32 = 1, retain: Bool = false) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }
}
