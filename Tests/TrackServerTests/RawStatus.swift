/// A request's status from the first line of a raw response (0 when there is none).
func status(_ response: String) -> Int {
    let parts = response.split(separator: " ", maxSplits: 2)
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1.") else { return 0 }
    return Int(parts[1]) ?? 0
}
