import Formats

/// `RegionDefinition.parseGeoJSON` on any bytes: never a crash, a rejection is a `FormatsError`
/// with a message; what it accepts is well-formed (named regions, finite shapes) and parsing is
/// deterministic.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let regions: [RegionDefinition]
    do throws(FormatsError) {
        regions = try RegionDefinition.parseGeoJSON(bytes)
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    for region in regions {
        precondition(!region.id.isEmpty, "a region without an id")
        switch region.shape {
        case .circle(let center, let radius):
            precondition(
                center.latitude.isFinite && center.longitude.isFinite && radius.isFinite, "a circle that is not finite")
        case .polygon(let points):
            precondition(
                points.allSatisfy { $0.latitude.isFinite && $0.longitude.isFinite }, "a polygon that is not finite")
        }
    }
    precondition((try? RegionDefinition.parseGeoJSON(bytes)) == regions, "parsing twice differs")
    return 0
}
