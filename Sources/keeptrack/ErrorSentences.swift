import ArgumentParser
import LocationService

// The sentences the libraries' typed errors become, and which of them are about an argument the
// user gave (a `ValidationError`: usage, exit status 64) rather than a failure at run time (a
// `CommandFailure`: exit status 1, no usage). Each library error keeps its cause (`underlying`);
// only here is it turned into words.

extension LocationError {
    /// The sentence a user reads.
    var sentence: String {
        switch code {
        case .unknownRegion: "\(description); see keeptrack regions list"
        default: description
        }
    }

    /// A `ValidationError` when the problem is in what the user named (a region id, the file given),
    /// a `CommandFailure` when the region store itself cannot be read or written.
    func commandError(argument file: String? = nil) -> any Error {
        switch code {
        case .unknownRegion, .invalidFile, .invalidRegion: ValidationError(sentence)
        case .unreadable where path == file: ValidationError(sentence)
        default: CommandFailure(sentence)
        }
    }
}
