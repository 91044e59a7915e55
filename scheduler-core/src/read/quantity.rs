//! Exact Kubernetes quantities (`resource.Quantity`): `500m`, `1.5`, `64Gi`, `129e6`, `12E-3`.
//!
//! Parsed without floating point into `mantissa × 10^exponent` (binary suffixes multiply the
//! mantissa by the exact power of 1024), then rounded up into the integer units the scheduler uses,
//! as kube-scheduler does with `MilliValue()` and `Value()`. Malformed input is a typed error naming
//! the value; nothing panics and nothing is silently truncated.

use std::fmt;
use std::str::FromStr;

/// A parsed quantity, exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
}

/// Why a quantity is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "{0:?} is not a quantity (expected a number with an optional suffix such as 500m, 2, 1.5Gi, 1e3)"
    )]
    Malformed(String),
    #[error(
        "{0:?} has an unknown suffix {1:?} (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent)"
    )]
    UnknownSuffix(String, String),
    #[error("{0:?} is too large")]
    Overflow(String),
}

const BINARY: [(&str, u32); 6] = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5), ("Ei", 6)];
const DECIMAL: [(&str, i32); 9] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15)];

/// Parses a Kubernetes quantity.
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    s.parse()
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || QuantityError::Malformed(s.to_string());
        let overflow = || QuantityError::Overflow(s.to_string());
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
        let (number, suffix) = body.split_at(num_end);
        let (int, frac) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(malformed());
        }
        let mut mantissa: i128 = 0;
        for c in int.chars().chain(frac.chars()) {
            let d = i128::from(c.to_digit(10).ok_or_else(malformed)?);
            mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(d)).ok_or_else(overflow)?;
        }
        let mut exponent = -i32::try_from(frac.len()).map_err(|_| overflow())?;
        if let Some((_, k)) = BINARY.iter().find(|(sfx, _)| *sfx == suffix) {
            mantissa = mantissa.checked_mul(1024i128.pow(*k)).ok_or_else(overflow)?;
        } else if let Some((_, e)) = DECIMAL.iter().find(|(sfx, _)| *sfx == suffix) {
            exponent += e;
        } else if suffix == "E" {
            exponent += 18;
        } else if let Some(rest) = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty()) {
            if !rest.trim_start_matches(['+', '-']).chars().all(|c| c.is_ascii_digit()) {
                return Err(malformed());
            }
            let e: i32 = rest.parse().map_err(|_| malformed())?;
            exponent = exponent.checked_add(e).ok_or_else(overflow)?;
        } else {
            return Err(QuantityError::UnknownSuffix(s.to_string(), suffix.to_string()));
        }
        // apimachinery's `ParseQuantity` rounds every value up (away from zero) to a whole number
        // of nano-units, so a tiny quantity such as `1e-308` is valid and means 1n.
        if exponent < -9 && mantissa != 0 {
            mantissa = match u32::try_from(-9 - i64::from(exponent)).ok().and_then(|k| 10i128.checked_pow(k))
            {
                Some(div) => mantissa / div + i128::from(mantissa % div != 0),
                // More digits below 1n than an i128 holds: under 1n, so 1n.
                None => 1,
            };
            exponent = -9;
        }
        if exponent > 40 && mantissa != 0 {
            return Err(overflow());
        }
        Ok(Quantity { mantissa: if negative { -mantissa } else { mantissa }, exponent })
    }
}

impl Quantity {
    /// `value × 10^scale`, rounded up (toward +∞, as Kubernetes rounds); `None` if it does not fit
    /// an `i64`.
    fn scaled_ceil(&self, scale: i32) -> Option<i64> {
        let e = self.exponent + scale;
        if self.mantissa == 0 {
            return Some(0);
        }
        let v: i128 = if e >= 0 {
            self.mantissa.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)?
        } else {
            let div = 10i128.checked_pow(u32::try_from(-e).ok()?);
            match div {
                Some(div) => {
                    let q = self.mantissa.div_euclid(div);
                    if self.mantissa.rem_euclid(div) != 0 { q + 1 } else { q }
                }
                // Smaller than any representable unit: rounds up to 1 (or 0 when negative).
                None => i128::from(self.mantissa > 0),
            }
        };
        i64::try_from(v).ok()
    }

    /// Billionths of the value (the finest a canonical quantity has), rounded up (`up`) or
    /// down, as an `i128`; `None` past it (a quantity's exponent is unbounded).
    pub fn nano_wide(&self, up: bool) -> Option<i128> {
        let e = self.exponent.checked_add(9)?;
        if self.mantissa == 0 {
            return Some(0);
        }
        if e >= 0 {
            return self.mantissa.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?);
        }
        let Some(div) = 10i128.checked_pow(u32::try_from(e.checked_neg()?).ok()?) else {
            // Smaller than a billionth: rounds to 0 or ±1 by the sign and the direction.
            return Some(match (self.mantissa > 0, up) {
                (true, true) => 1,
                (false, false) => -1,
                _ => 0,
            });
        };
        let q = self.mantissa.div_euclid(div);
        Some(if up && self.mantissa.rem_euclid(div) != 0 { q + 1 } else { q })
    }

    /// Thousandths of the value, rounded up (`MilliValue()`); `None` when it overflows `i64`.
    pub fn milli_ceil(&self) -> Option<i64> {
        self.scaled_ceil(3)
    }

    /// The value in base units, rounded up (`Value()`); `None` when it overflows `i64`.
    pub fn value_ceil(&self) -> Option<i64> {
        self.scaled_ceil(0)
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// The integer `i`.
    pub fn from_int(i: i64) -> Self {
        Quantity { mantissa: i128::from(i), exponent: 0 }
    }

    /// `-self`.
    pub fn negated(&self) -> Self {
        Quantity { mantissa: -self.mantissa, exponent: self.exponent }
    }

    /// -1, 0 or 1.
    pub fn signum(&self) -> i64 {
        self.mantissa.signum() as i64
    }

    /// Both mantissas at the smaller exponent; `None` when one does not fit.
    fn aligned(&self, other: &Self) -> Option<(i128, i128, i32)> {
        let e = self.exponent.min(other.exponent);
        let up = |q: &Self| {
            q.mantissa.checked_mul(10i128.checked_pow(u32::try_from(q.exponent.checked_sub(e)?).ok()?)?)
        };
        Some((up(self)?, up(other)?, e))
    }

    /// `self + other`, exact; `None` on overflow.
    pub fn checked_add(&self, other: &Self) -> Option<Self> {
        let (a, b, e) = self.aligned(other)?;
        Some(Quantity { mantissa: a.checked_add(b)?, exponent: e })
    }

    /// The value as an integer, when it is one and fits an `i64`.
    pub fn as_integer(&self) -> Option<i64> {
        let floor = self.scaled_ceil(0)?;
        (Quantity::from_int(floor).cmp_value(self).is_eq()).then_some(floor)
    }

    /// The value, approximately.
    pub fn as_f64(&self) -> f64 {
        (self.mantissa as f64) * 10f64.powi(self.exponent)
    }

    /// Compares values exactly (`Quantity.Cmp`); `1Gi` and `1073741824` are equal.
    pub fn cmp_value(&self, other: &Self) -> std::cmp::Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            // Exponents too far apart to align: the signs decide, then the larger exponent
            // (the mantissas of parsed quantities are bounded, their exponents are not).
            None => (self.mantissa.signum(), self.exponent.saturating_mul(self.mantissa.signum() as i32))
                .cmp(&(
                    other.mantissa.signum(),
                    other.exponent.saturating_mul(other.mantissa.signum() as i32),
                )),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}e{}", self.mantissa, self.exponent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_exactly_and_exponents_far_apart_neither_overflow_nor_mislead() {
        use std::cmp::Ordering::*;
        let q = |s: &str| parse(s).unwrap();
        assert_eq!(q("1Gi").cmp_value(&q("1073741824")), Equal);
        assert_eq!(q("80Gi").cmp_value(&q("81920Mi")), Equal);
        assert_eq!(q("1.5").cmp_value(&q("1500m")), Equal);
        // A zero keeps whatever exponent it was written with (`0e2147483647` is valid, as in
        // apimachinery): aligning it with a value of another exponent overflows an `i32`, which
        // is said, not wrapped (nor a panic, which a CEL selector could reach).
        let zero = q("0e2147483647");
        assert_eq!(zero.cmp_value(&q("1n")), Less);
        assert_eq!(zero.cmp_value(&q("-1n")), Greater);
        assert_eq!(zero.cmp_value(&q("0")), Equal);
        assert_eq!(q("0e-2147483648").checked_add(&q("1e40")), None);
        assert_eq!(q("2k").as_integer(), Some(2000));
        assert_eq!(q("1.5").as_integer(), None);
    }

    #[test]
    fn tiny_quantities_round_up_to_one_nano_unit_as_apimachinery_does() {
        for tiny in ["1e-308", "0.0000000001", "1e-10", "123456789012345678901234567890e-300"] {
            let q = parse(tiny).unwrap_or_else(|e| panic!("{tiny}: {e}"));
            assert_eq!((q.mantissa, q.exponent), (1, -9), "{tiny}");
            assert_eq!((q.milli_ceil(), q.value_ceil()), (Some(1), Some(1)), "{tiny}");
        }
        let q = parse("-1e-308").unwrap();
        assert_eq!((q.mantissa, q.exponent), (-1, -9));
        // Rounded up to whole nano-units, not truncated: 1.5n is 2n.
        assert_eq!(parse("1.5n").map(|q| (q.mantissa, q.exponent)), Ok((2, -9)));
        assert_eq!(parse("0e-308").map(|q| q.is_zero()), Ok(true));
        assert!(matches!(parse("1e308"), Err(QuantityError::Overflow(_))));
    }

    #[test]
    fn malformed_values_name_the_value() {
        for bad in [
            "", "-", ".", "1.2.3", "1Kb", "--1", "1 Gi", " 1", "1e", "1e+", "e3", "Gi", "1ki", "0x10",
            "1e3.5",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{bad:?}: {err}");
        }
    }
}
