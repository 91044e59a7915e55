//! Device allocation (DRA), as upstream's structured allocator defines it, for one claim on one
//! node at a time — the cycle calls it for each member as it places the gang, with the devices
//! earlier members (and earlier gangs) took counted as taken, so a gang is placed only where every
//! member of its minimum has its devices.
//!
//! What counts: the ResourceSlices of each pool's newest generation (a pool with fewer slices
//! than it says is incomplete: its devices serve exact counts, never an `All` request, as
//! upstream), devices reachable from the node (`nodeName`, `nodeSelector`, `allNodes`, per
//! device), not allocated to any claim (admin access excepted), passing their class's selectors
//! and the request's (CEL, [`crate::read::cel`]). A request takes `exactly` or the first of its
//! `firstAvailable` subrequests that can be satisfied; `matchAttribute` constraints hold across
//! the requests they name. The choice is a depth-first search that backtracks over devices and
//! alternatives, bounded by [`SEARCH_BUDGET`] steps per claim and node and [`CYCLE_BUDGET`] for
//! the cycle.
//!
//! Cost: each distinct selector is compiled once per cycle, and evaluated at most once per device
//! per cycle (the verdict is kept), so a cycle evaluates at most selectors × devices expressions
//! whatever the number of pods and nodes tried ([`Devices::evaluations`] counts them).

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use std::hash::BuildHasherDefault;

use super::Fx;
use super::filter::term_matches;
use crate::decide::plan::{ClaimRelease, Plan, Reason};
use crate::read::cel::{self, Evaluator};
use crate::read::model::device::{
    AllocatedDevice, AttributeValue, Count, Device, DeviceId, DeviceRequest, MatchAttribute, RESULTS_MAX,
    Reach, ResourceSlice, Subrequest, fingerprint, selector_key,
};
use crate::read::model::volume::{ClaimName, ResourceClaim};
use crate::read::model::{
    Node, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, ObjectKey, PodKey, Snapshot,
};

/// A device of the cycle's table.
pub(crate) type DeviceIx = u32;

/// The most steps one claim's search on one node takes (a step: one device tried for a request).
pub const SEARCH_BUDGET: u32 = 4_096;
/// The most steps all searches of one cycle take together: past it, claims that need a search
/// find nothing more in the cycle (said), so a claim whose constraints no node can meet costs a
/// bounded time however many nodes there are.
pub const CYCLE_BUDGET: u64 = 4_000_000;

/// A device that counts, and where it is.
#[derive(Debug)]
struct Entry<'a> {
    slice: &'a ResourceSlice,
    device: &'a Device,
    /// Its pool is incomplete (newest generation has fewer slices than it says).
    incomplete: bool,
    /// Its pool is invalid (a device named twice, a counter set named twice, a consumption of a
    /// counter set or counter it does not have): none of its devices is allocated, as upstream.
    invalid: bool,
    /// Its pool, in [`Devices::pools`].
    pool: u32,
    /// What it consumes while allocated: (counter, billionths), counters as [`Devices::base`]
    /// indexes them.
    uses: Box<[(u32, i128)]>,
    /// A device this scheduler does not allocate ([`Device::unsupported`]): never a candidate,
    /// but counted for its pool.
    unsupported: bool,
}

/// A pool of the newest generation: what partitionable devices need of it.
#[derive(Debug, Default)]
struct Pool<'a> {
    driver: &'a str,
    name: &'a str,
    /// Why it is invalid, if it is.
    invalid: Option<String>,
    /// Its counters, as [`Devices::base`] indexes them.
    counters: Vec<u32>,
    /// Its devices that consume counters.
    consumers: Vec<DeviceIx>,
}

impl Entry<'_> {
    fn reach(&self) -> Option<&Reach> {
        self.device.reach.as_ref().or(self.slice.reach.as_ref())
    }

    fn id(&self) -> DeviceId {
        DeviceId {
            driver: self.slice.driver.clone(),
            pool: self.slice.pool.clone(),
            device: self.device.name.clone(),
        }
    }
}

/// The devices of one claim's allocation on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Allocated {
    /// (request or `<request>/<subrequest>` name, device, admin access), in request order.
    pub devices: Vec<(String, DeviceIx, bool)>,
    /// The allocation's `nodeSelector`: `None` when its devices are reachable from every node.
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
}

/// Why a claim cannot be allocated on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not enough devices there, in words; and whether devices (or shared counters) the step's
    /// own placements took are among those it could have used — another choice of theirs might
    /// leave room.
    NoFit(String, bool),
    /// An error that is the claim's, not the node's (a selector that fails, a class missing):
    /// the claim cannot be allocated anywhere.
    Error(String),
}

/// What a claim asks that decides where it fits: its requests and constraints.
type Shape = (Vec<DeviceRequest>, Vec<MatchAttribute>);

/// A node's free partitions of one counter set: how many, and per counter how many of them
/// consume it and the least any does.
type SetCount = (i64, FxMap<u32, (i64, i128)>);

/// A map keyed by the cycle's own values (not user input): the fast hasher.
type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// A selector's verdict on a device: (selector, passes or the error).
type Verdict = (usize, Result<bool, String>);

/// A selector chain (a class's selectors then a request's): its id and selectors, or why it
/// cannot select anywhere.
type Chain = Result<(usize, Rc<[usize]>), String>;

/// The devices an alternative selects on a node, or why it cannot select any.
type Selected = Rc<Result<Vec<DeviceIx>, String>>;

/// The cycle's device table and selector verdicts (see the module documentation).
pub(crate) struct Devices<'a> {
    snap: &'a Snapshot,
    entries: Vec<Entry<'a>>,
    /// Node name → the devices local to it.
    local: HashMap<&'a str, Vec<DeviceIx>, BuildHasherDefault<Fx>>,
    /// Devices reachable from nodes by selector or from all nodes.
    shared: Vec<DeviceIx>,
    /// Devices allocated to claims (not for admin access).
    allocated: Vec<bool>,
    /// The pools of the newest generations.
    pools: Vec<Pool<'a>>,
    /// Per counter of every pool: its value less what devices allocated in the cluster consume
    /// (negative when over-committed), in billionths.
    base: Vec<i128>,
    /// Per counter: (its pool, its set's name, its name).
    counter_names: Vec<(u32, &'a str, &'a str)>,
    by_id: HashMap<(&'a str, &'a str, &'a str), DeviceIx, BuildHasherDefault<Fx>>,
    /// Devices this scheduler does not allocate, by node (`""`: shared ones): counted in reasons.
    unsupported: HashMap<&'a str, usize, BuildHasherDefault<Fx>>,
    eval: OnceCell<Evaluator>,
    /// Selector text → its index in `compiled` and `texts`.
    selector_ids: RefCell<HashMap<String, usize>>,
    compiled: RefCell<Vec<Rc<Result<cel::Selector, String>>>>,
    /// Per selector, its [`selector_key`].
    texts: RefCell<Vec<u64>>,
    /// Per device, its [`fingerprint`] once computed.
    fingerprints: RefCell<Vec<Option<u64>>>,
    /// Per device, the verdicts of the selectors evaluated on it: (selector, verdict).
    verdicts: RefCell<Vec<Vec<Verdict>>>,
    /// A claim's alternative (by address: the snapshot outlives the cycle) → the selectors its
    /// devices pass: its class's, then its own.
    alternative_selectors: RefCell<HashMap<usize, Chain, BuildHasherDefault<Fx>>>,
    /// Selector chains by content → their id: alternatives alike (claims made from one template)
    /// share one, its check and its devices per node.
    chains: RefCell<HashMap<Rc<[usize]>, Chain>>,
    /// (alternative, node) → the devices reachable there that its selectors select, free or not.
    selected: RefCell<HashMap<(usize, usize), Selected, BuildHasherDefault<Fx>>>,
    evaluations: Cell<u64>,
    /// Search steps left for the cycle ([`CYCLE_BUDGET`]).
    budget: Cell<u64>,
    /// A claim (by address) → the id of what it asks (requests and constraints): claims made from
    /// one template share one.
    shapes: RefCell<FxMap<usize, u32>>,
    shape_ids: RefCell<HashMap<Shape, u32>>,
    /// (what a claim asks, node by address) → why it cannot be allocated there, found with no
    /// device of the step's own placements in the way: what the cycle commits only ever takes
    /// more, so it stays true for the rest of the cycle and is not searched again.
    dead: RefCell<FxMap<(u32, usize), String>>,
}

impl std::fmt::Debug for Devices<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Devices").field("devices", &self.entries.len()).finish_non_exhaustive()
    }
}

impl<'a> Devices<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        let storage = &snap.storage;
        // Each pool's newest generation, and how many of its slices are here.
        // (driver, pool) → (newest generation, its slices here, the slices it says it has).
        let mut pools: FxMap<(&str, &str), (i64, i64, i64)> = HashMap::default();
        for s in storage.resource_slices.values() {
            let e =
                pools.entry((s.driver.as_str(), s.pool.as_str())).or_insert((s.generation, 0, s.slice_count));
            if s.generation > e.0 {
                *e = (s.generation, 0, s.slice_count);
            }
            if s.generation == e.0 {
                e.1 += 1;
            }
        }
        let mut out = Devices {
            snap,
            entries: Vec::new(),
            local: HashMap::default(),
            shared: Vec::new(),
            allocated: Vec::new(),
            pools: Vec::new(),
            base: Vec::new(),
            counter_names: Vec::new(),
            by_id: HashMap::default(),
            unsupported: HashMap::default(),
            eval: OnceCell::new(),
            selector_ids: RefCell::new(HashMap::new()),
            compiled: RefCell::new(Vec::new()),
            texts: RefCell::new(Vec::new()),
            fingerprints: RefCell::new(Vec::new()),
            verdicts: RefCell::new(Vec::new()),
            alternative_selectors: RefCell::new(HashMap::default()),
            chains: RefCell::new(HashMap::new()),
            selected: RefCell::new(HashMap::default()),
            evaluations: Cell::new(0),
            budget: Cell::new(CYCLE_BUDGET),
            shapes: RefCell::new(HashMap::default()),
            shape_ids: RefCell::new(HashMap::new()),
            dead: RefCell::new(HashMap::default()),
        };
        let mut pool_ids: FxMap<(&str, &str), u32> = HashMap::default();
        // (pool, set, counter) → its index in `base`.
        let mut counter_ids: FxMap<(u32, &str, &str), u32> = HashMap::default();
        let mut set_names: HashSet<(u32, &str)> = HashSet::new();
        for s in storage.resource_slices.values() {
            let (generation, seen, count) = pools[&(s.driver.as_str(), s.pool.as_str())];
            if s.generation != generation {
                continue;
            }
            let next = u32::try_from(out.pools.len()).unwrap_or(u32::MAX);
            let pool = *pool_ids.entry((s.driver.as_str(), s.pool.as_str())).or_insert_with(|| {
                out.pools.push(Pool { driver: &s.driver, name: &s.pool, ..Pool::default() });
                next
            });
            for set in &s.counters {
                // Counter sets are the pool's (Kubernetes 1.35): a name twice makes it invalid.
                if !set_names.insert((pool, set.name.as_str())) {
                    out.pools[pool as usize]
                        .invalid
                        .get_or_insert(format!("counter set {} is defined twice", set.name));
                    continue;
                }
                for (counter, &milli) in &set.nano {
                    let Ok(id) = u32::try_from(out.base.len()) else { break };
                    counter_ids.insert((pool, set.name.as_str(), counter.as_str()), id);
                    out.pools[pool as usize].counters.push(id);
                    out.base.push(milli);
                    out.counter_names.push((pool, &set.name, counter));
                }
            }
            for d in &s.devices {
                let reach = d.reach.as_ref().or(s.reach.as_ref());
                let at = match reach {
                    Some(Reach::Node(n)) => n.as_str(),
                    _ => "",
                };
                // A device this scheduler does not allocate still counts for its pool: what it
                // consumes while allocated, and whether its references make the pool invalid.
                let unsupported = d.unsupported.is_some();
                if unsupported {
                    *out.unsupported.entry(at).or_default() += 1;
                }
                let Ok(ix) = DeviceIx::try_from(out.entries.len()) else { break };
                // A device name twice in a pool makes the pool invalid upstream.
                if let Some(first) = out.by_id.insert((&s.driver, &s.pool, &d.name), ix) {
                    out.pools[pool as usize]
                        .invalid
                        .get_or_insert(format!("device {} is listed twice", d.name));
                    out.by_id.insert((&s.driver, &s.pool, &d.name), first);
                    continue;
                }
                if !d.consumes.is_empty() {
                    out.pools[pool as usize].consumers.push(ix);
                }
                out.entries.push(Entry {
                    slice: s,
                    device: d,
                    incomplete: seen != count,
                    invalid: false,
                    pool,
                    uses: Box::default(),
                    unsupported,
                });
                match reach {
                    _ if unsupported => {}
                    Some(Reach::Node(n)) => out.local.entry(n.as_str()).or_default().push(ix),
                    Some(_) => out.shared.push(ix),
                    None => {}
                }
            }
        }
        // What each device consumes; a set or counter its pool lacks makes the pool invalid.
        for e in &mut out.entries {
            if e.device.consumes.is_empty() {
                continue;
            }
            let mut uses = Vec::new();
            for c in &e.device.consumes {
                for (counter, &milli) in &c.nano {
                    match counter_ids.get(&(e.pool, c.counter_set.as_str(), counter.as_str())) {
                        Some(&id) => uses.push((id, milli)),
                        None => {
                            let missing = if set_names.contains(&(e.pool, c.counter_set.as_str())) {
                                format!(
                                    "device {} consumes counter {counter} that counter set {} does not have",
                                    e.device.name, c.counter_set
                                )
                            } else {
                                format!(
                                    "device {} consumes from counter set {}, which the pool does not define",
                                    e.device.name, c.counter_set
                                )
                            };
                            out.pools[e.pool as usize].invalid.get_or_insert(missing);
                        }
                    }
                }
            }
            e.uses = uses.into_boxed_slice();
        }
        for e in &mut out.entries {
            e.invalid = out.pools[e.pool as usize].invalid.is_some();
        }
        out.allocated = vec![false; out.entries.len()];
        out.verdicts = RefCell::new(vec![Vec::new(); out.entries.len()]);
        out.fingerprints = RefCell::new(vec![None; out.entries.len()]);
        for c in storage.resource_claims.values() {
            for d in c.allocation.iter().flat_map(|a| &a.devices).filter(|d| !d.admin_access) {
                if let Some(&ix) =
                    out.by_id.get(&(d.id.driver.as_str(), d.id.pool.as_str(), d.id.device.as_str()))
                    && !out.allocated[ix as usize]
                {
                    out.allocated[ix as usize] = true;
                    // Allocated devices consume their counters (an over-committed counter goes
                    // negative and then no device consuming from its pool fits, as upstream).
                    for &(c, milli) in &out.entries[ix as usize].uses {
                        out.base[c as usize] = out.base[c as usize].saturating_sub(milli);
                    }
                }
            }
        }
        out
    }

    /// Whether there is any device to allocate.
    pub fn any(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Whether any device draws on shared counters.
    pub fn partitionable(&self) -> bool {
        self.pools.iter().any(|p| !p.consumers.is_empty())
    }

    /// How many selector evaluations the cycle made.
    pub fn evaluations(&self) -> u64 {
        self.evaluations.get()
    }

    pub fn id(&self, ix: DeviceIx) -> DeviceId {
        self.entries[ix as usize].id()
    }

    /// Whether device `ix` is allocated to a claim in the cluster.
    pub fn allocated(&self, ix: DeviceIx) -> bool {
        self.allocated[ix as usize]
    }

    fn reachable(&self, ix: DeviceIx, node: &Node) -> bool {
        match self.entries[ix as usize].reach() {
            Some(Reach::Node(n)) => n == node.name.as_str(),
            Some(Reach::Selector(terms)) => terms.iter().any(|t| term_matches(t, node)),
            Some(Reach::All) => true,
            None => false,
        }
    }

    /// The devices reachable from `node`, local ones first.
    fn on<'s>(&'s self, node: &'s Node) -> impl Iterator<Item = DeviceIx> + 's {
        let local = self.local.get(node.name.as_str()).map_or(&[][..], Vec::as_slice);
        (local.iter().copied())
            .chain(self.shared.iter().copied().filter(move |&ix| self.reachable(ix, node)))
            .filter(|&ix| !self.entries[ix as usize].invalid)
    }

    /// The selector compiled from `expr`, by id (compiled once per cycle).
    fn selector(&self, expr: &str) -> usize {
        if let Some(&id) = self.selector_ids.borrow().get(expr) {
            return id;
        }
        let compiled = Rc::new(cel::compile(expr));
        let mut all = self.compiled.borrow_mut();
        let id = all.len();
        all.push(compiled);
        self.texts.borrow_mut().push(selector_key(expr));
        self.selector_ids.borrow_mut().insert(expr.to_string(), id);
        id
    }

    fn fingerprint(&self, ix: DeviceIx) -> u64 {
        if let Some(f) = self.fingerprints.borrow()[ix as usize] {
            return f;
        }
        let e = &self.entries[ix as usize];
        let f = e.device.fingerprint.unwrap_or_else(|| fingerprint(&e.slice.driver, e.device));
        self.fingerprints.borrow_mut()[ix as usize] = Some(f);
        f
    }

    /// The selectors of alternative `alt` (its class's, then its own), or why it cannot be
    /// allocated anywhere: its class missing, or a selector failing on some device. The chain is
    /// run on every device of the cycle once per alternative (verdicts kept, so once per device
    /// and selector): kube-scheduler gives up on a pod at the first selector error its filter
    /// meets, so an error anywhere leaves the claim unallocated, whatever order nodes are tried in.
    fn selectors_of(&self, alt: &Subrequest) -> Chain {
        let at = std::ptr::from_ref(alt) as usize;
        if let Some(chain) = self.alternative_selectors.borrow().get(&at) {
            return chain.clone();
        }
        let Some(c) = self.snap.storage.device_classes.get(&alt.class) else {
            return Err(format!("DeviceClass {} does not exist", alt.class));
        };
        let ids: Rc<[usize]> = c.selectors.iter().chain(&alt.selectors).map(|e| self.selector(e)).collect();
        let known = self.chains.borrow().get(&ids).cloned();
        let chain = match known {
            Some(chain) => chain,
            None => {
                let id = self.chains.borrow().len();
                let chain =
                    self.check_everywhere(&ids, c.selectors.len(), &alt.class).map(|()| (id, ids.clone()));
                self.chains.borrow_mut().insert(ids, chain.clone());
                chain
            }
        };
        self.alternative_selectors.borrow_mut().insert(at, chain.clone());
        chain
    }

    /// The first error of the selector chain `ids` on any device, in device order.
    fn check_everywhere(&self, ids: &[usize], class_selectors: usize, class: &str) -> Result<(), String> {
        let Ok(devices) = DeviceIx::try_from(self.entries.len()) else { return Ok(()) };
        for ix in (0..devices).filter(|&ix| !self.entries[ix as usize].unsupported) {
            for (i, &id) in ids.iter().enumerate() {
                match self.passes(id, ix) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        let which = if i < class_selectors {
                            format!("a selector of DeviceClass {class}")
                        } else {
                            "a selector".to_string()
                        };
                        return Err(format!("{which} fails on device {}: {e}", self.id(ix)));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether device `ix` passes selector `id`: kept from earlier cycles while the device and
    /// the selector stay the same ([`crate::read::model::device::SelectorCache`]), else evaluated — with every other selector
    /// compiled so far that has no verdict on it (the device read into CEL once).
    fn passes(&self, id: usize, ix: DeviceIx) -> Result<bool, String> {
        if let Some((_, v)) = self.verdicts.borrow()[ix as usize].iter().find(|(s, _)| *s == id) {
            return v.clone();
        }
        let cache = &self.snap.storage.selector_cache;
        let fingerprint = self.fingerprint(ix);
        let texts = self.texts.borrow();
        if let Some(v) = cache.get(texts[id], fingerprint) {
            self.verdicts.borrow_mut()[ix as usize].push((id, v.clone()));
            return v;
        }
        let compiled = self.compiled.borrow();
        let missing: Vec<usize> = {
            let have = &self.verdicts.borrow()[ix as usize];
            (0..compiled.len()).filter(|s| !have.iter().any(|(h, _)| h == s)).collect()
        };
        let ok: Vec<(usize, &cel::Selector)> =
            missing.iter().filter_map(|&s| compiled[s].as_ref().as_ref().ok().map(|sel| (s, sel))).collect();
        let e = &self.entries[ix as usize];
        let eval = self.eval.get_or_init(Evaluator::new);
        let interpreted = ok.iter().filter(|(_, sel)| Evaluator::interpreted(sel)).count();
        self.evaluations.set(self.evaluations.get() + interpreted as u64);
        let sels: Vec<&cel::Selector> = ok.iter().map(|(_, s)| *s).collect();
        let verdicts = eval.matches_all(&sels, &e.slice.driver, e.device);
        let mut all = self.verdicts.borrow_mut();
        let have = &mut all[ix as usize];
        for ((s, _), v) in ok.iter().zip(verdicts) {
            cache.put(texts[*s], fingerprint, v.clone());
            have.push((*s, v));
        }
        for &s in &missing {
            if let Err(e) = compiled[s].as_ref() {
                have.push((s, Err(e.clone())));
            }
        }
        have.iter().find(|(s, _)| *s == id).map_or(Ok(false), |(_, v)| v.clone())
    }

    /// The devices reachable from `node` that alternative `alt` selects, free or not (once per
    /// alternative and node).
    fn selected(&self, alt: &Subrequest, node: &Node) -> Selected {
        let (chain, ids) = match self.selectors_of(alt) {
            Ok(c) => c,
            Err(e) => return Rc::new(Err(e)),
        };
        let key = (chain, std::ptr::from_ref(node) as usize);
        if let Some(s) = self.selected.borrow().get(&key) {
            return s.clone();
        }
        // Every device's verdicts are known, none an error (checked on every device first).
        let out: Vec<DeviceIx> =
            self.on(node).filter(|&ix| ids.iter().all(|&id| self.passes(id, ix) == Ok(true))).collect();
        let out = Rc::new(Ok(out));
        self.selected.borrow_mut().insert(key, out.clone());
        out
    }

    /// Allocates `claim` on `node`: the devices, or why not. `taken`: what placements earlier in
    /// the cycle took; `avoid`: choices not to make again — a gang revisiting a choice that left a
    /// later member without devices ([`super::place`]).
    pub fn allocate(
        &self,
        claim: &ResourceClaim,
        node: &Node,
        taken: &dyn Fn(DeviceIx) -> Taken,
        avoid: &[Avoid],
    ) -> Result<Allocated, Refusal> {
        let ask = &claim.ask;
        let dead_key = (self.shape(claim), std::ptr::from_ref(node) as usize);
        if let Some(why) = self.dead.borrow().get(&dead_key) {
            return Err(Refusal::NoFit(why.clone(), false));
        }
        let mut counters = Counters::default();
        let mut contended = false;
        // Whether the pod's own other claims took a device it could have used: the failure
        // depends on their choice, so it is not remembered for the node.
        let mut own = false;
        // Per request, per alternative: the devices selected, free (admin access: in use too),
        // whose counters have room each on its own.
        let mut options: Vec<Vec<Vec<DeviceIx>>> = Vec::with_capacity(ask.requests.len());
        for r in &ask.requests {
            let mut per = Vec::with_capacity(r.alternatives.len());
            for alt in &r.alternatives {
                let selected = self.selected(alt, node);
                let selected = match &*selected {
                    Ok(s) => s,
                    // The same error for every node (its chain is checked on every device).
                    Err(e) => return Err(Refusal::Error(e.clone())),
                };
                let mut free: Vec<DeviceIx> = Vec::with_capacity(selected.len());
                for &ix in selected {
                    // Admin access takes devices in use too, but not past their counters (as
                    // upstream checks them whatever the access).
                    if !alt.admin_access {
                        if self.allocated(ix) {
                            continue;
                        }
                        match taken(ix) {
                            Taken::Free => {}
                            Taken::Step => {
                                contended = true;
                                continue;
                            }
                            Taken::Own => {
                                own = true;
                                continue;
                            }
                            Taken::Earlier => continue,
                        }
                    }
                    if !self.entries[ix as usize].uses.is_empty() {
                        let pool = self.entries[ix as usize].pool;
                        contended |= self.count_pool(pool, taken, &mut counters);
                        if let Err(c) = self.counters_allow(ix, &counters) {
                            counters.short.get_or_insert(c);
                            continue;
                        }
                    }
                    free.push(ix);
                }
                if alt.count == Count::All {
                    if selected.iter().any(|&ix| self.entries[ix as usize].incomplete) {
                        return Err(Refusal::Error(format!(
                            "request {} asks for all matching devices, and a pool they are in is incomplete (fewer ResourceSlices than its resourceSliceCount)",
                            alt.name
                        )));
                    }
                    // Every matching device, or none: one in use makes the request unsatisfiable
                    // here, as upstream's allocator judges `All`.
                    if free.len() < selected.len() {
                        per.push(Vec::new());
                        continue;
                    }
                }
                per.push(free);
            }
            options.push(per);
        }
        let mut search = Search {
            devices: self,
            claim,
            options: &options,
            picked: Vec::new(),
            fixed: vec![None; ask.constraints.len()],
            counters,
            avoid,
            avoided: 0,
            budget: u32::try_from(self.budget.get().min(u64::from(SEARCH_BUDGET))).unwrap_or(0),
        };
        let start = search.budget;
        let found = search.request(0);
        self.budget.set(self.budget.get().saturating_sub(u64::from(start - search.budget)));
        if found {
            let local = search
                .picked
                .iter()
                .any(|(_, ix, _)| matches!(self.entries[*ix as usize].reach(), Some(Reach::Node(_))));
            let node_selector = if local {
                Some(vec![NodeSelectorTerm {
                    match_expressions: Vec::new(),
                    match_fields: vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: NodeSelectorOperator::In,
                        values: vec![node.name.to_string()],
                    }],
                }])
            } else {
                self.merged_selector(search.picked.iter().map(|(_, ix, _)| *ix))
            };
            let devices = search.picked.into_iter().collect();
            return Ok(Allocated { devices, node_selector });
        }
        let avoided = search.avoided > 0;
        let short = search.counters.short;
        let own_pool = search.counters.own_pool;
        if search.budget == 0 {
            return Err(Refusal::NoFit(
                if self.budget.get() == 0 {
                    format!("the cycle's {CYCLE_BUDGET} allocation search steps are spent")
                } else {
                    format!("no allocation found within {SEARCH_BUDGET} search steps")
                },
                contended || avoided,
            ));
        }
        let mut why = self.shortfall(claim, &options, node);
        if let Some(c) = short {
            let (pool, set, counter) = self.counter_names[c as usize];
            let pool = &self.pools[pool as usize];
            why.push_str(&format!(
                "; devices that match are partitions whose shared counter {counter} (set {set}, pool {}/{}) has too little left",
                pool.driver, pool.name
            ));
        }
        if avoided {
            why.push_str("; other choices here were tried for the gang already");
        }
        if !contended && !avoided && !own && !own_pool {
            self.dead.borrow_mut().insert(dead_key, why.clone());
        }
        Err(Refusal::NoFit(why, contended || avoided))
    }

    /// The id of what `claim` asks (see [`Devices::shapes`]).
    fn shape(&self, claim: &ResourceClaim) -> u32 {
        let at = std::ptr::from_ref(claim) as usize;
        if let Some(&id) = self.shapes.borrow().get(&at) {
            return id;
        }
        let key = (claim.ask.requests.clone(), claim.ask.constraints.clone());
        let mut ids = self.shape_ids.borrow_mut();
        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let id = *ids.entry(key).or_insert(next);
        self.shapes.borrow_mut().insert(at, id);
        id
    }

    /// Whether device `ix`'s counters have room for it with nothing else of the cycle taken:
    /// what it consumes is left in every counter, and no counter of its pool is over-committed.
    fn counters_room(&self, ix: DeviceIx) -> bool {
        let e = &self.entries[ix as usize];
        e.uses.is_empty()
            || (e.uses.iter().all(|&(c, milli)| self.base[c as usize] >= milli)
                && self.pools[e.pool as usize].counters.iter().all(|&c| self.base[c as usize] >= 0))
    }

    /// The counter set (by its first counter's index) every counter device `e` consumes belongs
    /// to, when it is one.
    fn one_set(&self, e: &Entry<'_>) -> Option<u32> {
        let &(first, _) = e.uses.first()?;
        let set = self.counter_names[first as usize].1;
        let pool = &self.pools[e.pool as usize];
        e.uses.iter().all(|&(c, _)| self.counter_names[c as usize].1 == set).then(|| {
            pool.counters.iter().copied().find(|&c| self.counter_names[c as usize].1 == set).unwrap_or(first)
        })
    }

    /// Counts in `counters`, once per allocation, what the devices of `pool` that placements of
    /// the cycle took consume; whether the step's own placements took any of them.
    fn count_pool(&self, pool: u32, taken: &dyn Fn(DeviceIx) -> Taken, counters: &mut Counters) -> bool {
        if let Some(&(_, step, _)) = counters.pools.iter().find(|(p, _, _)| *p == pool) {
            return step;
        }
        let mut step = false;
        for &d in &self.pools[pool as usize].consumers {
            if self.allocated(d) {
                continue;
            }
            let t = taken(d);
            if t == Taken::Free {
                continue;
            }
            step |= t == Taken::Step;
            counters.own_pool |= t == Taken::Own;
            for &(c, milli) in &self.entries[d as usize].uses {
                let used = counters.used.entry(c).or_default();
                *used = used.saturating_add(milli);
            }
        }
        let over =
            self.pools[pool as usize].counters.iter().copied().find(|&c| {
                self.base[c as usize].saturating_sub(counters.used.get(&c).copied().unwrap_or(0)) < 0
            });
        counters.pools.push((pool, step, over));
        step
    }

    /// Whether device `ix`'s consumption fits what its pool's counters have left beside what
    /// `counters` holds as used (its pool counted by [`Self::count_pool`]): `Err` names a
    /// counter that is short. A pool with a counter over-committed (allocations consume more
    /// than it has, after its slice changed) allocates no partition, as upstream checks every
    /// counter of the pool.
    fn counters_allow(&self, ix: DeviceIx, counters: &Counters) -> Result<(), u32> {
        let e = &self.entries[ix as usize];
        if let Some(&(_, _, Some(c))) = counters.pools.iter().find(|(p, _, _)| *p == e.pool) {
            return Err(c);
        }
        for &(c, milli) in e.uses.iter() {
            if self.base[c as usize].saturating_sub(counters.used.get(&c).copied().unwrap_or(0)) < milli {
                return Err(c);
            }
        }
        Ok(())
    }

    /// One term with every requirement of the selectors of the devices' slices (upstream merges
    /// them so); `None` when all are reachable from every node.
    fn merged_selector(&self, devices: impl Iterator<Item = DeviceIx>) -> Option<Vec<NodeSelectorTerm>> {
        let mut exprs: Vec<NodeSelectorRequirement> = Vec::new();
        let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
        let mut any = false;
        for ix in devices {
            if let Some(Reach::Selector(terms)) = self.entries[ix as usize].reach()
                && let Some(t) = terms.first()
            {
                any = true;
                for r in &t.match_expressions {
                    if !exprs.contains(r) {
                        exprs.push(r.clone());
                    }
                }
                for r in &t.match_fields {
                    if !fields.contains(r) {
                        fields.push(r.clone());
                    }
                }
            }
        }
        any.then(|| vec![NodeSelectorTerm { match_expressions: exprs, match_fields: fields }])
    }

    /// Why the claim's requests find too few devices on `node`, the first short one named.
    fn shortfall(&self, claim: &ResourceClaim, options: &[Vec<Vec<DeviceIx>>], node: &Node) -> String {
        let skipped = self.unsupported.get(node.name.as_str()).copied().unwrap_or(0);
        let mut note = if skipped > 0 {
            format!(" ({skipped} device(s) there use features this scheduler does not allocate)")
        } else {
            String::new()
        };
        // Invalid pools the node reaches: their devices are never allocated, said once each.
        let local = self.local.get(node.name.as_str()).map_or(&[][..], Vec::as_slice);
        let reached = local.iter().chain(self.shared.iter()).filter(|&&ix| self.entries[ix as usize].invalid);
        let mut said: Vec<u32> = Vec::new();
        for &ix in reached {
            let pool = self.entries[ix as usize].pool;
            if said.contains(&pool) || !self.reachable(ix, node) {
                continue;
            }
            said.push(pool);
            let p = &self.pools[pool as usize];
            let why = p.invalid.as_deref().unwrap_or("");
            note.push_str(&format!(
                " (pool {}/{} is invalid, its devices are not allocated: {why})",
                p.driver, p.name
            ));
        }
        for (r, per) in claim.ask.requests.iter().zip(options) {
            let fits = r.alternatives.iter().zip(per).any(|(alt, free)| match alt.count {
                Count::Exact(k) => free.len() >= k as usize,
                Count::All => !free.is_empty(),
            });
            if !fits {
                let alt = &r.alternatives[0];
                let need = match alt.count {
                    Count::Exact(k) => k.to_string(),
                    Count::All => "all (at least 1)".into(),
                };
                return format!(
                    "request {} finds {} free device(s) of class {} matching its selectors, needs {need}{note}",
                    r.name,
                    per[0].len(),
                    alt.class,
                );
            }
        }
        format!(
            "the free devices cannot satisfy the claim's constraints (matchAttribute {}){note}",
            claim.ask.constraints.iter().map(|c| c.attribute.as_str()).collect::<Vec<_>>().join(", ")
        )
    }

    /// Whether an allocation with `node_selector` serves a pod on `node`.
    pub fn serves(node_selector: &Option<Vec<NodeSelectorTerm>>, node: &Node) -> bool {
        node_selector.as_ref().is_none_or(|terms| terms.iter().any(|t| term_matches(t, node)))
    }

    /// The allocation result's devices, as the claim's status names them.
    pub fn results(&self, a: &Allocated) -> Vec<AllocatedDevice> {
        a.devices
            .iter()
            .map(|(request, ix, admin)| AllocatedDevice {
                request: request.clone(),
                id: self.id(*ix),
                admin_access: *admin,
            })
            .collect()
    }

    /// The classes an allocation used, each with the requests that used it (for `FromClass`
    /// configuration).
    pub fn classes_used(claim: &ResourceClaim, a: &Allocated) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, _, _) in &a.devices {
            for r in &claim.ask.requests {
                if let Some(alt) = r.alternatives.iter().find(|alt| &alt.name == name) {
                    out.entry(alt.class.clone()).or_default().insert(r.name.clone());
                }
            }
        }
        out
    }
}

/// The DRA devices each node has free, counted as a resource so the capacity ledger keeps pods
/// off nodes without enough of them before any allocation is tried: every device the node
/// reaches (local to it, selected for it, or reachable from all nodes) of a pool's newest
/// generation, that this scheduler allocates and no claim holds. A pending pod's need is the
/// least number of devices its claims take whatever is chosen (per request the smallest count of
/// its alternatives, 1 for `All`, 0 for admin access), for claims generated for it (a claim
/// shared by pods is allocated once: not counted). A necessary condition only — the allocator
/// decides.
#[derive(Debug, Default)]
pub(crate) struct Capacity {
    /// Per node (indexed like the snapshot's), its free devices; empty when none is counted.
    pub nodes: Vec<i64>,
}

impl Capacity {
    /// Each node's count, from the cycle's device table (`devices`, built once: the newest pool
    /// generations, devices this scheduler allocates, valid pools) less the devices claims hold.
    pub fn of(devices: &Devices<'_>, node_index: &HashMap<&str, usize, impl std::hash::BuildHasher>) -> Self {
        if devices.entries.is_empty() {
            return Capacity::default();
        }
        let mut nodes = vec![0i64; devices.snap.nodes.len()];
        // Devices reachable from every node, and from the nodes a selector selects (counted per
        // distinct selector, its nodes found once).
        let mut everywhere = 0i64;
        let mut by_selector: Vec<(&[NodeSelectorTerm], i64)> = Vec::new();
        // A node's partitions of one counter set: (node, set's first counter) → how many, and
        // per counter how many of them consume it and the least any does.
        let mut sets: FxMap<(usize, u32), SetCount> = HashMap::default();
        for (ix, e) in devices.entries.iter().enumerate() {
            // A partition whose counters the cluster's allocations used up is not free.
            if e.invalid || e.unsupported || devices.allocated[ix] || !devices.counters_room(ix as DeviceIx) {
                continue;
            }
            match e.reach() {
                Some(Reach::Node(node)) => {
                    let Some(&n) = node_index.get(node.as_str()) else { continue };
                    match devices.one_set(e) {
                        Some(set) => {
                            let (count, uses) = sets.entry((n, set)).or_default();
                            *count += 1;
                            for &(c, milli) in e.uses.iter() {
                                let u = uses.entry(c).or_insert((0, i128::MAX));
                                *u = (u.0 + 1, u.1.min(milli));
                            }
                        }
                        None => nodes[n] += 1,
                    }
                }
                Some(Reach::All) => everywhere += 1,
                Some(Reach::Selector(terms)) => {
                    match by_selector.iter_mut().find(|(t, _)| *t == terms.as_slice()) {
                        Some((_, count)) => *count += 1,
                        None => by_selector.push((terms.as_slice(), 1)),
                    }
                }
                None => {}
            }
        }
        // Partitions of one set are allocated together no more than its counters allow: at most
        // what is left of a counter every one of them consumes over the least any consumes.
        for ((n, _), (count, uses)) in sets {
            let bound = uses
                .iter()
                .filter(|(_, (consumers, least))| *consumers == count && *least > 0)
                .map(|(&c, (_, least))| devices.base[c as usize].max(0) / least)
                .min()
                .map_or(count, |b| i64::try_from(b).unwrap_or(i64::MAX).min(count));
            nodes[n] += bound;
        }
        // A node's count is every free device it reaches: a pod needs that many distinct
        // devices there whichever it gets, and pods on one node never share one. (Pods on
        // other nodes taking a shared device do not lower it: looser, never wrong.)
        if everywhere > 0 || !by_selector.is_empty() {
            for (n, node) in devices.snap.nodes.iter().enumerate() {
                nodes[n] += everywhere;
                for (terms, count) in &by_selector {
                    if terms.iter().any(|t| term_matches(t, node)) {
                        nodes[n] += count;
                    }
                }
            }
        }
        Capacity { nodes }
    }

    /// The least number of local devices pending pod `pod` needs (see the type).
    pub fn demand(&self, snap: &Snapshot, pod: &crate::read::model::Pod) -> i64 {
        if self.nodes.is_empty() || pod.resource_claims.is_empty() || !pod.is_pending() {
            return 0;
        }
        let mut need = 0i64;
        for rc in &pod.resource_claims {
            let ClaimName::Generated(name) = &rc.claim else { continue };
            let key = ObjectKey::new(pod.key.namespace.as_str(), name.as_str());
            let Some(claim) = snap.storage.resource_claims.get(&key) else { continue };
            if claim.allocation.is_some() || claim.owner.as_deref() != Some(pod.uid.as_str()) {
                continue;
            }
            for r in &claim.ask.requests {
                let least = r
                    .alternatives
                    .iter()
                    .map(|a| match (a.admin_access, a.count) {
                        (true, _) => 0,
                        (false, Count::All) => 1,
                        (false, Count::Exact(k)) => i64::from(k),
                    })
                    .min()
                    .unwrap_or(0);
                need = need.saturating_add(least);
            }
        }
        need
    }
}

/// What the plan releases (see [`crate::decide::plan::Plan::releases`]): for each pending pod
/// of ours with claims (`pending`) that the plan neither binds, nor allocates or reserves claims
/// for, nor nominates, nor holds room for — nor places while its gang's other claims are bound or
/// allocated first (its claims are what the next cycle binds it with) — each claim reserved for it.
pub(crate) fn releases(snap: &Snapshot, plan: &Plan, pending: &[usize]) -> Vec<ClaimRelease> {
    if pending.is_empty() {
        return Vec::new();
    }
    let placed: HashSet<&PodKey> = (plan.bindings.iter().map(|b| &b.pod))
        .chain(plan.claims.iter().map(|c| &c.pod))
        .chain(plan.volumes.iter().map(|v| &v.pod))
        .chain(plan.nominations.iter().map(|n| &n.pod))
        .chain(plan.reservations.iter().map(|r| &r.pod))
        .collect();
    let waiting: HashSet<&crate::read::model::GangKey> = plan
        .outcomes
        .iter()
        .filter(|o| matches!(o.reason, Reason::WaitingForVolumes | Reason::WaitingForDevices))
        .map(|o| &o.gang)
        .collect();
    let mut out = Vec::new();
    for &p in pending {
        let pod = &snap.pods[p];
        if placed.contains(&pod.key) || pod.gang.as_ref().is_some_and(|m| waiting.contains(&m.gang)) {
            continue;
        }
        for rc in &pod.resource_claims {
            let name = match &rc.claim {
                ClaimName::Named(n) | ClaimName::Generated(n) => n,
                ClaimName::NotCreated | ClaimName::NotNeeded => continue,
            };
            let key = ObjectKey::new(pod.key.namespace.as_str(), name.as_str());
            let Some(claim) = snap.storage.resource_claims.get(&key) else { continue };
            if claim.allocation.is_none() || !claim.reserved_for.iter().any(|u| u == pod.uid) {
                continue;
            }
            out.push(ClaimRelease {
                claim: key,
                pod: pod.key.clone(),
                uid: pod.uid.clone(),
                deallocate: false,
            });
        }
    }
    out.sort();
    out.dedup();
    // A claim is deallocated when every consumer it is reserved for is released by this plan
    // (one pod, or all the pods sharing it).
    let mut i = 0;
    while i < out.len() {
        let j = i + out[i..].iter().take_while(|r| r.claim == out[i].claim).count();
        let released: HashSet<&str> = out[i..j].iter().map(|r| r.uid.as_str()).collect();
        let all = snap
            .storage
            .resource_claims
            .get(&out[i].claim)
            .is_some_and(|c| c.reserved_for.iter().all(|u| released.contains(u.as_str())));
        for r in &mut out[i..j] {
            r.deallocate = all;
        }
        i = j;
    }
    out
}

/// Whether a device is taken by a placement of the cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    Free,
    /// By a placement committed earlier in the cycle.
    Earlier,
    /// By a placement of the step being tried (the gang's members so far).
    Step,
    /// By the pod's own claims allocated before this one.
    Own,
}

/// A choice an allocation does not make again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Avoid {
    /// These devices (sorted).
    Devices(Vec<DeviceIx>),
    /// Devices for these requests or subrequests (the results' names, sorted): among claims
    /// alike, another device for the same subrequests only swaps one member's for another's.
    Names(Vec<String>),
}

/// The shared counters one allocation sees used by the cycle's placements and its own choices.
#[derive(Debug, Default)]
struct Counters {
    /// Counter → billionths used beyond what allocations in the cluster use.
    used: FxMap<u32, i128>,
    /// Pools counted: (pool, whether the step took from it, a counter over-committed).
    pools: Vec<(u32, bool, Option<u32>)>,
    /// A counter that refused a device, for the message.
    short: Option<u32>,
    /// Whether a pool counted has devices the pod's own other claims took.
    own_pool: bool,
}

/// The depth-first search over one claim's requests on one node.
struct Search<'s, 'a> {
    devices: &'s Devices<'a>,
    claim: &'s ResourceClaim,
    options: &'s [Vec<Vec<DeviceIx>>],
    picked: Vec<(String, DeviceIx, bool)>,
    /// Per constraint: the attribute value the devices picked so far share.
    fixed: Vec<Option<&'a AttributeValue>>,
    counters: Counters,
    /// Choices not to end with.
    avoid: &'s [Avoid],
    /// How many complete choices `avoid` turned down.
    avoided: u32,
    budget: u32,
}

impl<'s, 'a> Search<'s, 'a> {
    /// Satisfies requests `r..`; on success `picked` holds the devices.
    fn request(&mut self, r: usize) -> bool {
        let requests = &self.claim.ask.requests;
        if r == requests.len() {
            if self.avoid.is_empty() {
                return true;
            }
            let mut devices: Vec<DeviceIx> = self.picked.iter().filter(|d| !d.2).map(|d| d.1).collect();
            devices.sort_unstable();
            let mut names: Vec<&str> = self.picked.iter().map(|d| d.0.as_str()).collect();
            names.sort_unstable();
            let avoided = self.avoid.iter().any(|a| match a {
                Avoid::Devices(d) => *d == devices,
                Avoid::Names(n) => n.iter().map(String::as_str).eq(names.iter().copied()),
            });
            if avoided {
                self.avoided += 1;
                return false;
            }
            return true;
        }
        for (a, alt) in requests[r].alternatives.iter().enumerate() {
            let free = &self.options[r][a];
            let ok = match alt.count {
                Count::Exact(k) => self.pick(r, a, 0, k as usize),
                Count::All => {
                    if free.is_empty() || free.len() > RESULTS_MAX {
                        false
                    } else {
                        let mark = (self.picked.len(), self.fixed.clone());
                        let all = free.iter().all(|&ix| self.take(r, a, ix));
                        if all && self.request(r + 1) {
                            return true;
                        }
                        self.untake_to(mark.0);
                        self.fixed = mark.1;
                        false
                    }
                }
            };
            if ok {
                return true;
            }
            if self.budget == 0 {
                return false;
            }
        }
        false
    }

    /// Picks `need` more devices for alternative `a` of request `r` from index `from` of its
    /// free ones, then the requests after it.
    fn pick(&mut self, r: usize, a: usize, from: usize, need: usize) -> bool {
        if need == 0 {
            return self.request(r + 1);
        }
        let free = &self.options[r][a];
        for i in from..free.len() {
            if free.len() - i < need || self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let ix = free[i];
            if self.picked.iter().any(|(_, p, admin)| *p == ix && !admin) {
                continue;
            }
            let mark = (self.picked.len(), self.fixed.clone());
            if self.take(r, a, ix) && self.pick(r, a, i + 1, need - 1) {
                return true;
            }
            self.untake_to(mark.0);
            self.fixed = mark.1;
        }
        false
    }

    /// Adds device `ix` for alternative `a` of request `r`, if the constraints allow it.
    fn take(&mut self, r: usize, a: usize, ix: DeviceIx) -> bool {
        let request = &self.claim.ask.requests[r];
        let alt = &request.alternatives[a];
        // A device serves one request of the claim (admin access aside), and an allocation
        // holds at most `RESULTS_MAX` results.
        if (!alt.admin_access && self.picked.iter().any(|(_, p, admin)| *p == ix && !admin))
            || self.picked.len() >= RESULTS_MAX
        {
            return false;
        }
        let entry = &self.devices.entries[ix as usize];
        let device = entry.device;
        // Partitions of one device draw on its counters: what the devices picked so far use
        // counts.
        if !entry.uses.is_empty()
            && let Err(c) = self.devices.counters_allow(ix, &self.counters)
        {
            self.counters.short.get_or_insert(c);
            return false;
        }
        for (c, constraint) in self.claim.ask.constraints.iter().enumerate() {
            let applies = constraint.requests.is_empty()
                || constraint.requests.iter().any(|n| *n == request.name || *n == alt.name);
            if !applies {
                continue;
            }
            let Some(value) = device.attributes.get(&constraint.attribute) else { return false };
            match self.fixed[c] {
                Some(v) if v != value => return false,
                Some(_) => {}
                None => self.fixed[c] = Some(value),
            }
        }
        for &(c, milli) in entry.uses.iter() {
            let used = self.counters.used.entry(c).or_default();
            *used = used.saturating_add(milli);
        }
        self.picked.push((alt.name.clone(), ix, alt.admin_access));
        true
    }

    /// Drops the devices picked after the first `mark`, giving back their counters.
    fn untake_to(&mut self, mark: usize) {
        while self.picked.len() > mark {
            let Some((_, ix, _)) = self.picked.pop() else { break };
            for &(c, milli) in self.devices.entries[ix as usize].uses.iter() {
                let used = self.counters.used.entry(c).or_default();
                *used = used.saturating_sub(milli);
            }
        }
    }
}
