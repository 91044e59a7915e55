//! Times as the API server reads and writes them.

use k8s_openapi::jiff::Timestamp;

/// A `metav1.Time` as the API server writes it.
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A `metav1.MicroTime` as the API server writes it.
pub fn format_micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Go's `time.RFC3339` (what `metav1.Time` parses).
pub const RFC3339: &str = "2006-01-02T15:04:05Z07:00";
/// `metav1.RFC3339Micro` (what `metav1.MicroTime` parses).
pub const RFC3339_MICRO: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Parses `s` as Go's `time.Parse` would with [`RFC3339`] (`micro: false`: a fraction of any
/// length, or none) or [`RFC3339_MICRO`] (`micro: true`: exactly six fractional digits). The
/// error reads as Go's.
pub fn check_time(s: &str, micro: bool) -> Result<(), String> {
    let layout = if micro { RFC3339_MICRO } else { RFC3339 };
    let fail = |rest: &str, elem: &str| {
        Err(format!("parsing time {s:?} as {layout:?}: cannot parse {rest:?} as {elem:?}"))
    };
    let b = s.as_bytes();
    let digits =
        |from: usize, n: usize| b.len() >= from + n && b[from..from + n].iter().all(u8::is_ascii_digit);
    let num = |from: usize, n: usize| s[from..from + n].parse::<u32>().unwrap_or(0);
    let fields: [(usize, usize, &str, u8); 6] = [
        (0, 4, "2006", b'-'),
        (5, 2, "01", b'-'),
        (8, 2, "02", b'T'),
        (11, 2, "15", b':'),
        (14, 2, "04", b':'),
        (17, 2, "05", 0),
    ];
    for (from, n, elem, sep) in fields {
        if !digits(from, n) {
            return fail(s.get(from..).unwrap_or(""), elem);
        }
        if sep != 0 && b.get(from + n) != Some(&sep) {
            return fail(s.get(from + n..).unwrap_or(""), &(sep as char).to_string());
        }
    }
    let (month, day, hour, min, sec) = (num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2));
    let year = num(0, 4);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(format!("parsing time {s:?}: month out of range")),
    };
    if day == 0 || day > days || hour > 23 || min > 59 || sec > 59 {
        return Err(format!("parsing time {s:?}: day, hour, minute or second out of range"));
    }
    let mut i = 19;
    if micro {
        if b.get(i) != Some(&b'.') || !digits(i + 1, 6) {
            return fail(s.get(i..).unwrap_or(""), ".000000");
        }
        i += 7;
    } else if matches!(b.get(i), Some(b'.' | b',')) {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return fail(s.get(i..).unwrap_or(""), "Z07:00");
        }
        i += 1 + n;
    }
    let zone = &s[i..];
    let ok = zone == "Z"
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && digits(i + 1, 2)
            && zone.as_bytes()[3] == b':'
            && digits(i + 4, 2)
            && num(i + 1, 2) < 24
            && num(i + 4, 2) < 60);
    if !ok {
        return fail(zone, "Z07:00");
    }
    Ok(())
}
