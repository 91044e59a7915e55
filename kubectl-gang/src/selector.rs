//! Label selectors as `kubectl -l` reads them: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
//! `k notin (a,b)`, comma-separated and all required.

use std::collections::BTreeMap;

/// One requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<Req>);

impl Selector {
    /// Parses `s`; errors name the requirement that could not be read.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let bad = || format!("invalid label selector requirement {part:?}");
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(key(k.trim()).ok_or_else(bad)?)
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::Ne(key(k.trim()).ok_or_else(bad)?, v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Req::Eq(key(k.trim()).ok_or_else(bad)?, v.trim().to_string())
            } else if let Some((k, vs)) = set_op(part, " notin ") {
                Req::NotIn(key(&k).ok_or_else(bad)?, vs.ok_or_else(bad)?)
            } else if let Some((k, vs)) = set_op(part, " in ") {
                Req::In(key(&k).ok_or_else(bad)?, vs.ok_or_else(bad)?)
            } else {
                Req::Exists(key(part).ok_or_else(bad)?)
            };
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    /// True when `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::Ne(k, v) => labels.get(k) != Some(v),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

fn key(k: &str) -> Option<String> {
    let ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    ok.then(|| k.to_string())
}

fn set_op(part: &str, op: &str) -> Option<(String, Option<Vec<String>>)> {
    let (k, rest) = part.split_once(op)?;
    let rest = rest.trim();
    let values = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|inner| inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect());
    Some((k.trim().to_string(), values))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_operator() {
        let l = labels(&[("team", "nlp"), ("tier", "gold")]);
        for (sel, want) in [
            ("team=nlp", true),
            ("team==nlp", true),
            ("team!=nlp", false),
            ("team", true),
            ("!team", false),
            ("!owner", true),
            ("team in (cv, nlp)", true),
            ("team notin (cv,nlp)", false),
            ("team=nlp,tier=silver", false),
            ("team in (nlp),tier", true),
            ("", true),
        ] {
            assert_eq!(Selector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn malformed_requirements_are_named() {
        let err = Selector::parse("team in nlp").unwrap_err();
        assert!(err.contains("team in nlp"), "{err}");
        assert!(Selector::parse("=x").is_err());
        assert!(Selector::parse("a b").is_err());
    }
}
