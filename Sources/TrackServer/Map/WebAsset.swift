import HTTPTypes
import Hummingbird
import NIOCore

/// A file the server serves as it is (the map's page, script and style, Leaflet's files), with its
/// content type and a validator: a strong `ETag` (a 64-bit FNV-1a digest of the bytes, in hex), so
/// that a browser holding the file asks with `If-None-Match` and is answered `304 Not Modified`
/// without the bytes.
struct WebAsset: Sendable {
    let bytes: [UInt8]
    let contentType: String
    /// `Cache-Control`: how long a browser may use its copy before asking again.
    let cacheControl: String
    /// The quoted entity tag.
    let etag: String

    init(_ bytes: [UInt8], contentType: String, cacheControl: String = "max-age=3600") {
        self.bytes = bytes
        self.contentType = contentType
        self.cacheControl = cacheControl
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x0100_0000_01b3 }
        let hex = String(hash, radix: 16)
        self.etag = "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
    }

    /// The answer to `request`: 304 when its `If-None-Match` names this file's tag (or `*`), else the
    /// file.
    func response(to request: Request) -> Response {
        let headers: HTTPFields = [.contentType: contentType, .cacheControl: cacheControl, .eTag: etag]
        if request.headers[values: .ifNoneMatch].flatMap(Self.entityTags).contains(where: matches) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Whether an entity tag of `If-None-Match` is this file's: `*`, or the same opaque tag, weak or
    /// not (the weak comparison RFC 9110 asks of `If-None-Match`).
    func matches(_ tag: Substring) -> Bool {
        tag == "*" || (tag.hasPrefix("W/") ? tag.dropFirst(2) : tag) == etag
    }

    /// The entity tags of an `If-None-Match` value: comma-separated, spaces around them dropped.
    static func entityTags(_ value: String) -> [Substring] {
        value.split(separator: ",").map { part in
            var tag = part
            while let c = tag.first, c == " " || c == "\t" { tag = tag.dropFirst() }
            while let c = tag.last, c == " " || c == "\t" { tag = tag.dropLast() }
            return tag
        }
    }
}
