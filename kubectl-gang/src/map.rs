//! `--map`: a gang drawn on the cluster's topology levels, as people read a rack diagram —
//! domains as rows (broader levels as headings), a node as one cell, the gang's members marked.
//!
//! Only the broadest level's domains the gang touches are drawn (a 15,000-node cluster would
//! fill a screen otherwise); the others are counted on one line. The same ASCII text on a
//! terminal and piped; on a terminal, coloured (members green, victims red, unusable nodes yellow).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use scheduler_core::config::Config;

use crate::text::{COLOURS, escape_controls};
use scheduler_core::model::volume::Storage;
use scheduler_core::model::{Gang, Node};

/// Cells per line before a row wraps, in groups of [`GROUP`].
const WIDTH: usize = 50;
const GROUP: usize = 10;

/// What the map marks on one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// Members of the gang there (placed, bound or pinned).
    pub members: u32,
    /// Pods the gang would preempt there.
    pub victims: u32,
}

/// The levels a gang's map is drawn by, broadest first: the level order the cycle relaxes it
/// through (the KAI Topology it names, the policy file's `topologyLevels`, a Kueue or KAI
/// Topology that has its level: `Storage::level_order`), else the policy's levels, from the
/// gang's required level down (all of them when it has none); else its required and preferred
/// levels. Empty: nothing to draw by.
pub fn levels(gang: &Gang, config: &Config, storage: &Storage) -> Vec<String> {
    let required = gang.topology_key.as_deref();
    let preferred = gang.topology_preferred.as_deref();
    // The order the cycle relaxes the gang through (its KAI Topology, the policy's, a Kueue
    // Topology's), else the policy's levels as they are.
    let order = match preferred.or(required).map(|k| storage.level_order(gang, &config.topology_levels, k)) {
        Some(o) if !o.is_empty() => o,
        _ => &config.topology_levels[..],
    };
    if !order.is_empty() {
        let from = required.and_then(|r| order.iter().position(|l| l == r)).unwrap_or(0);
        let mut out: Vec<String> = order[from..].to_vec();
        // A required level the policy does not list still bounds the gang: drawn first.
        if let Some(r) = required.filter(|r| !out.iter().any(|l| l == r)) {
            out.insert(0, r.to_string());
        }
        return out;
    }
    let mut out: Vec<String> = Vec::new();
    for l in [required, preferred].into_iter().flatten() {
        if !out.iter().any(|x| x == l) {
            out.push(l.to_string());
        }
    }
    out
}

/// The cluster's nodes laid out by `levels` (broadest first), once for every gang drawn by them:
/// grouped by their broadest domain, each group sorted by domain path then name.
#[derive(Debug)]
pub struct Layout<'n> {
    levels: Vec<String>,
    /// Broadest domain ("" for nodes without its label) → (path, node), sorted.
    domains: BTreeMap<&'n str, Vec<(Vec<&'n str>, &'n Node)>>,
    /// Node name → its broadest domain.
    top: HashMap<&'n str, &'n str>,
}

impl<'n> Layout<'n> {
    pub fn new(nodes: &[&'n Node], levels: &[String]) -> Self {
        let mut domains: BTreeMap<&str, Vec<(Vec<&str>, &Node)>> = BTreeMap::new();
        let mut top = HashMap::with_capacity(nodes.len());
        if !levels.is_empty() {
            for n in nodes {
                let path: Vec<&str> =
                    levels.iter().map(|l| n.labels.get(l).map_or("", String::as_str)).collect();
                top.insert(n.name.as_str(), path[0]);
                domains.entry(path[0]).or_default().push((path, *n));
            }
            for group in domains.values_mut() {
                group.sort_by(|a, b| {
                    let paths = a.0.iter().zip(&b.0).map(|(x, y)| natural(x, y)).find(|o| o.is_ne());
                    paths.unwrap_or(Ordering::Equal).then_with(|| natural(&a.1.name, &b.1.name))
                });
            }
        }
        Layout { levels: levels.to_vec(), domains, top }
    }

    /// The map of `marks`, under a legend line; every line indented by `indent` spaces. Costs
    /// the nodes of the domains the marks touch, not the cluster.
    pub fn draw(&self, marks: &HashMap<&str, Marks>, colour: bool, indent: usize) -> String {
        let levels = &self.levels;
        let pad = " ".repeat(indent);
        let mut out = String::new();
        if levels.is_empty() {
            let _ = writeln!(
                out,
                "{pad}map: the gang asks for no topology level; the policy file's topologyLevels (--config) give one to draw by"
            );
            return out;
        }
        let _ = writeln!(
            out,
            "{pad}map by {}: a cell is a node — a digit the gang's members on it, ! a pod it preempts, x not Ready or cordoned, . any other",
            escape_controls(&levels.join(" > "))
        );
        // The broadest domains the gang touches.
        let touched: std::collections::BTreeSet<&str> = marks
            .iter()
            .filter(|(_, m)| m.members + m.victims > 0)
            .filter_map(|(n, _)| self.top.get(n).copied())
            .collect();
        let name = |level: usize, v: &str| {
            if v.is_empty() {
                format!("(no {})", escape_controls(&levels[level]))
            } else {
                escape_controls(v).into_owned()
            }
        };
        let deepest = levels.len() - 1;
        let mut rows: Vec<(&[&str], Vec<&Node>)> = Vec::new();
        for d in &touched {
            for (p, n) in self.domains.get(d).map_or(&[][..], Vec::as_slice) {
                match rows.last_mut() {
                    Some((last, row)) if *last == p.as_slice() => row.push(n),
                    _ => rows.push((p, vec![n])),
                }
            }
        }
        let width = rows
            .iter()
            .map(|(p, _)| 2 * deepest + name(deepest, p[deepest]).chars().count())
            .max()
            .unwrap_or(0);
        let mut heading: Vec<&str> = Vec::new();
        for (p, row) in &rows {
            // Headings for the broader levels where they change.
            for (level, v) in p.iter().enumerate().take(deepest) {
                if heading.get(level) != Some(v) {
                    heading.truncate(level);
                    heading.push(v);
                    let _ = writeln!(out, "{pad}{}{}", "  ".repeat(level), name(level, v));
                }
            }
            heading.truncate(deepest);
            let label = format!("{}{}", "  ".repeat(deepest), name(deepest, p[deepest]));
            let cells: Vec<String> =
                row.iter().map(|n| cell(n, marks.get(n.name.as_str()), colour)).collect();
            for (i, line) in cells.chunks(WIDTH).enumerate() {
                let groups: Vec<String> = line.chunks(GROUP).map(|g| g.concat()).collect();
                let label = if i == 0 { label.as_str() } else { "" };
                let _ = writeln!(out, "{pad}{label:<width$}  {}", groups.join(" "));
            }
        }
        let untouched = self.domains.iter().filter(|(d, _)| !d.is_empty() && !touched.contains(*d));
        let (domains, count) = untouched.fold((0, 0), |(d, c), (_, nodes)| (d + 1, c + nodes.len()));
        if domains > 0 {
            let _ = writeln!(
                out,
                "{pad}… and {domains} other {} domain(s) without the gang's pods ({count} node(s))",
                escape_controls(&levels[0])
            );
        }
        let unlabelled = self.domains.get("").filter(|_| !touched.contains("")).map_or(0, Vec::len);
        if unlabelled > 0 {
            let _ = writeln!(
                out,
                "{pad}… and {unlabelled} node(s) without a {} label, none with the gang's pods",
                escape_controls(&levels[0])
            );
        }
        out
    }
}

/// `a` against `b` as people number racks: runs of digits by their value (`r2` before `r10`),
/// the rest by character.
fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let run = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (i, j) = (run(a), run(b));
                // Leading zeros aside, a longer run is a larger number; equal lengths compare as text.
                let trim = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (x, y) = (&a[trim(&a[..i]).min(i)..i], &b[trim(&b[..j]).min(j)..j]);
                let o = x.len().cmp(&y.len()).then_with(|| x.cmp(y)).then_with(|| i.cmp(&j));
                if o.is_ne() {
                    return o;
                }
                (a, b) = (&a[i..], &b[j..]);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                (a, b) = (&a[1..], &b[1..]);
            }
        }
    }
}

/// `nodes` with their Volcano HyperNode tiers as labels (`volcano.sh/hypernode-tier-<t>`, each
/// tier the cluster has) and their Koordinator network layers (`koordinator.sh/network-layer-<l>`,
/// each layer of its ClusterNetworkTopology), so a map draws those levels as it draws a label's.
pub fn with_tiers(mut nodes: Vec<Node>, storage: &scheduler_core::model::volume::Storage) -> Vec<Node> {
    let layers = &storage.network_layers;
    let names = layers.layers().iter().map(|l| l.name.as_str());
    for l in std::iter::once(scheduler_core::network_layer::CLUSTER_LAYER)
        .chain(names)
        .filter(|_| !layers.is_empty())
    {
        let domains = scheduler_core::network_layer::domains(&nodes, layers, l);
        for (n, d) in nodes.iter_mut().zip(domains) {
            if let Some(d) = d {
                n.labels.insert(scheduler_core::network_layer::key_of(l), d);
            }
        }
    }
    let hypernodes = &storage.hypernodes;
    let tiers: std::collections::BTreeSet<u32> = hypernodes.values().map(|h| h.tier).collect();
    for t in tiers {
        let domains = scheduler_core::hypernode::domains(&nodes, hypernodes, t);
        for (n, d) in nodes.iter_mut().zip(domains) {
            if let Some(d) = d {
                n.labels.insert(scheduler_core::hypernode::key_of(t), d);
            }
        }
    }
    nodes
}

/// [`Layout::draw`] for one gang.
pub fn draw(
    nodes: &[&Node],
    levels: &[String],
    marks: &HashMap<&str, Marks>,
    colour: bool,
    indent: usize,
) -> String {
    Layout::new(nodes, levels).draw(marks, colour, indent)
}

/// One node's cell, in the plugin's own colours ([`COLOURS`]) when `colour`.
fn cell(n: &Node, marks: Option<&Marks>, colour: bool) -> String {
    let [green, yellow, red, reset] = COLOURS;
    let m = marks.copied().unwrap_or_default();
    let (glyph, tone) = if m.members > 0 {
        (char::from_digit(m.members, 10).unwrap_or('+'), Some(green))
    } else if m.victims > 0 {
        ('!', Some(red))
    } else if !n.ready || n.unschedulable {
        ('x', Some(yellow))
    } else {
        ('.', None)
    };
    match tone {
        Some(t) if colour => format!("{t}{glyph}{reset}"),
        _ => glyph.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::resources::Resources;

    fn node(name: &str, zone: &str, rack: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::new(),
            labels: [("zone".to_string(), zone.to_string()), ("rack".to_string(), rack.to_string())]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .collect(),
            taints: vec![],
            unschedulable: false,
            ready: true,
        }
    }

    #[test]
    fn domains_the_gang_touches_are_rows_under_their_broader_levels_and_the_rest_are_counted() {
        let mut nodes: Vec<Node> = vec![
            node("a1", "z1", "r1"),
            node("a2", "z1", "r1"),
            node("b1", "z1", "r2"),
            node("c1", "z2", "r3"),
            node("c2", "z2", "r3"),
            node("d1", "z1", ""),
            node("e1", "", ""),
        ];
        nodes[2].unschedulable = true;
        let refs: Vec<&Node> = nodes.iter().collect();
        let marks: HashMap<&str, Marks> =
            [("a1", Marks { members: 2, victims: 0 }), ("a2", Marks { members: 0, victims: 1 })].into();
        let levels = vec!["zone".to_string(), "rack".to_string()];
        let map = draw(&refs, &levels, &marks, false, 2);
        let want = "  map by zone > rack: a cell is a node — a digit the gang's members on it, ! a pod it preempts, x not Ready or cordoned, . any other
  z1
    (no rack)  .
    r1         2!
    r2         x
  … and 1 other zone domain(s) without the gang's pods (2 node(s))
  … and 1 node(s) without a zone label, none with the gang's pods
";
        assert_eq!(map, want);
    }

    #[test]
    fn long_rows_wrap_in_groups_and_ten_members_on_a_node_are_a_plus() {
        let nodes: Vec<Node> = (0..55).map(|i| node(&format!("n{i:02}"), "z", "r")).collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        let marks: HashMap<&str, Marks> =
            [("n00", Marks { members: 10, victims: 0 }), ("n54", Marks { members: 3, victims: 0 })].into();
        let map = draw(&refs, &["rack".to_string()], &marks, false, 0);
        let lines: Vec<&str> = map.lines().collect();
        assert_eq!(lines[1], format!("r  +{} {}", ".".repeat(9), vec![".".repeat(10); 4].join(" ")));
        assert_eq!(lines[2], "   ....3");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn domains_and_nodes_are_in_the_order_people_number_them() {
        let mut names = vec!["r10", "r2", "r02", "r1", "rack", "r", "r2a", "", "9", "10"];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(names, ["", "9", "10", "r", "r1", "r2", "r2a", "r02", "r10", "rack"]);
        let nodes: Vec<Node> =
            (0..12).map(|i| node(&format!("n{i}"), "z", &format!("r{}", i % 11))).collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        let marks: HashMap<&str, Marks> = [("n11", Marks { members: 1, victims: 0 })].into();
        let map = draw(&refs, &["zone".to_string(), "rack".to_string()], &marks, false, 0);
        let rows: Vec<&str> = map.lines().skip(2).map(|l| l.split_whitespace().next().unwrap()).collect();
        assert_eq!(rows, ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10"]);
        assert!(map.contains("r0   .1\n"), "n0 then n11 in rack r0: {map}");
    }

    #[test]
    fn colour_marks_members_and_victims_and_no_level_says_how_to_get_one() {
        let nodes = [node("a1", "z1", "r1")];
        let refs: Vec<&Node> = nodes.iter().collect();
        let marks: HashMap<&str, Marks> = [("a1", Marks { members: 1, victims: 0 })].into();
        let map = draw(&refs, &["rack".to_string()], &marks, true, 0);
        assert!(map.contains(&format!("{}1{}", COLOURS[0], COLOURS[3])), "{map:?}");
        assert!(draw(&refs, &[], &marks, false, 0).contains("topologyLevels"));
    }

    #[test]
    fn levels_come_from_the_policy_from_the_required_level_down_else_from_the_gang() {
        let source = scheduler_core::model::Source {
            dialect: scheduler_core::model::Dialect::KubeGang,
            kind: "Gang".into(),
        };
        let mut gang = Gang::new(scheduler_core::model::GangKey::new("ml", "g"), 2, source);
        gang.topology_key = Some("block".into());
        gang.topology_preferred = Some("rack".into());
        let mut config = Config::default();
        assert_eq!(levels(&gang, &config, &Storage::default()), ["block", "rack"]);
        config.topology_levels = vec!["zone".into(), "block".into(), "rack".into(), "host".into()];
        assert_eq!(levels(&gang, &config, &Storage::default()), ["block", "rack", "host"]);
        gang.topology_key = Some("pod".into());
        assert_eq!(levels(&gang, &config, &Storage::default()), ["pod", "zone", "block", "rack", "host"]);
        gang.topology_key = None;
        assert_eq!(levels(&gang, &config, &Storage::default()), ["zone", "block", "rack", "host"]);
        // A Topology object orders the levels the policy does not list; the KAI Topology a gang
        // names orders them over the policy's.
        let mut storage = Storage::default();
        storage
            .kueue_topologies
            .insert("default".into(), vec!["superpod".into(), "nvl".into(), "host".into()]);
        gang.topology_key = Some("superpod".into());
        gang.topology_preferred = Some("nvl".into());
        assert_eq!(levels(&gang, &config, &storage), ["superpod", "nvl", "host"]);
        storage.kai_topologies.insert("t".into(), vec!["zone".into(), "rack".into()]);
        gang.topology_object = Some("t".into());
        gang.topology_key = None;
        gang.topology_preferred = Some("rack".into());
        assert_eq!(levels(&gang, &config, &storage), ["zone", "rack"]);
    }
}
