//! Windows FILETIME (100 ns ticks since 1601-01-01 UTC) conversions.

/// Seconds between 1601-01-01 and 1970-01-01.
pub const EPOCH_DIFF_SECS: u64 = 11_644_473_600;

/// Converts Unix seconds and nanoseconds to a FILETIME; times before 1601 clamp to 0.
pub fn filetime_from_unix(secs: i64, nanos: u32) -> u64 {
    let ticks = (secs as i128 + EPOCH_DIFF_SECS as i128) * 10_000_000 + (nanos / 100) as i128;
    ticks.clamp(0, u64::MAX as i128) as u64
}

/// Converts a FILETIME to Unix seconds and nanoseconds.
pub fn unix_from_filetime(ft: u64) -> (i64, u32) {
    let secs = (ft / 10_000_000) as i64 - EPOCH_DIFF_SECS as i64;
    let nanos = ((ft % 10_000_000) * 100) as u32;
    (secs, nanos)
}

/// The current time as a FILETIME.
pub fn now_filetime() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    filetime_from_unix(d.as_secs() as i64, d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        let ft = filetime_from_unix(1_700_000_000, 123_456_700);
        assert_eq!(unix_from_filetime(ft), (1_700_000_000, 123_456_700));
        assert_eq!(filetime_from_unix(0, 0), EPOCH_DIFF_SECS * 10_000_000);
    }
}
