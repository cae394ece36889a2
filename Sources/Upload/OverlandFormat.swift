import Formats

/// Overland's batch (``Overland``), as Dawarich takes it at `POST /api/v1/overland/batches`: a
/// batch of locations a request, acknowledged only by `{"result":"ok"}` (any other answer, a 2xx
/// included, keeps the batch for the next attempt). Dawarich takes its API key as `?api_key=` in
/// the URL or as a bearer token (`--token`). Region transitions and dwells have no Overland form:
/// they are acknowledged as skipped.
public struct OverlandFormat: UploadFormat {
    public init() {}
    public var name: String { "overland" }
    public var serverPath: String { "/api/v1/overland/batches" }
    public var recordsPerRequest: Int? { nil }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        guard records.contains(where: { $0.kind == .location }) else { return nil }
        return UploadRequest(
            body: Overland.encode(device: device, records: records),
            headers: [("Content-Type", "application/json")], compressible: true)
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? {
        Overland.isAcknowledgement(body) ? nil : "an answer other than {\"result\":\"ok\"}"
    }
}
