import TrackFiles
import TrackReaderFuzzing

/// `CSVReader` on any bytes: the property every track reader's target checks
/// (`checkTrackReader`: no crash; a rejection with a message and an offset inside the input; the same
/// fixes and error whether fed whole, in two pieces split anywhere, or byte by byte).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    checkTrackReader({ CSVReader() }, data, size)
    return 0
}
