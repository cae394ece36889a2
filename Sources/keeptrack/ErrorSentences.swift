import ArgumentParser
import LocationService
import TrackServer
import Tracking
import Upload

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

extension TrackerError {
    /// A `CommandFailure` when the outbox or the region store can't be read or written (a full
    /// disk, permissions); a `ValidationError` for what the options name (a regions file, the
    /// uploader's settings, the control socket's path).
    var commandError: any Error {
        switch code {
        case .regionStore: return CommandFailure(description)
        case .outboxBusy:
            return CommandFailure(
                "the outbox \(path ?? "") is being sent by another keeptrack"
                    + (holder.map { " (pid \($0))" } ?? "")
                    + ": one sender per outbox, or its records would go twice; wait for it to end, or give "
                    + "this run a --data-dir of its own")
        case .upload where (underlying as? UploadError)?.code == .storage: return CommandFailure(description)
        default: return ValidationError(description)
        }
    }
}

extension TrackServerError {
    /// What is wrong with an origin of `--cors-origin`.
    var corsOriginSentence: String {
        let origin = value ?? ""
        return switch code {
        case .corsOriginNotAnOrigin: "'\(origin)' is not scheme://host[:port]"
        case .corsOriginWithoutScheme: "'\(origin)' has no scheme (http:// or https://)"
        case .corsOriginWithPath: "'\(origin)' must be scheme://host[:port], without a path or a trailing slash"
        default: message
        }
    }
}
