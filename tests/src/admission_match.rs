//! Which webhooks of an admission configuration kube-apiserver calls for a request, decided as it
//! decides (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook`): the rules (group,
//! version, resource, operation, with `*`), the `namespaceSelector` against the namespace's labels,
//! the `objectSelector` against the object's labels (old or new on UPDATE: either matching is
//! enough), then the `matchConditions` (CEL): a condition that is false skips the webhook; all true
//! calls it; an error and none false calls it when `failurePolicy` is `Fail` (the request is
//! refused) and skips it when `Ignore`.
//!
//! The CEL is evaluated by [`cel`], a small interpreter of the subset our configurations use
//! (`has()`, field selection, `in` on maps and lists, `==`, `!=`, `!`, `&&`, `||` with CEL's
//! error-absorbing logic, string literals, lists). Anything else is refused, never guessed.

use serde_json::Value;

/// What the API server does with one webhook for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Not matched: the webhook never sees the request.
    Skipped,
    /// The webhook is called.
    Called,
    /// A match condition failed to evaluate under `failurePolicy: Fail`: the request is refused
    /// without calling the webhook.
    Refused,
}

/// A request as matching reads it.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    /// `CREATE`, `UPDATE`, …
    pub operation: &'a str,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
    /// The namespace's labels (its `kubernetes.io/metadata.name` included).
    pub namespace_labels: &'a Value,
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

fn rule_matches(rule: &Value, r: &Request<'_>) -> bool {
    let any = |field: &str, want: &str| strings(&rule[field]).iter().any(|x| *x == "*" || *x == want);
    any("apiGroups", r.group)
        && any("apiVersions", r.version)
        && any("resources", r.resource)
        && any("operations", r.operation)
}

/// A `metav1.LabelSelector` against `labels` (absent selector: everything).
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    if selector.is_null() {
        return true;
    }
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_label = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| get(k).is_some_and(|have| Some(have) == v.as_str()));
    let by_expression = selector["matchExpressions"].as_array().into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values = strings(&e["values"]);
        match e["operator"].as_str().unwrap_or("") {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            other => panic!("unknown selector operator {other}"),
        }
    });
    by_label && by_expression
}

/// What the API server does with `webhook` for `r`.
pub fn call(webhook: &Value, r: &Request<'_>) -> Call {
    if !webhook["rules"].as_array().into_iter().flatten().any(|rule| rule_matches(rule, r)) {
        return Call::Skipped;
    }
    if !selector_matches(&webhook["namespaceSelector"], r.namespace_labels) {
        return Call::Skipped;
    }
    let labels = |o: &Value| o.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
    let object_selector = &webhook["objectSelector"];
    let by_object = selector_matches(object_selector, &labels(r.object))
        || r.old_object.is_some_and(|o| selector_matches(object_selector, &labels(o)));
    if !by_object {
        return Call::Skipped;
    }
    let vars = serde_json::json!({
        "object": r.object,
        "oldObject": r.old_object.cloned().unwrap_or(Value::Null),
        "request": {"operation": r.operation},
    });
    let mut errored = false;
    for c in webhook["matchConditions"].as_array().into_iter().flatten() {
        let expression = c["expression"].as_str().unwrap_or("");
        match cel::eval(expression, &vars) {
            Ok(Value::Bool(false)) => return Call::Skipped,
            Ok(Value::Bool(true)) => {}
            Ok(other) => panic!("match condition {expression:?} gave {other}, not a bool"),
            Err(_) => errored = true,
        }
    }
    if errored {
        return if webhook["failurePolicy"].as_str().unwrap_or("Fail") == "Fail" {
            Call::Refused
        } else {
            Call::Skipped
        };
    }
    Call::Called
}

/// A CEL interpreter for the subset admission match conditions here use.
pub mod cel {
    use serde_json::Value;

    /// An evaluation error (CEL's `no such key`, a type mismatch), as a value: `&&` and `||`
    /// absorb it when the other side decides.
    #[derive(Clone, Debug, PartialEq)]
    pub struct EvalError(pub String);

    #[derive(Clone, Debug, PartialEq)]
    enum Tok {
        Ident(String),
        Str(String),
        LParen,
        RParen,
        LBracket,
        RBracket,
        Comma,
        Dot,
        And,
        Or,
        Not,
        Eq,
        Ne,
        In,
    }

    fn lex(src: &str) -> Vec<Tok> {
        let b = src.as_bytes();
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let c = b[i] as char;
            match c {
                ' ' | '\n' | '\t' | '\r' => i += 1,
                '(' => (out.push(Tok::LParen), i += 1).1,
                ')' => (out.push(Tok::RParen), i += 1).1,
                '[' => (out.push(Tok::LBracket), i += 1).1,
                ']' => (out.push(Tok::RBracket), i += 1).1,
                ',' => (out.push(Tok::Comma), i += 1).1,
                '.' => (out.push(Tok::Dot), i += 1).1,
                '&' if b.get(i + 1) == Some(&b'&') => (out.push(Tok::And), i += 2).1,
                '|' if b.get(i + 1) == Some(&b'|') => (out.push(Tok::Or), i += 2).1,
                '=' if b.get(i + 1) == Some(&b'=') => (out.push(Tok::Eq), i += 2).1,
                '!' if b.get(i + 1) == Some(&b'=') => (out.push(Tok::Ne), i += 2).1,
                '!' => (out.push(Tok::Not), i += 1).1,
                '\'' | '"' => {
                    let end = src[i + 1..].find(c).map(|e| i + 1 + e).expect("unterminated string");
                    assert!(!src[i + 1..end].contains('\\'), "escapes are outside the subset");
                    out.push(Tok::Str(src[i + 1..end].to_string()));
                    i = end + 1;
                }
                c if c.is_ascii_alphabetic() || c == '_' => {
                    let start = i;
                    while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                        i += 1;
                    }
                    let word = &src[start..i];
                    out.push(if word == "in" { Tok::In } else { Tok::Ident(word.to_string()) });
                }
                other => panic!("{other:?} is outside the CEL subset in {src:?}"),
            }
        }
        out
    }

    type R = Result<Value, EvalError>;

    struct Parser<'a> {
        toks: Vec<Tok>,
        at: usize,
        vars: &'a Value,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<&Tok> {
            self.toks.get(self.at)
        }
        fn eat(&mut self, t: &Tok) -> bool {
            if self.peek() == Some(t) {
                self.at += 1;
                true
            } else {
                false
            }
        }
        fn expect(&mut self, t: &Tok) {
            assert!(self.eat(t), "expected {t:?} at token {} of {:?}", self.at, self.toks);
        }

        fn or(&mut self) -> R {
            let mut left = self.and();
            while self.eat(&Tok::Or) {
                let right = self.and();
                left = match (left, right) {
                    (Ok(Value::Bool(true)), _) | (_, Ok(Value::Bool(true))) => Ok(Value::Bool(true)),
                    (Ok(Value::Bool(false)), Ok(Value::Bool(false))) => Ok(Value::Bool(false)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (l, r) => Err(EvalError(format!("no matching overload for {l:?} || {r:?}"))),
                };
            }
            left
        }

        fn and(&mut self) -> R {
            let mut left = self.unary();
            while self.eat(&Tok::And) {
                let right = self.unary();
                left = match (left, right) {
                    (Ok(Value::Bool(false)), _) | (_, Ok(Value::Bool(false))) => Ok(Value::Bool(false)),
                    (Ok(Value::Bool(true)), Ok(Value::Bool(true))) => Ok(Value::Bool(true)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (l, r) => Err(EvalError(format!("no matching overload for {l:?} && {r:?}"))),
                };
            }
            left
        }

        fn unary(&mut self) -> R {
            if self.eat(&Tok::Not) {
                return match self.unary()? {
                    Value::Bool(b) => Ok(Value::Bool(!b)),
                    other => Err(EvalError(format!("no matching overload for !{other}"))),
                };
            }
            self.relation()
        }

        fn relation(&mut self) -> R {
            let left = self.primary();
            if self.eat(&Tok::In) {
                let right = self.primary();
                let (l, r) = (left?, right?);
                return match &r {
                    Value::Object(m) => match l {
                        Value::String(k) => Ok(Value::Bool(m.contains_key(&k))),
                        other => Err(EvalError(format!("no matching overload for {other} in map"))),
                    },
                    Value::Array(a) => Ok(Value::Bool(a.contains(&l))),
                    other => Err(EvalError(format!("no matching overload for in {other}"))),
                };
            }
            for (tok, equal) in [(Tok::Eq, true), (Tok::Ne, false)] {
                if self.eat(&tok) {
                    let right = self.primary();
                    let (l, r) = (left?, right?);
                    if std::mem::discriminant(&l) != std::mem::discriminant(&r) {
                        return Err(EvalError(format!("no matching overload for {l} == {r}")));
                    }
                    return Ok(Value::Bool((l == r) == equal));
                }
            }
            left
        }

        /// A field path `a.b.c`: its value, or `no such key`.
        fn path(&mut self, first: String) -> Result<Vec<String>, ()> {
            let mut parts = vec![first];
            while self.eat(&Tok::Dot) {
                match self.toks.get(self.at).cloned() {
                    Some(Tok::Ident(s)) => {
                        self.at += 1;
                        parts.push(s);
                    }
                    other => panic!("expected a field name, got {other:?}"),
                }
            }
            Ok(parts)
        }

        fn select(&self, parts: &[String]) -> R {
            let mut v =
                self.vars.get(&parts[0]).ok_or_else(|| EvalError(format!("undeclared {}", parts[0])))?;
            for p in &parts[1..] {
                v = match v {
                    Value::Object(m) => m.get(p).ok_or_else(|| EvalError(format!("no such key: {p}")))?,
                    other => return Err(EvalError(format!("no such key: {p} on {other}"))),
                };
            }
            Ok(v.clone())
        }

        fn primary(&mut self) -> R {
            match self.toks.get(self.at).cloned() {
                Some(Tok::LParen) => {
                    self.at += 1;
                    let v = self.or();
                    self.expect(&Tok::RParen);
                    v
                }
                Some(Tok::LBracket) => {
                    self.at += 1;
                    let mut items = Vec::new();
                    if !self.eat(&Tok::RBracket) {
                        loop {
                            items.push(self.or());
                            if self.eat(&Tok::RBracket) {
                                break;
                            }
                            self.expect(&Tok::Comma);
                        }
                    }
                    items.into_iter().collect::<Result<Vec<_>, _>>().map(Value::Array)
                }
                Some(Tok::Str(s)) => {
                    self.at += 1;
                    Ok(Value::String(s))
                }
                Some(Tok::Ident(name)) if name == "has" => {
                    self.at += 1;
                    self.expect(&Tok::LParen);
                    let Some(Tok::Ident(first)) = self.toks.get(self.at).cloned() else {
                        panic!("has() takes a field selection")
                    };
                    self.at += 1;
                    let parts = self.path(first).unwrap_or_default();
                    self.expect(&Tok::RParen);
                    assert!(parts.len() >= 2, "has() takes a field selection");
                    // has(a.b.c): a.b must evaluate; then whether it has c (null counts as absent,
                    // as for an omitted optional field of a typed object).
                    let parent = self.select(&parts[..parts.len() - 1])?;
                    match parent {
                        Value::Object(m) => {
                            Ok(Value::Bool(m.get(&parts[parts.len() - 1]).is_some_and(|v| !v.is_null())))
                        }
                        other => Err(EvalError(format!("has() on {other}"))),
                    }
                }
                Some(Tok::Ident(name)) if name == "true" || name == "false" => {
                    self.at += 1;
                    Ok(Value::Bool(name == "true"))
                }
                Some(Tok::Ident(first)) => {
                    self.at += 1;
                    let parts = self.path(first).unwrap_or_default();
                    self.select(&parts)
                }
                other => panic!("unexpected {other:?} in {:?}", self.toks),
            }
        }
    }

    /// Evaluates `src` with the variables of `vars` (an object: `object`, `request`, …).
    pub fn eval(src: &str, vars: &Value) -> Result<Value, EvalError> {
        let mut p = Parser { toks: lex(src), at: 0, vars };
        let v = p.or();
        assert_eq!(p.at, p.toks.len(), "trailing tokens in {src:?}");
        v
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn the_subset_evaluates_as_cel_does() {
            let vars = json!({"object": {"metadata": {"labels": {"a": "1"}}, "spec": {"s": "x"}}});
            let t = |src: &str| eval(src, &vars);
            assert_eq!(t("'a' in object.metadata.labels"), Ok(json!(true)));
            assert_eq!(t("'b' in object.metadata.labels"), Ok(json!(false)));
            // A missing key is an error, which && and || absorb when the other side decides.
            assert!(t("'a' in object.metadata.annotations").is_err());
            assert_eq!(
                t("has(object.metadata.annotations) && 'a' in object.metadata.annotations"),
                Ok(json!(false))
            );
            assert_eq!(t("'a' in object.metadata.annotations && false"), Ok(json!(false)));
            assert_eq!(t("'a' in object.metadata.annotations || true"), Ok(json!(true)));
            assert!(t("'a' in object.metadata.annotations || false").is_err());
            assert_eq!(t("object.spec.s in ['', 'x']"), Ok(json!(true)));
            assert_eq!(t("!has(object.spec.t) || object.spec.t == 'y'"), Ok(json!(true)));
            assert!(t("has(object.status.x)").is_err(), "the parent must exist");
            assert_eq!(t("!(object.spec.s == 'x')"), Ok(json!(false)));
        }
    }
}
