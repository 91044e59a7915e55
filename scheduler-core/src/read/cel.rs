//! DRA device selectors: CEL expressions evaluated against one device at a time, with the
//! variables and libraries Kubernetes gives them (`k8s.io/dynamic-resource-allocation/cel`):
//! `device.driver`, `device.attributes[<domain>].<name>`, `device.capacity[<domain>].<name>`;
//! Kubernetes' quantity library (`quantity()`, `isQuantity()`, `compareTo`, `isGreaterThan`,
//! `isLessThan`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`) and semver
//! library (`semver()`, `isSemver()`, `major`, `minor`, `patch`, `compareTo`, `isGreaterThan`,
//! `isLessThan`); a version attribute is a semver value, a capacity a quantity.
//!
//! As upstream: a domain no attribute uses reads as an empty map, a missing name within a domain
//! is a runtime error (the claim cannot be allocated, the error said — never "no device matches"),
//! and a selector must evaluate to a boolean.
//!
//! Cost: an expression is at most [`MAX_LENGTH`] bytes (`CELSelectorExpressionMaxLength`) and holds
//! at most [`MAX_COMPREHENSIONS`] comprehension macros (`all`, `exists`, `exists_one`, `map`,
//! `filter`), so one evaluation visits at most (attributes + capacities)^3 entries of a device —
//! the budget upstream enforces by its cost estimate (`CELSelectorExpressionMaxCost`), which
//! this interpreter does not compute. Compiled once per distinct expression, evaluated at most once
//! per (expression, device) by the allocator.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{Context, Env, ExecutionError, Program};

use crate::read::model::device::{AttributeValue, Device};
use crate::read::quantity::{self, Quantity};

/// The longest selector expression the API server accepts (`CELSelectorExpressionMaxLength`).
pub const MAX_LENGTH: usize = 10 * 1024;
/// The most comprehension macros an expression may hold here (none inside another's loop).
pub const MAX_COMPREHENSIONS: usize = 8;
/// The deepest an expression's syntax tree may be. The interpreter and its parser recurse once per
/// level, with frames large enough that a few thousand levels overflow a thread's stack and abort
/// the process (measured: `1 + 1 + … == 1` of 1,500 terms in a release build, 64 in a debug one,
/// on a 2 MiB stack) — so a user's selector could kill the scheduler. Selectors in use nest a
/// handful of levels (`device.attributes['d'].x == 'y'` is four).
pub const MAX_DEPTH: usize = 32;
/// The most operator characters (`+-*/%!<>=&|?.`, outside string literals) an expression may hold
/// before it is parsed: a bound on the parser's recursion, checked without recursing.
pub const MAX_OPERATORS: usize = 512;

/// A Kubernetes quantity inside CEL; equal when their values are (`1Gi == 1073741824`).
#[derive(Debug)]
struct Q(Quantity);

impl PartialEq for Q {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_value(&other.0).is_eq()
    }
}

impl Eq for Q {}

impl Opaque for Q {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version inside CEL.
#[derive(Debug, PartialEq, Eq)]
struct V(semver::Version);

impl Opaque for V {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// A compiled selector, and the domains it may index (string literals), so a device without an
/// attribute of such a domain reads an empty map there, as upstream's does. The selector every
/// DeviceClass starts with, `device.driver == "<name>"`, is decided without the interpreter.
pub struct Selector {
    program: Option<Program>,
    driver: Option<String>,
    domains: Vec<String>,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selector").field("domains", &self.domains).finish_non_exhaustive()
    }
}

/// The domains an expression indexes `device.attributes` or `device.capacity` with by a string
/// literal (`attributes['gpu.example.com']`, `capacity["x"]`): those a device without such an
/// attribute reads as an empty map, as upstream's lookup does. A domain only tested with `in`
/// is not one of them (`'x' in device.attributes` stays false).
fn indexed_domains(expr: &str) -> Vec<String> {
    let mut out = BTreeSet::new();
    for field in ["attributes", "capacity"] {
        for (at, _) in expr.match_indices(field) {
            let rest = expr[at + field.len()..].trim_start();
            let Some(rest) = rest.strip_prefix('[') else { continue };
            let rest = rest.trim_start();
            let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else { continue };
            let body = &rest[1..];
            if let Some(end) = body.find(q) {
                let lit = &body[..end];
                if !lit.is_empty() && lit.len() <= 253 && !lit.contains('\\') {
                    out.insert(lit.to_string());
                }
            }
        }
    }
    out.into_iter().collect()
}

/// (Operator characters outside string literals, deepest bracket nesting) of `expr`.
fn shape(expr: &str) -> (usize, usize) {
    let (mut operators, mut nesting, mut deepest) = (0usize, 0usize, 0usize);
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => drop(chars.next()),
                        d if d == c => break,
                        _ => {}
                    }
                }
            }
            '(' | '[' | '{' => {
                nesting += 1;
                deepest = deepest.max(nesting);
            }
            ')' | ']' | '}' => nesting = nesting.saturating_sub(1),
            '+' | '-' | '*' | '/' | '%' | '!' | '<' | '>' | '=' | '&' | '|' | '?' | '.' => operators += 1,
            _ => {}
        }
    }
    (operators, deepest)
}

/// The children of a syntax-tree node.
fn children(e: &cel::IdedExpr) -> Vec<&cel::IdedExpr> {
    use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr};
    fn entry(en: &IdedEntryExpr) -> Vec<&cel::IdedExpr> {
        match &en.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        }
    }
    match &e.expr {
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Select(sel) => vec![&*sel.operand],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map.entries.iter().flat_map(entry).collect(),
        Expr::Struct(st) => st.entries.iter().flat_map(entry).collect(),
        _ => Vec::new(),
    }
}

/// How deep the syntax tree `e` is, found without recursing.
fn depth(e: &cel::IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        stack.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// (How deep comprehension macros nest, how many there are) in `e`: a comprehension in another's
/// loop multiplies their iterations, one beside another adds them.
fn comprehensions(e: &cel::IdedExpr) -> (usize, usize) {
    use cel::common::ast::{EntryExpr, Expr};
    fn all<'e>(es: impl Iterator<Item = &'e cel::IdedExpr>) -> (usize, usize) {
        es.map(comprehensions).fold((0, 0), |(d, n), (d2, n2)| (d.max(d2), n + n2))
    }
    fn entries(es: &[cel::common::ast::IdedEntryExpr]) -> (usize, usize) {
        all(es.iter().flat_map(|en| match &en.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        }))
    }
    match &e.expr {
        Expr::Comprehension(c) => {
            let (outside, n1) = all([&c.iter_range, &c.accu_init, &c.result].into_iter());
            let (inside, n2) = all([&c.loop_cond, &c.loop_step].into_iter());
            (outside.max(inside + 1), n1 + n2 + 1)
        }
        Expr::Call(call) => all(call.target.iter().map(|t| &**t).chain(&call.args)),
        Expr::Select(sel) => comprehensions(&sel.operand),
        Expr::List(list) => all(list.elements.iter()),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(st) => entries(&st.entries),
        _ => (0, 0),
    }
}

/// Compiles a selector, or says why the API server (or this scheduler's bound) refuses it.
pub fn compile(expr: &str) -> Result<Selector, String> {
    if expr.len() > MAX_LENGTH {
        return Err(format!("the expression is {} bytes, more than the {MAX_LENGTH} allowed", expr.len()));
    }
    let (operators, nesting) = shape(expr);
    if operators > MAX_OPERATORS || nesting > MAX_DEPTH {
        return Err(format!(
            "the expression has {operators} operator characters and nests {nesting} brackets deep, more than the {MAX_OPERATORS} and {MAX_DEPTH} this scheduler evaluates safely"
        ));
    }
    // Kubernetes' CEL has optional syntax (`.?`, `[?`): parsed as it is.
    let program = Env::stdlib()
        .with_optional_support(true)
        .compile(expr)
        .map_err(|e| format!("does not compile: {e}"))?;
    let depth = depth(program.expression());
    if depth > MAX_DEPTH {
        return Err(format!(
            "the expression's syntax tree is {depth} levels deep, more than the {MAX_DEPTH} this scheduler evaluates safely"
        ));
    }
    let (depth, count) = comprehensions(program.expression());
    if depth > 1 {
        return Err(
            "a comprehension macro (all, exists, exists_one, map, filter) inside another's: too complex for this scheduler to bound"
                .into(),
        );
    }
    if count > MAX_COMPREHENSIONS {
        return Err(format!(
            "the expression uses {count} comprehension macros (all, exists, exists_one, map, filter), more than the {MAX_COMPREHENSIONS} this scheduler bounds"
        ));
    }
    if let Some(driver) = driver_equality(expr) {
        return Ok(Selector { program: None, driver: Some(driver), domains: Vec::new() });
    }
    Ok(Selector { program: Some(program), driver: None, domains: indexed_domains(expr) })
}

/// `"gpu.example.com"` of `device.driver == "gpu.example.com"` (either quote, any spaces, either
/// side), when that is the whole expression.
fn driver_equality(expr: &str) -> Option<String> {
    let (a, b) = expr.split_once("==")?;
    let (a, b) = (a.trim(), b.trim());
    let literal = |s: &str| {
        let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let inner = s.strip_prefix(q)?.strip_suffix(q)?;
        let plain = inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
        plain.then(|| inner.to_string())
    };
    match (a, b) {
        ("device.driver", lit) | (lit, "device.driver") => literal(lit),
        _ => None,
    }
}

fn quantity_of(v: &Arc<dyn Opaque>) -> Option<Quantity> {
    v.downcast_ref::<Q>().map(|q| q.0)
}

fn version_of(v: &Arc<dyn Opaque>) -> Option<&semver::Version> {
    v.downcast_ref::<V>().map(|v| &v.0)
}

fn compare(
    name: &str,
    a: &Arc<dyn Opaque>,
    b: &Arc<dyn Opaque>,
) -> Result<std::cmp::Ordering, ExecutionError> {
    if let (Some(x), Some(y)) = (quantity_of(a), quantity_of(b)) {
        return Ok(x.cmp_value(&y));
    }
    if let (Some(x), Some(y)) = (version_of(a), version_of(b)) {
        return Ok(x.cmp(y));
    }
    Err(ExecutionError::function_error(name, "compares a quantity with a quantity, a semver with a semver"))
}

fn opaque(q: Quantity) -> Value {
    Value::Opaque(Arc::new(Q(q)))
}

/// Kubernetes' semver library accepts `major.minor.patch` with optional pre-release and build.
fn parse_version(s: &str) -> Option<semver::Version> {
    semver::Version::parse(s).ok()
}

/// The evaluation context: the standard library and Kubernetes' quantity and semver functions.
/// One per cycle; each evaluation adds `device` in a scope of its own.
pub struct Evaluator {
    root: Context<'static, 'static>,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Evaluator")
    }
}

impl Default for Evaluator {
    fn default() -> Self {
        Self::new()
    }
}

impl Evaluator {
    pub fn new() -> Self {
        let mut ctx = Context::with_env(Arc::new(Env::stdlib()));
        let add = |name: &str, result: Result<(), cel::DeclarationError>| {
            debug_assert!(result.is_ok(), "{name} declared twice");
        };
        add(
            "quantity",
            ctx.add_function("quantity", |s: Arc<String>| -> Result<Value, ExecutionError> {
                quantity::parse(&s).map(opaque).map_err(|e| ExecutionError::function_error("quantity", e))
            }),
        );
        add("isQuantity", ctx.add_function("isQuantity", |s: Arc<String>| quantity::parse(&s).is_ok()));
        add(
            "semver",
            ctx.add_function("semver", |s: Arc<String>| -> Result<Value, ExecutionError> {
                parse_version(&s)
                    .map(|v| Value::Opaque(Arc::new(V(v))))
                    .ok_or_else(|| ExecutionError::function_error("semver", format!("{s:?} is not a semver")))
            }),
        );
        add("isSemver", ctx.add_function("isSemver", |s: Arc<String>| parse_version(&s).is_some()));
        add(
            "compareTo",
            ctx.add_function(
                "compareTo",
                |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| -> Result<i64, ExecutionError> {
                    Ok(compare("compareTo", &a, &b)? as i64)
                },
            ),
        );
        add(
            "isGreaterThan",
            ctx.add_function(
                "isGreaterThan",
                |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| -> Result<bool, ExecutionError> {
                    Ok(compare("isGreaterThan", &a, &b)?.is_gt())
                },
            ),
        );
        add(
            "isLessThan",
            ctx.add_function(
                "isLessThan",
                |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| -> Result<bool, ExecutionError> {
                    Ok(compare("isLessThan", &a, &b)?.is_lt())
                },
            ),
        );
        let q = |name: &'static str, v: &Arc<dyn Opaque>| {
            quantity_of(v).ok_or_else(|| ExecutionError::function_error(name, "expects a quantity"))
        };
        add(
            "sign",
            ctx.add_function("sign", move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                Ok(q("sign", &a)?.signum())
            }),
        );
        add(
            "isInteger",
            ctx.add_function(
                "isInteger",
                move |This(a): This<Arc<dyn Opaque>>| -> Result<bool, ExecutionError> {
                    Ok(q("isInteger", &a)?.as_integer().is_some())
                },
            ),
        );
        add(
            "asInteger",
            ctx.add_function(
                "asInteger",
                move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    q("asInteger", &a)?.as_integer().ok_or_else(|| {
                        ExecutionError::function_error(
                            "asInteger",
                            "the quantity is not an integer that fits 64 bits",
                        )
                    })
                },
            ),
        );
        add(
            "asApproximateFloat",
            ctx.add_function(
                "asApproximateFloat",
                move |This(a): This<Arc<dyn Opaque>>| -> Result<f64, ExecutionError> {
                    Ok(q("asApproximateFloat", &a)?.as_f64())
                },
            ),
        );
        add(
            "add",
            ctx.add_function(
                "add",
                move |This(a): This<Arc<dyn Opaque>>, b: Value| -> Result<Value, ExecutionError> {
                    let a = q("add", &a)?;
                    let b = match b {
                        Value::Int(i) => Quantity::from_int(i),
                        Value::Opaque(o) => q("add", &o)?,
                        _ => return Err(ExecutionError::function_error("add", "adds a quantity or an int")),
                    };
                    a.checked_add(&b)
                        .map(opaque)
                        .ok_or_else(|| ExecutionError::function_error("add", "overflow"))
                },
            ),
        );
        add(
            "sub",
            ctx.add_function(
                "sub",
                move |This(a): This<Arc<dyn Opaque>>, b: Value| -> Result<Value, ExecutionError> {
                    let a = q("sub", &a)?;
                    let b = match b {
                        Value::Int(i) => Quantity::from_int(i),
                        Value::Opaque(o) => q("sub", &o)?,
                        _ => {
                            return Err(ExecutionError::function_error(
                                "sub",
                                "subtracts a quantity or an int",
                            ));
                        }
                    };
                    a.checked_add(&b.negated())
                        .map(opaque)
                        .ok_or_else(|| ExecutionError::function_error("sub", "overflow"))
                },
            ),
        );
        let v = |name: &'static str, x: &Arc<dyn Opaque>| {
            version_of(x).cloned().ok_or_else(|| ExecutionError::function_error(name, "expects a semver"))
        };
        add(
            "major",
            ctx.add_function("major", move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                Ok(i64::try_from(v("major", &a)?.major).unwrap_or(i64::MAX))
            }),
        );
        add(
            "minor",
            ctx.add_function("minor", move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                Ok(i64::try_from(v("minor", &a)?.minor).unwrap_or(i64::MAX))
            }),
        );
        add(
            "patch",
            ctx.add_function("patch", move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                Ok(i64::try_from(v("patch", &a)?.patch).unwrap_or(i64::MAX))
            }),
        );
        Evaluator { root: ctx }
    }

    /// Whether `device` of `driver` passes `selector`: `Err` with the runtime error (a missing
    /// attribute, a type mismatch, a result that is not a boolean).
    pub fn matches(&self, selector: &Selector, driver: &str, device: &Device) -> Result<bool, String> {
        self.matches_all(&[selector], driver, device).remove(0)
    }

    /// [`Evaluator::matches`] for several selectors, the device read into CEL once.
    pub fn matches_all(
        &self,
        selectors: &[&Selector],
        driver: &str,
        device: &Device,
    ) -> Vec<Result<bool, String>> {
        // Each selector sees the domains it indexes, never another's.
        let mut scopes: Vec<(&[String], Context<'_, 'static>)> = Vec::new();
        selectors
            .iter()
            .map(|selector| {
                if let Some(d) = &selector.driver {
                    return Ok(d == driver);
                }
                let Some(program) = &selector.program else { return Ok(false) };
                let at = match scopes.iter().position(|(d, _)| *d == selector.domains.as_slice()) {
                    Some(at) => at,
                    None => {
                        let mut scope = self.root.new_inner_scope();
                        scope.add_variable_from_value(
                            "device",
                            device_value(driver, device, &selector.domains),
                        );
                        scopes.push((selector.domains.as_slice(), scope));
                        scopes.len() - 1
                    }
                };
                match program.execute(&scopes[at].1) {
                    Ok(Value::Bool(b)) => Ok(b),
                    Ok(other) => Err(format!("the expression evaluates to {other:?}, not a boolean")),
                    Err(e) => Err(e.to_string()),
                }
            })
            .collect()
    }

    /// Whether evaluating `selector` runs the interpreter (not decided by its driver alone).
    pub fn interpreted(selector: &Selector) -> bool {
        selector.program.is_some()
    }
}

/// `device` as CEL sees it: attributes and capacity grouped by domain, every domain in `domains`
/// present (empty when the device has nothing there).
fn device_value(driver: &str, device: &Device, domains: &[String]) -> Value {
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for d in domains {
        attributes.entry(d.clone()).or_default();
        capacity.entry(d.clone()).or_default();
    }
    for (name, value) in &device.attributes {
        let (domain, id) = name.rsplit_once('/').unwrap_or((driver, name));
        let v = match value {
            AttributeValue::Int(i) => Value::Int(*i),
            AttributeValue::Bool(b) => Value::Bool(*b),
            AttributeValue::String(s) => Value::String(Arc::new(s.clone())),
            AttributeValue::Version(s) => match parse_version(s) {
                Some(v) => Value::Opaque(Arc::new(V(v))),
                None => Value::String(Arc::new(s.clone())),
            },
        };
        attributes.entry(domain.to_string()).or_default().insert(id.to_string(), v);
    }
    for (name, q) in &device.capacity {
        let (domain, id) = name.rsplit_once('/').unwrap_or((driver, name));
        if let Ok(q) = quantity::parse(q) {
            capacity.entry(domain.to_string()).or_default().insert(id.to_string(), opaque(q));
        }
    }
    let mut map: HashMap<String, Value> = HashMap::new();
    map.insert("driver".into(), Value::String(Arc::new(driver.to_string())));
    map.insert("attributes".into(), attributes.into());
    map.insert("capacity".into(), capacity.into());
    map.insert("allowMultipleAllocations".into(), Value::Bool(false));
    Value::Map(map.into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn gpu() -> Device {
        Device {
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                ("gpu.example.com/model".into(), AttributeValue::String("a100".into())),
                ("gpu.example.com/index".into(), AttributeValue::Int(0)),
                ("gpu.example.com/driverVersion".into(), AttributeValue::Version("1.2.3".into())),
                ("example.com/nvlink".into(), AttributeValue::Bool(true)),
            ]),
            capacity: BTreeMap::from([("gpu.example.com/memory".into(), "80Gi".into())]),
            reach: None,
            consumes: Vec::new(),
            unsupported: None,
            fingerprint: None,
        }
    }

    fn eval(expr: &str) -> Result<bool, String> {
        Evaluator::new().matches(&compile(expr)?, "gpu.example.com", &gpu())
    }

    #[test]
    fn selectors_read_the_device_as_kubernetes_defines_it() {
        for (expr, want) in [
            ("device.driver == 'gpu.example.com'", true),
            ("device.driver == \"other.example.com\"", false),
            ("'gpu.example.com'==device.driver", true),
            ("device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].index == 0", true),
            ("device.attributes['gpu.example.com'].model == 'a100'", true),
            ("device.attributes['gpu.example.com'].index == 1", false),
            ("device.attributes['example.com'].nvlink", true),
            ("device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0", true),
            ("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('81920Mi'))", false),
            ("device.capacity['gpu.example.com'].memory.isLessThan(quantity('0.1Ti'))", true),
            ("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))", true),
            ("device.attributes['gpu.example.com'].driverVersion.major() == 1", true),
            ("quantity('1.5').isInteger()", false),
            ("quantity('2k').asInteger() == 2000", true),
            ("quantity('1Gi') == quantity('1073741824')", true),
            ("device.capacity['gpu.example.com'].memory == quantity('80Gi')", true),
            // A domain no attribute uses is an empty map: `has` and `in` read it.
            ("'model' in device.attributes['other.example.com']", false),
            ("!has(device.attributes['other.example.com'].model)", true),
            // Only a domain indexed reads as present-but-empty; `in` alone sees what is there.
            ("'other.example.com' in device.attributes", false),
            ("'example.com' in device.attributes", true),
            ("device.attributes.size() == 2", true),
        ] {
            assert_eq!(eval(expr), Ok(want), "{expr}");
        }
    }

    #[test]
    fn selectors_evaluated_together_each_see_only_the_domains_they_index() {
        let indexing = compile("!has(device.attributes['x.example.com'].y)").unwrap();
        let counting = compile("device.attributes.size() == 2").unwrap();
        let got = Evaluator::new().matches_all(&[&indexing, &counting], "gpu.example.com", &gpu());
        assert_eq!(got, vec![Ok(true), Ok(true)], "the first selector's domain is not the second's");
    }

    #[test]
    fn a_missing_attribute_or_a_result_that_is_not_a_boolean_is_an_error_not_a_mismatch() {
        let e = eval("device.attributes['gpu.example.com'].memory == 1").unwrap_err();
        assert!(e.contains("memory"), "{e}");
        let e = eval("device.attributes['gpu.example.com'].index").unwrap_err();
        assert!(e.contains("not a boolean"), "{e}");
        let e = eval("quantity('lots').sign() == 1").unwrap_err();
        assert!(e.contains("lots"), "{e}");
    }

    #[test]
    fn expressions_past_the_bounds_are_refused_before_evaluation() {
        let long = format!("device.driver == '{}'", "x".repeat(MAX_LENGTH));
        assert!(compile(&long).unwrap_err().contains("bytes"));
        // Deep trees abort the process when evaluated (the interpreter recurses per level):
        // refused before parsing, or once parsed, however they are written.
        let chain = format!("{} == 1", ["1"; 200].join(" + "));
        assert!(compile(&chain).unwrap_err().contains("syntax tree is"), "{:?}", compile(&chain).err());
        let long_chain = format!("{} == 1", ["1"; 2_000].join("+"));
        assert!(compile(&long_chain).unwrap_err().contains("operator characters"));
        let parens = format!("{}1{} == 1", "(".repeat(40), ")".repeat(40));
        assert!(compile(&parens).unwrap_err().contains("brackets deep"));
        // Operators inside string literals do not count.
        assert!(compile(&format!("device.driver == '{}'", "+".repeat(1_000))).is_ok());
        // Nested comprehensions multiply: refused, however they are spaced.
        let nested = "device.attributes.all (a, device.attributes.exists(b, true))";
        assert!(compile(nested).unwrap_err().contains("inside another's"));
        // Side by side they add up: four are fine, nine are not.
        let four = "device.attributes.exists(a, true) && device.capacity.exists(b, true) && [1].all(x, x > 0) && [2].exists(y, y > 1)";
        assert!(compile(four).is_ok());
        let nine = ["[1].exists(x, x > 0)"; 9].join(" && ");
        assert!(compile(&nine).unwrap_err().contains("9 comprehension macros"));
        assert!(compile("device.driver ==").unwrap_err().contains("does not compile"));
    }
}
