//! Gang resolution: which gangs exist and which gang each claiming pod belongs to, from the gang
//! objects of every dialect and the pods' claims. Pure: objects and claims in, gangs, memberships
//! and problems out; [`super::assembly`] calls it whenever something it reads changed.
//!
//! A gang is defined by its object (of any dialect; two dialects defining one gang is a problem,
//! the lower dialect wins), or — CRD-less — by the annotations of the oldest pod that claims it;
//! upstream PodGroups resolve to the root of their CompositePodGroup tree. A pod belongs to the
//! gang of its first claim whose gang exists, else of its first claim (and waits for it). An
//! upstream claim (`spec.schedulingGroup`) beside a claim of another dialect decides nothing: a
//! plain basic PodGroup is no gang (Kubernetes 1.38's Job controller names one on every Job's
//! pods, opted-in Jobs too), and a gang one is reported as a second claim the other overrides.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::{GangAt, Held, Problem, describe};
use crate::read::dialect::{self, Claim, GangObject};
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, Membership, Pod};

/// A pod that claims a gang: its position in the snapshot, its raw object as held (decoded only
/// where resolution reads it), its converted form and its claims. Claimants come in pod-key order.
#[derive(Debug)]
pub(super) struct Claimant<'a, H> {
    pub at: usize,
    pub raw: &'a H,
    pub pod: &'a Pod,
    pub claims: &'a [Claim],
}

/// What resolution found.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    /// Every gang, in key order.
    pub gangs: Vec<Gang>,
    /// Each claimant's gang, by position in the snapshot.
    pub memberships: Vec<(usize, Option<Membership>)>,
    /// Problems of the gang objects.
    pub object_problems: Vec<Problem>,
    /// Problems of the claiming pods.
    pub claim_problems: Vec<Problem>,
}

/// Resolves gangs and memberships from the gang objects (where each is filed, and what it read as)
/// and the claiming pods.
pub(super) fn resolve<'a, H: Held>(
    objects: impl Iterator<Item = (&'a GangAt, &'a Result<GangObject, Vec<FieldError>>)>,
    claimed: &[Claimant<'_, H>],
) -> Resolved {
    // Gang objects of every dialect.
    // Hashed, not ordered: every claiming pod looks its gang up here (sorted once at the end).
    let mut defined: HashMap<GangKey, Gang> = HashMap::new();
    let mut upstream_groups = Vec::new();
    let mut workloads: HashMap<GangKey, dialect::upstream::Workload> = HashMap::new();
    let mut object_problems = Vec::new();
    let define = |defined: &mut HashMap<GangKey, Gang>,
                  gang: Gang,
                  obj: Option<&GangAt>,
                  problems: &mut Vec<Problem>| {
        if let Some(existing) = defined.get(&gang.key) {
            let (keep, drop) = if existing.source.dialect <= gang.source.dialect {
                (existing.source.clone(), gang.source.clone())
            } else {
                (gang.source.clone(), existing.source.clone())
            };
            problems.push(Problem {
                object: obj.map_or_else(|| describe(&Value::Null), GangAt::describe),
                errors: vec![FieldError::new(
                    "metadata.name",
                    format!(
                        "gang {} is defined by both a {} {} and a {} {}; using the {}",
                        gang.key, keep.dialect, keep.kind, drop.dialect, drop.kind, keep.dialect
                    ),
                )],
            });
            if existing.source.dialect <= gang.source.dialect {
                return;
            }
        }
        defined.insert(gang.key.clone(), gang);
    };
    for (obj, read) in objects {
        match read {
            Ok(GangObject::Gang(g)) => define(&mut defined, g.clone(), Some(obj), &mut object_problems),
            Ok(GangObject::UpstreamGroup(g)) => upstream_groups.push(g.clone()),
            Ok(GangObject::Workload(w)) => {
                workloads.insert(w.key.clone(), w.clone());
            }
            Err(e) => object_problems.push(Problem { object: obj.describe(), errors: e.clone() }),
        }
    }
    let dialect::upstream::Assembled {
        gangs: upstream_gangs,
        resolution,
        problems: upstream_problems,
        mut basic,
    } = dialect::upstream::assemble(&upstream_groups);
    for (key, e) in upstream_problems {
        object_problems.push(Problem { object: format!("PodGroup {key}"), errors: vec![e] });
    }
    for g in upstream_gangs {
        define(&mut defined, g, None, &mut object_problems);
    }

    let claims_of = |j: usize| claimed[j].claims;
    let mut problems = Vec::new();

    // CRD-less gangs: built from the oldest pod that claims them, when no object defines them.
    let mut order: Vec<usize> = (0..claimed.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (claimed[a].pod, claimed[b].pod);
        (pa.created, &pa.key).cmp(&(pb.created, &pb.key))
    });
    let mut annotation_source: HashMap<GangKey, usize> = HashMap::new();
    for &j in &order {
        // Decoded (if held compact) only when read, once.
        let mut raw: Option<Cow<'_, Value>> = None;
        for c in claims_of(j) {
            if defined.contains_key(&c.gang) || annotation_source.contains_key(&c.gang) {
                continue;
            }
            // Only a 1.35 `workloadRef` is read from the pod among upstream claims (a PodGroup
            // claim defines no gang of its own): no decoding for the rest (a 1.38 Job's pods).
            if c.dialect == Dialect::Upstream && c.path != dialect::upstream::WORKLOAD_REF_PATH {
                continue;
            }
            // A claim naming the pod's own upstream group, a leaf of a tree, is that claim (the
            // pod joins the tree): no gang of the leaf's name from the pod's annotations.
            if claims_of(j).iter().any(|u| u.dialect == Dialect::Upstream && u.gang == c.gang)
                && resolution.get(&c.gang).is_some_and(|(root, _)| *root != c.gang)
            {
                continue;
            }
            let pod: &Value = raw.get_or_insert_with(|| claimed[j].raw.value());
            if c.path == dialect::upstream::WORKLOAD_REF_PATH {
                // 1.35: the gang is one pod group (and replica key) of the named Workload.
                if let Some((w, _, _)) = dialect::upstream::workload_ref(pod)
                    && let Some(workload) = workloads.get(&GangKey::new(&c.gang.namespace, w))
                {
                    if let Some(g) = dialect::upstream::workload_gang(workload, pod) {
                        defined.insert(g.key.clone(), g);
                    } else if dialect::upstream::workload_group_is_plain_basic(workload, pod) {
                        basic.insert(c.gang.clone());
                    }
                }
                continue;
            }
            match dialect::annotation_gang(c, pod) {
                Some(Ok(g)) if g.min_member > 0 => {
                    annotation_source.insert(c.gang.clone(), j);
                    defined.insert(g.key.clone(), g);
                }
                Some(Err(e)) => problems.push(Problem { object: describe(pod), errors: e }),
                _ => {}
            }
        }
    }
    // Pods whose annotations disagree with the gang's source pod are reported, not guessed at.
    // Each source pod's annotations are read once.
    let mut source_annotations: HashMap<usize, Option<Cow<'_, Value>>> = HashMap::new();
    for &j in &order {
        let mut raw: Option<Cow<'_, Value>> = None;
        for c in claims_of(j) {
            let Some(&src) = annotation_source.get(&c.gang) else { continue };
            if src == j {
                continue;
            }
            // KAI's preemptibility label, read from a gang of annotations' source pod: another
            // value on a member is said (an empty one is none).
            let kai = crate::read::labels::KAI_PREEMPTIBILITY;
            let label = |at: usize| claimed[at].pod.labels.get(kai).filter(|v| !v.is_empty());
            let (mine, source) = (label(j), label(src));
            if mine != source
                && c.dialect == Dialect::KubeGangAnnotations
                && defined.contains_key(&c.gang)
                && problems.last().is_none_or(|p: &Problem| p.object != describe(&claimed[j].raw.value()))
            {
                problems.push(Problem {
                    object: describe(&claimed[j].raw.value()),
                    errors: vec![FieldError::new(
                        format!("metadata.labels[{kai}]"),
                        format!(
                            "gang {} preemptibility {:?} disagrees with {:?} on pod {}; using {:?}",
                            c.gang,
                            mine.unwrap_or(""),
                            source.unwrap_or(""),
                            claimed[src].pod.key,
                            source.unwrap_or("")
                        ),
                    )],
                });
            }
            // Borrowed from a decoded pod; copied out of a compact one, the rest of it dropped.
            let theirs = source_annotations.entry(src).or_insert_with(|| match claimed[src].raw.value() {
                Cow::Borrowed(v) => v.pointer("/metadata/annotations").map(Cow::Borrowed),
                Cow::Owned(v) => v.pointer("/metadata/annotations").cloned().map(Cow::Owned),
            });
            let pod: &Value = raw.get_or_insert_with(|| claimed[j].raw.value());
            // Pods stamped from one template carry the same annotations: nothing to compare.
            if pod.pointer("/metadata/annotations") == theirs.as_deref() {
                continue;
            }
            if let (Some(Ok(mine)), Some(gang)) = (dialect::annotation_gang(c, pod), defined.get(&c.gang))
                && mine.min_member > 0
                && mine.min_member != gang.min_member
            {
                problems.push(Problem {
                    object: describe(pod),
                    errors: vec![FieldError::new(
                        "metadata.annotations",
                        format!(
                            "gang {} minimum {} disagrees with {} on pod {}; using {}",
                            c.gang, mine.min_member, gang.min_member, claimed[src].pod.key, gang.min_member
                        ),
                    )],
                });
            }
        }
    }

    // Each claiming pod's gang: the claim whose gang exists, else its first.
    // Gangs named but not defined: the problem that says so (on the first pod naming it), and how
    // many pods name it.
    let mut missing: BTreeMap<GangKey, (usize, u32)> = BTreeMap::new();
    let mut memberships = Vec::with_capacity(claimed.len());
    for (j, c) in claimed.iter().enumerate() {
        let i = c.at;
        // A plain basic PodGroup is no gang: a claim on it is none. An upstream claim beside
        // others counts only as a conflict (see `dialect::pod_claims`): the others decide.
        let all = claims_of(j);
        let has_other = all.iter().any(|c| c.dialect != Dialect::Upstream);
        let upstream =
            all.iter().find(|c| c.dialect == Dialect::Upstream).filter(|c| !basic.contains(&c.gang));
        // A claim naming the upstream claim's own group (the same gang in two dialects) resolves
        // as the upstream one does: to the root of its tree.
        let membership = |c: &Claim| match resolution.get(&c.gang) {
            // (A gang another object defines under the same name keeps its claim: a conflict.)
            Some((root, leaf))
                if c.dialect == Dialect::Upstream
                    || (upstream.is_some_and(|u| u.gang == c.gang) && !defined.contains_key(&c.gang)) =>
            {
                Membership { gang: root.clone(), subgroup: leaf.clone() }
            }
            _ => Membership { gang: c.gang.clone(), subgroup: c.subgroup.clone() },
        };
        let deciding = || {
            all.iter()
                .filter(move |c| if has_other { c.dialect != Dialect::Upstream } else { upstream.is_some() })
        };
        let chosen = deciding()
            .map(membership)
            .find(|m| defined.contains_key(&m.gang))
            .or_else(|| deciding().next().map(membership));
        if has_other && let (Some(up), Some(m)) = (upstream, &chosen) {
            let theirs = membership(up);
            if theirs.gang != m.gang && defined.contains_key(&theirs.gang) {
                let mine = deciding().find(|c| membership(c).gang == m.gang).unwrap_or(&all[0]);
                problems.push(Problem {
                    object: describe(&c.raw.value()),
                    errors: vec![FieldError::new(
                        up.path.clone(),
                        format!(
                            "pod is claimed by two gangs: {} {} ({}) and upstream {}, a group that defines a gang (not a plain basic PodGroup); it belongs to {} {}, and {} does not count it",
                            mine.dialect, m.gang, mine.path, up.gang, mine.dialect, m.gang, theirs.gang
                        ),
                    )],
                });
            }
        }
        if let Some(m) = &chosen
            && !defined.contains_key(&m.gang)
        {
            match missing.get_mut(&m.gang) {
                Some((_, n)) => *n = n.saturating_add(1),
                None => {
                    missing.insert(m.gang.clone(), (problems.len(), 1));
                    problems.push(Problem {
                        object: describe(&c.raw.value()),
                        errors: vec![FieldError::new(
                            deciding().next().map(|c| c.path.clone()).unwrap_or_default(),
                            String::new(),
                        )],
                    });
                }
            }
        }
        memberships.push((i, chosen));
    }
    for (gang, (at, n)) in missing {
        let waits = if n == 1 {
            "1 pod names it and waits until it is created".to_string()
        } else {
            format!("{n} pods name it and wait until it is created")
        };
        if let Some(e) = problems.get_mut(at).and_then(|p| p.errors.first_mut()) {
            e.message = format!("gang {gang} does not exist (yet): {waits}");
        }
    }
    partition(&mut defined, &mut memberships, claimed);
    let mut gangs: Vec<Gang> = defined.into_values().collect();
    gangs.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    Resolved { gangs, memberships, object_problems, claim_problems: problems }
}

/// Volcano's `subGroupPolicy` ([`crate::read::model::Partitioning`]): each member of a gang with
/// policies is put in the group its labels give it under the first policy that takes it (a
/// task's policy takes only that task's pods), and the groups found become the gang's leaf
/// subgroups, sorted, under the policy's inner subgroup — the task's subgroup (its minimum now a
/// pod floor, its `minSubGroups` counting ready groups) or one of its own. When fewer groups have
/// pods than `minSubGroups` asks, placeholders without pods stand for the rest (the gang waits
/// for them, as Volcano's job does). Pods no policy groups need no group: those of a gang without
/// task subgroups, and those of no task a gang of tasks knows, are in
/// [`crate::read::model::UNGROUPED`] (the gang's `minMember` its pod floor; the root needs every
/// top-level subgroup), those of a partitioned task in a subgroup of their own under the task
/// (counted toward its floor, as Volcano counts a task's pods whatever their subJob; the task
/// then needs one more child, that one, always satisfied). Generated names never take a name
/// already used: a clash gets a numbered name.
///
/// Cost: for each member of such a gang, each policy's selector and keys once (at most
/// [`crate::read::dialect::volcano::MAX_POLICIES`] policies); nothing for other gangs. Groups
/// beyond what a gang's tree may hold make the gang invalid, named as such; placeholders are
/// bounded by `minSubGroups`, itself bounded at read.
fn partition<H>(
    defined: &mut HashMap<GangKey, Gang>,
    memberships: &mut [(usize, Option<Membership>)],
    claimed: &[Claimant<'_, H>],
) {
    use std::collections::{BTreeSet, HashSet};

    use crate::read::model::{SubGroup, UNGROUPED, dns_name};
    /// Where a member goes: a policy's group of label values, or no group (under a policy's
    /// task, or the gang's).
    enum Spot {
        Group(usize, Vec<String>),
        Ungrouped(Option<usize>),
    }
    #[derive(Default)]
    struct Found {
        groups: Vec<BTreeSet<Vec<String>>>,
        ungrouped: BTreeSet<Option<usize>>,
    }
    // Gangs with policies, and Volcano gangs of tasks (whose pods of no known task need a place).
    let handled = |g: &Gang| {
        !g.partitions().is_empty() || (g.source.dialect == Dialect::Volcano && !g.subgroups.is_empty())
    };
    if !defined.values().any(handled) {
        return;
    }
    let mut spots: Vec<(usize, Spot)> = Vec::new();
    let mut found: HashMap<GangKey, Found> = HashMap::new();
    for (j, (_, m)) in memberships.iter().enumerate() {
        let Some(m) = m else { continue };
        let Some(gang) = defined.get(&m.gang).filter(|g| handled(g)) else { continue };
        let labels = &claimed[j].pod.labels;
        let policies = gang.partitions();
        let taken = policies.iter().enumerate().find_map(|(i, p)| {
            if p.task.as_ref().is_some_and(|t| m.subgroup.as_deref() != Some(t.as_str())) {
                return None;
            }
            p.values(labels).map(|v| (i, v.into_iter().map(str::to_string).collect::<Vec<_>>()))
        });
        let spot = match taken {
            Some((i, values)) => Spot::Group(i, values),
            None if gang.subgroups.is_empty() => Spot::Ungrouped(None),
            None => match policies.iter().position(|p| p.task.is_some() && p.task == m.subgroup) {
                Some(i) => Spot::Ungrouped(Some(i)),
                // A task no policy partitions keeps its subgroup; a pod of no task the gang
                // knows counts toward its total only (Volcano's job readiness counts every pod).
                None if m.subgroup.as_deref().is_some_and(|t| gang.subgroups.iter().any(|s| s.name == t)) => {
                    continue;
                }
                None => Spot::Ungrouped(None),
            },
        };
        let f = match found.get_mut(&m.gang) {
            Some(f) => f,
            None => found.entry(m.gang.clone()).or_default(),
        };
        if f.groups.is_empty() {
            f.groups = vec![BTreeSet::new(); policies.len()];
        }
        match &spot {
            Spot::Group(i, values) => {
                if !f.groups[*i].contains(values) {
                    f.groups[*i].insert(values.clone());
                }
            }
            Spot::Ungrouped(at) => {
                f.ungrouped.insert(*at);
            }
        }
        spots.push((j, spot));
    }
    // Per gang: each group's subgroup name, and each ungrouped spot's.
    /// A gang's names: each group's (by policy and values), each ungrouped spot's.
    type Names = (HashMap<(usize, Vec<String>), String>, HashMap<Option<usize>, String>);
    let mut names: HashMap<GangKey, Names> = HashMap::new();
    for gang in defined.values_mut().filter(|g| handled(g)) {
        let Found { groups, ungrouped } = found.remove(&gang.key).unwrap_or_default();
        let flat = gang.subgroups.is_empty();
        // Out while the task subgroups change, back when done.
        let partitioning = gang.partitioning.take();
        let policies = partitioning.as_deref().map_or(&[][..], Vec::as_slice);
        let mut taken: HashSet<String> = gang.subgroups.iter().map(|s| s.name.clone()).collect();
        taken.extend(policies.iter().map(|p| p.node()));
        let mut unique = |base: String| -> String {
            let mut name = base.clone();
            let mut k = 2u32;
            while taken.contains(&name) {
                name = dns_name(&[&base, &k.to_string()]);
                k += 1;
            }
            taken.insert(name.clone());
            name
        };
        let mut made = Vec::new();
        let mut group_names = HashMap::new();
        for (i, p) in policies.iter().enumerate() {
            let node = p.node();
            let mut floor = 0;
            // The task's pods no group takes, under it: they count toward its floor, and the
            // subgroup they make, always satisfied (it needs none), is one more child to need.
            let loose = ungrouped.contains(&Some(i));
            match gang.subgroups.iter_mut().find(|s| p.task.as_deref() == Some(s.name.as_str())) {
                // The task's minimum (its pods) is now a floor on its groups' pods.
                Some(task) => {
                    task.pod_floor = task.min_member;
                    task.min_member = p.min.saturating_add(u32::from(loose));
                    floor = task.pod_floor;
                }
                None => made.push(SubGroup {
                    name: node.clone(),
                    parent: None,
                    min_member: p.min,
                    pod_floor: 0,
                    topology_key: None,
                    topology_preferred: None,
                }),
            }
            let these = groups.get(i).cloned().unwrap_or_default();
            // A task's floor with no group yet is not met by nothing: one placeholder at least.
            let missing = (p.min as usize)
                .saturating_sub(these.len())
                .max(usize::from(these.is_empty() && floor > 0 && !loose))
                .min(crate::read::tree::MAX_SUBGROUPS + 1);
            let mut leaves = Vec::with_capacity(these.len() + missing);
            for values in these {
                let refs: Vec<&str> = values.iter().map(String::as_str).collect();
                let name = unique(p.leaf(&refs));
                group_names.insert((i, values), name.clone());
                leaves.push(name);
            }
            leaves.extend((1..=missing).map(|k| unique(p.missing(k))));
            for name in leaves {
                made.push(SubGroup {
                    name,
                    parent: Some(node.clone()),
                    min_member: p.size,
                    pod_floor: 0,
                    topology_key: p.topology_key.clone(),
                    topology_preferred: p.topology_preferred.clone(),
                });
            }
        }
        let mut ungrouped_names = HashMap::new();
        for at in ungrouped {
            let (base, parent) = match at {
                None => (UNGROUPED.to_string(), None),
                Some(i) => (dns_name(&[&policies[i].node(), UNGROUPED]), Some(policies[i].node())),
            };
            let name = unique(base);
            made.push(SubGroup {
                name: name.clone(),
                parent,
                min_member: 0,
                pod_floor: 0,
                topology_key: None,
                topology_preferred: None,
            });
            ungrouped_names.insert(at, name);
        }
        if flat {
            // The root's minimum counted pods; now it needs every top-level subgroup, and the
            // pods stay its floor.
            gang.pod_floor = gang.pod_floor.max(gang.min_member);
        }
        gang.subgroups.extend(made);
        gang.min_member =
            u32::try_from(gang.subgroups.iter().filter(|s| s.parent.is_none()).count()).unwrap_or(u32::MAX);
        gang.partitioning = partitioning;
        names.insert(gang.key.clone(), (group_names, ungrouped_names));
    }
    for (j, spot) in spots {
        let Some(m) = memberships[j].1.as_mut() else { continue };
        let Some((groups, ungrouped)) = names.get(&m.gang) else { continue };
        let name = match spot {
            Spot::Group(i, values) => groups.get(&(i, values)),
            Spot::Ungrouped(at) => ungrouped.get(&at),
        };
        if let Some(name) = name {
            m.subgroup = Some(name.clone());
        }
    }
}
