import Formats

/// `records` with sequences `first`, `first + 1`... (our batch's key is the device and sequence).
public func numbered(_ records: [TrailRecord], from first: Int64 = 1) -> [TrailRecord] {
    records.enumerated().map { i, r in
        var r = r
        r.sequence = first + Int64(i)
        return r
    }
}

/// `n` locations of a walk north, one a second.
public func walk(_ n: Int, from t0: Double = 1_715_679_000, device: String = "") -> [TrailRecord] {
    (0..<n).map { i in
        TrailRecord(
            device: device, sequence: 0, time: t0 + Double(i), latitude: 48.1 + Double(i) * 1e-5,
            longitude: 11.5, altitude: 520, horizontalAccuracy: 5, verticalAccuracy: 8, speed: 1.2, course: 0)
    }
}
