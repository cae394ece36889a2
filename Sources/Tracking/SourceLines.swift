import Formats
import Geo

/// Writes source output as JSON Lines: fixes in the `decode` schema, events as
/// `{"event":"source","kind":...,"source":...,"message":...}`.
public struct SourceLines {
    var out = OutputBuffer()
    /// Epochs without a position too (mode `none`).
    public var includeAll: Bool
    /// Flush after every line (live sources) or in 64 KiB blocks (fast replay).
    public var lineBuffered: Bool

    public init(includeAll: Bool = false, lineBuffered: Bool = true) {
        self.includeAll = includeAll
        self.lineBuffered = lineBuffered
    }

    public mutating func write(_ element: SourceElement) throws(OutputError) {
        switch element {
        case .fix(let fix):
            guard includeAll || fix.hasPosition else { return }
            FixWriter.appendJSON(fix, to: &out.bytes)
        case .event(let event):
            _ = JSONLinesSink.append(.source(event), to: &out.bytes)
        }
        try out.endRecord(lineBuffered: lineBuffered)
    }

    public mutating func finish() throws(OutputError) { try out.flush() }
}
