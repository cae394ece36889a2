import HTTPTypes
import Hummingbird

/// Answers 413 from the head when `Content-Length` is over the limit, and closes the connection
/// without waiting for the body.
struct EarlyLimitMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let maxBodyBytes: Int

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        if let text = request.headers[.contentLength] {
            guard let length = Int(text), length >= 0 else {
                context.closeAfterAnswer()
                throw HTTPError(.badRequest, message: "Content-Length: '\(text)' is not a length")
            }
            if length > maxBodyBytes {
                context.closeAfterAnswer()
                throw HTTPError(.contentTooLarge, message: "the body is larger than \(maxBodyBytes) bytes")
            }
        }
        return try await next(request, context)
    }
}
