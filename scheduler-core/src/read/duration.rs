//! Durations as people write them in annotations and flags: a Go `time.Duration` string or bare
//! seconds. One grammar for the dialects' timeouts and the binaries' duration flags.

use std::time::Duration;

/// A Go `time.Duration` string (`90s`, `1h30m`, `1.5h`, `500ms`) or bare seconds (`600`).
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let bad = || {
        format!("invalid duration {s:?}: use a number of seconds or units h, m, s, ms (e.g. 90s, 15m, 1h30m)")
    };
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return Err(bad()),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 1e12 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

/// The longest time limit a gang or pod may state (`kube-gang.io/time-limit`): a year. Past it an
/// estimate says nothing a scheduler could plan with.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// A `kube-gang.io/time-limit` value: a duration ([`parse`]) more than 0 and at most
/// [`MAX_TIME_LIMIT`], rounded up to whole seconds.
pub fn time_limit(s: &str) -> Result<Duration, String> {
    let d = parse(s)?;
    if d.is_zero() {
        return Err("must be greater than 0: how long the work runs at most once started".into());
    }
    if d > MAX_TIME_LIMIT {
        return Err(format!("{s:?} exceeds the one-year maximum ({} s)", MAX_TIME_LIMIT.as_secs()));
    }
    Ok(Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        for bad in ["", "h", "10x", "-5s", "1e9h", "5 s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_limits_are_positive_whole_seconds_within_a_year() {
        assert_eq!(time_limit("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(time_limit("1.5s"), Ok(Duration::from_secs(2)));
        assert_eq!(time_limit("8784h"), Ok(MAX_TIME_LIMIT));
        for bad in ["0", "0s", "8785h", "soon", ""] {
            assert!(time_limit(bad).is_err(), "{bad}");
        }
    }
}
