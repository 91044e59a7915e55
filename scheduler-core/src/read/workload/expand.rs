//! Expansion: the pods a workload's controllers would create (and a Volcano Job's PodGroup, a
//! StatefulSet's claims), as `kubectl gang simulate` adds them to a cluster.

use super::*;

/// What the JobSet and Job controllers write on the `i`-th pod of `role`: its child Job
/// (`<jobset>-<replicatedJob>-<index>`, min(`parallelism`, `completions`) pods each) in the Job controller's label,
/// JobSet's index, JobSet-name and replicated-job labels (not `job-key`, a SHA-1 of the Job's
/// `namespace/name`), and the JobSet's exclusive-topology annotation, which the JobSet controller
/// copies onto every child Job's pod template. Under the node-selector strategy the controller
/// also gives the pods a nodeSelector on `alpha.jobset.sigs.k8s.io/namespaced-job:
/// <namespace>_<job>` and a toleration of the `alpha.jobset.sigs.k8s.io/no-schedule` taint.
fn jobset_child_job(
    obj: &Value,
    (jobset, namespace): (&str, &str),
    role: &Role,
    i: u32,
    metadata: &mut serde_json::Map<String, Value>,
    spec: &mut Value,
) {
    let job_template = role.template.strip_suffix("/spec/template").unwrap_or(&role.template);
    // Each child Job runs min(parallelism, completions) pods at once (the role's count).
    let count = |field: &str| {
        obj.at(&format!("{job_template}/spec/{field}"))
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0)
    };
    let per_job = match (count("parallelism").unwrap_or(1), count("completions")) {
        (p, Some(c)) => p.min(c),
        (p, None) => p,
    };
    let index = i / per_job;
    let job = format!("{jobset}-{}-{index}", role.name);
    let mut object_of = |key: &str| {
        let entry = metadata.entry(key).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        entry.as_object_mut().map(std::mem::take).unwrap_or_default()
    };
    let mut labels = object_of("labels");
    labels.insert(JOB_NAME.into(), Value::String(job.clone()));
    labels.insert(JOBSET_JOB_INDEX.into(), Value::String(index.to_string()));
    labels.insert(JOBSET_NAME.into(), Value::String(jobset.to_string()));
    labels.insert(JOBSET_REPLICATED_JOB.into(), Value::String(role.name.clone()));
    let mut annotations = object_of("annotations");
    let annotation = |key: &str| {
        obj.at("/metadata/annotations")
            .and_then(|a| a.get(key))
            .or_else(|| obj.at(&format!("{job_template}/metadata/annotations")).and_then(|a| a.get(key)))
            .filter(|v| v.is_string())
    };
    let exclusive = annotation(JOBSET_EXCLUSIVE_TOPOLOGY);
    let node_selector = annotation(JOBSET_NODE_SELECTOR_STRATEGY);
    if let Some(key) = exclusive {
        annotations.entry(JOBSET_EXCLUSIVE_TOPOLOGY).or_insert_with(|| key.clone());
    }
    if let Some(flag) = node_selector {
        annotations.entry(JOBSET_NODE_SELECTOR_STRATEGY).or_insert_with(|| flag.clone());
    }
    if exclusive.is_some()
        && node_selector.is_some()
        && let Some(spec) = spec.as_object_mut()
    {
        let selector = spec.entry("nodeSelector").or_insert_with(|| json!({}));
        if !selector.is_object() {
            *selector = json!({});
        }
        if let Some(selector) = selector.as_object_mut() {
            selector.insert(JOBSET_NAMESPACED_JOB.into(), Value::String(format!("{namespace}_{job}")));
        }
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !tolerations.is_array() {
            *tolerations = json!([]);
        }
        if let Some(tolerations) = tolerations.as_array_mut() {
            tolerations
                .push(json!({"key": JOBSET_NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}));
        }
    }
    metadata.insert("labels".into(), Value::Object(labels));
    metadata.insert("annotations".into(), Value::Object(annotations));
}

/// The pods the workload's controller would create, injection applied. A Pod expands to itself
/// (injected); objects that are neither give an empty list. See [`expand_admitted`].
pub fn expand(obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    expand_admitted(&inject(obj)?)
}

/// Pods a workload implies, or an error naming the field that sets the count when they are more
/// than [`MAX_EXPANDED_PODS`]: what one expansion may write out.
pub fn expanded_count(shape: &WorkloadShape) -> Result<u64, Vec<FieldError>> {
    let count: u64 = shape.roles.iter().map(|r| u64::from(r.pods)).sum();
    if count > MAX_EXPANDED_PODS {
        let role = shape.roles.iter().max_by_key(|r| r.pods).map(|r| r.template.as_str()).unwrap_or("/spec");
        return Err(vec![FieldError::new(
            path_of(&role_count_pointer(&shape.kind, role)),
            format!("the {} would run {count} pods; at most {MAX_EXPANDED_PODS} are expanded", shape.kind),
        )]);
    }
    Ok(count)
}

/// The pods the controller of `obj` — as admission left it: nothing is injected here — would
/// create (`simulate`), and for a Volcano Job its PodGroup, for a StatefulSet the claims of its
/// `volumeClaimTemplates` (after the pods). Each pod is what the pod webhook
/// admits: a pod that claims a gang gets our `schedulerName` when it names none.
///
/// Cost: each role's template is decoded once, and its pods share one copy of what the scheduler
/// reads of it ([`crate::read::convert::scheduling_spec`]) — a pod costs its labels, annotations and
/// scheduling fields, whatever else its template holds. A template the API server could not decode
/// is an error naming the exact field. A Pod expands to itself.
pub fn expand_admitted(obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    let is_pod = obj.get("kind").and_then(Value::as_str) == Some("Pod");
    if is_pod {
        return Ok(vec![obj.clone()]);
    }
    if grove::is_pcs(obj) {
        return grove::expand(obj);
    }
    let Some(shape) = inspect(obj) else { return Ok(Vec::new()) };
    let shape = shape?;
    let count = expanded_count(&shape)?;
    let mut stamps = Vec::with_capacity(shape.roles.len());
    let mut errors = Vec::new();
    for role in &shape.roles {
        let Some(template) = obj.at(&role.template) else {
            stamps.push(None);
            continue;
        };
        match stamp_of(template, &path_of(&role.template), &shape.namespace) {
            Ok(s) => stamps.push(Some(s)),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if shape.volcano() {
        return Ok(expand_volcano(obj, &shape, &stamps));
    }
    if shape.kind == "LeaderWorkerSet" {
        return Ok(expand_lws(obj, &shape, &stamps));
    }
    let upstream_group = upstream_job_group(obj);
    // The label in which the controller writes the workload's name on each pod (what a gang
    // injected as `kube-gang.io/gang-from` is named from).
    let name_label = controller_name_label(&shape.group, &shape.kind);
    let mut pods = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut claims = Vec::new();
    let wrapper = shape.kind == "AppWrapper" && shape.group == "workload.codeflare.dev";
    let mut pod_set = (None, 0usize);
    for (role, stamp) in shape.roles.iter().zip(&stamps) {
        // An AppWrapper's pod set: the infos Kueue assigned it, merged as its controller merges them.
        let merged;
        let mut stamp = stamp.as_ref();
        if wrapper {
            let component = appwrapper::component_of(&role.template);
            pod_set = if pod_set.0 == component { (component, pod_set.1 + 1) } else { (component, 0) };
            if let (Some(s), Some(info)) = (stamp, appwrapper::pod_set_info(obj, &role.template, pod_set.1)) {
                merged = with_pod_set_info(s, info);
                stamp = Some(&merged);
            }
        }
        let Some(stamp) = stamp else { continue };
        let wrapped_jobset = if wrapper { wrapped_jobset_role(obj, role) } else { None };
        for i in 0..role.pods {
            let mut name = shape.name.clone();
            if !role.name.is_empty() {
                name.push_str(&format!("-{}", role.name));
            }
            name.push_str(&format!("-{i}"));
            let mut metadata = stamp.metadata.clone();
            metadata.insert("name".into(), Value::String(name));
            metadata.insert("namespace".into(), Value::String(shape.namespace.clone()));
            let mut spec = stamp.spec.clone();
            if shape.kind == "JobSet" {
                jobset_child_job(obj, (&shape.name, &shape.namespace), role, i, &mut metadata, &mut spec);
            }
            // A JobSet an AppWrapper wraps: its own controller makes its child Jobs as for any
            // JobSet (labels, exclusive placement), from the component it is.
            if let Some((jobset, role)) = &wrapped_jobset {
                let name = jobset.at("/metadata/name").and_then(Value::as_str).unwrap_or(&shape.name);
                jobset_child_job(jobset, (name, &shape.namespace), role, i, &mut metadata, &mut spec);
            }
            if shape.kind == "StatefulSet" {
                claims.extend(statefulset_claims(obj, &shape, i, &mut spec));
            }
            if let Some(key) = name_label
                && let Some(labels) = map_at_key(&mut metadata, "labels")
            {
                labels.insert(key.into(), Value::String(label_value_for(&shape.name)));
            }
            if let Some(group) = &upstream_group
                && let Some(sp) = spec.as_object_mut()
            {
                sp.insert("schedulingGroup".into(), json!({"podGroupName": group["metadata"]["name"]}));
            }
            pods.push(pod_of(metadata, spec));
        }
    }
    pods.extend(claims);
    if let Some(group) = upstream_group {
        pods.insert(0, group);
    }
    Ok(pods)
}

/// For an AppWrapper pod set inside a wrapped JobSet (`/spec/components/<c>/template/spec/
/// replicatedJobs/<j>/template/spec/template`): the JobSet, and the role as the JobSet names it
/// (its replicated job, the template relative to the JobSet).
fn wrapped_jobset_role<'a>(obj: &'a Value, role: &Role) -> Option<(&'a Value, Role)> {
    let component = appwrapper::component_of(&role.template)?;
    let base = format!("/spec/components/{component}/template");
    let jobset = obj.at(&base)?;
    let group = jobset.get("apiVersion").and_then(Value::as_str).map(crate::read::dialect::group_of);
    if group != Some("jobset.x-k8s.io") || jobset.get("kind").and_then(Value::as_str) != Some("JobSet") {
        return None;
    }
    let template = role.template.strip_prefix(&base)?.to_string();
    let index = template.strip_prefix("/spec/replicatedJobs/")?.split('/').next()?;
    let name = jobset.at(&format!("/spec/replicatedJobs/{index}/name")).and_then(Value::as_str)?.to_string();
    Some((jobset, Role { name, pods: role.pods, template }))
}

/// The PodGroup a Job's controller compiles its `spec.scheduling` into when the policy is `gang`
/// (KEP-5547): `scheduling.k8s.io/v1beta1`, `minCount` defaulted to the Job's `parallelism`, its
/// `schedulingConstraints` copied; its pods then name it in `spec.schedulingGroup`. Named after
/// the Job here (the controller adds its Workload's template name and a hash, which a simulation
/// cannot know). `None` for no `spec.scheduling`, or the `basic` policy (pods one by one).
fn upstream_job_group(obj: &Value) -> Option<Value> {
    let scheduling = super::job_scheduling(obj)?;
    let gang = scheduling.at("/schedulingPolicy/gang").filter(|g| g.is_object())?;
    // `minCount` defaults to `parallelism`, at least 1.
    let parallelism = obj.at("/spec/parallelism").and_then(Value::as_u64).unwrap_or(1);
    let min = gang.get("minCount").and_then(Value::as_u64).unwrap_or(parallelism.max(1));
    let name = obj.at("/metadata/name").cloned().unwrap_or(Value::Null);
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min}}});
    if let Some(c) = scheduling.get("schedulingConstraints").filter(|c| c.is_object()) {
        spec["schedulingConstraints"] = c.clone();
    }
    Some(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": obj.at("/metadata/namespace").cloned().unwrap_or(Value::Null),
                     "creationTimestamp": obj.at("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)},
        "spec": spec,
    }))
}

/// What the StatefulSet controller does for pod `i` (`<set>-<i>`) of a set with
/// `volumeClaimTemplates`: a volume per template naming the claim `<template>-<set>-<i>` in the
/// pod's spec (in place of a template volume of that name), and the claims themselves, with the
/// template's labels, annotations and spec. Returns the claims.
fn statefulset_claims(obj: &Value, shape: &WorkloadShape, i: u32, spec: &mut Value) -> Vec<Value> {
    let templates =
        obj.at("/spec/volumeClaimTemplates").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut claims = Vec::new();
    for t in templates {
        let Some(template) = t.at("/metadata/name").and_then(Value::as_str) else { continue };
        let claim = format!("{template}-{}-{i}", shape.name);
        if let Some(volumes) = map_at(spec, &[]).map(|s| s.entry("volumes").or_insert_with(|| json!([]))) {
            if !volumes.is_array() {
                *volumes = json!([]);
            }
            if let Some(list) = volumes.as_array_mut() {
                list.retain(|v| v.get("name").and_then(Value::as_str) != Some(template));
                list.push(json!({"name": template, "persistentVolumeClaim": {"claimName": claim}}));
            }
        }
        let mut metadata = Map::new();
        for key in ["labels", "annotations"] {
            if let Some(m) = t.at(&format!("/metadata/{key}")).filter(|m| m.is_object()) {
                metadata.insert(key.into(), m.clone());
            }
        }
        metadata.insert("name".into(), Value::String(claim));
        metadata.insert("namespace".into(), Value::String(shape.namespace.clone()));
        claims.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata,
                           "spec": t.get("spec").cloned().unwrap_or(Value::Null)}));
    }
    claims
}

/// What every pod of one role starts from: the template's labels and annotations, and the
/// scheduler's view of its spec (decoded once).
struct Stamp {
    metadata: Map<String, Value>,
    spec: Value,
}

fn stamp_of(template: &Value, path: &str, namespace: &str) -> Result<Stamp, Vec<FieldError>> {
    let mut spec = crate::read::convert::scheduling_spec(template.get("spec"), &format!("{path}.spec"))?;
    let mut metadata = Map::new();
    for key in ["labels", "annotations"] {
        match template.at(&format!("/metadata/{key}")) {
            None | Some(Value::Null) => {}
            Some(v) => {
                metadata.insert(key.into(), v.clone());
            }
        }
    }
    // The pod webhook: a pod that names a gang in any dialect gets our scheduler unless it names
    // another one.
    if !template_claims(template, namespace).is_empty()
        && let Some(sp) = spec.as_object_mut()
    {
        let current = sp.get("schedulerName").and_then(Value::as_str);
        if current.is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER) {
            sp.insert("schedulerName".into(), Value::String(crate::read::labels::SCHEDULER_NAME.into()));
        }
    }
    Ok(Stamp { metadata, spec })
}

fn pod_of(metadata: Map<String, Value>, spec: Value) -> Value {
    let mut pod = Map::new();
    pod.insert("apiVersion".into(), Value::String("v1".into()));
    pod.insert("kind".into(), Value::String("Pod".into()));
    pod.insert("metadata".into(), Value::Object(metadata));
    pod.insert("spec".into(), spec);
    Value::Object(pod)
}

/// What Volcano's job controller makes of a `batch.volcano.sh` Job: a PodGroup named after the job
/// (`minMember` = `minAvailable`, `minTaskMember` = each task's `minAvailable`) and
/// `<job>-<task>-<index>` pods annotated with the group and their task; the job's
/// `schedulerName` and `priorityClassName` on each pod whose template sets none, and its class on
/// the PodGroup too, with its `networkTopology` (Volcano's `createJobPod` and
/// `createOrUpdatePodGroup`).
fn expand_volcano(obj: &Value, shape: &WorkloadShape, stamps: &[Option<Stamp>]) -> Vec<Value> {
    let scheduler = obj.at("/spec/schedulerName").cloned().unwrap_or_else(|| json!("volcano"));
    let class = obj.at("/spec/priorityClassName").and_then(Value::as_str).filter(|c| !c.is_empty());
    let mut task_min = Map::new();
    let mut policies = Vec::new();
    let mut pods = Vec::new();
    for (i, (role, stamp)) in shape.roles.iter().zip(stamps).enumerate() {
        let partition = super::volcano_partition(obj, i, role.pods, &mut Vec::new());
        let min = obj
            .at(&format!("/spec/tasks/{i}/minAvailable"))
            .and_then(Value::as_u64)
            .unwrap_or(u64::from(partition.map_or(role.pods, |p| p.task_min(role.pods))));
        task_min.insert(role.name.clone(), json!(min));
        // A partitioned task's policy, as the controller writes it (`getSubGroupPolicy`).
        if let Some(p) = partition {
            let mut policy = json!({
                "name": role.name, "subGroupSize": p.size, "minSubGroups": p.min,
                "labelSelector": {"matchLabels": {crate::read::dialect::volcano::TASK_ANNOTATION: role.name}},
                "matchLabelKeys": [crate::read::dialect::volcano::PARTITION_LABEL],
            });
            if let Some(t) =
                obj.at(&format!("/spec/tasks/{i}/partitionPolicy/networkTopology")).filter(|t| !t.is_null())
            {
                let mut t = t.clone();
                if let Some(m) = t.as_object_mut() {
                    m.entry("mode").or_insert_with(|| json!("hard"));
                }
                policy["networkTopology"] = t;
            }
            policies.push(policy);
        }
        let Some(stamp) = stamp else { continue };
        let mut spec = stamp.spec.clone();
        if let Some(sp) = spec.as_object_mut() {
            let unset = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
            if unset(sp.get("schedulerName")) {
                sp.insert("schedulerName".into(), scheduler.clone());
            }
            if let Some(c) = class
                && unset(sp.get("priorityClassName"))
            {
                sp.insert("priorityClassName".into(), json!(c));
            }
        }
        for n in 0..role.pods {
            let mut metadata = Value::Object(stamp.metadata.clone());
            if let Some(m) = metadata.as_object_mut() {
                m.insert("name".into(), json!(format!("{}-{}-{n}", shape.name, role.name)));
                m.insert("namespace".into(), json!(shape.namespace));
            }
            if let Some(a) = map_at(&mut metadata, &["annotations"]) {
                a.insert(crate::read::dialect::volcano::ANNOTATION.into(), json!(shape.name));
                a.insert(crate::read::dialect::volcano::TASK_ANNOTATION.into(), json!(role.name));
            }
            // The task as a label too, and a partitioned task's partition (`createJobPod`).
            if let Some(l) = map_at(&mut metadata, &["labels"]) {
                l.insert(crate::read::dialect::volcano::TASK_ANNOTATION.into(), json!(role.name));
                if let Some(p) = partition.filter(|p| p.size > 0) {
                    l.insert(
                        crate::read::dialect::volcano::PARTITION_LABEL.into(),
                        json!((n / p.size).to_string()),
                    );
                }
            }
            let Value::Object(metadata) = metadata else { continue };
            pods.push(pod_of(metadata, spec.clone()));
        }
    }
    let mut out = vec![json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": shape.name, "namespace": shape.namespace,
                     "creationTimestamp": obj.at("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)},
        "spec": {"minMember": shape.min_member, "minTaskMember": task_min,
                 "queue": obj.at("/spec/queue").cloned().unwrap_or_else(|| json!("default"))},
    })];
    if let Some(c) = class {
        out[0]["spec"]["priorityClassName"] = json!(c);
    }
    if !policies.is_empty() {
        out[0]["spec"]["subGroupPolicy"] = Value::Array(policies);
    }
    // The Job's labels and annotations, and the Job as its controller, as Volcano's
    // `createOrUpdatePodGroup` writes them (the labels carry the Job's opt-in to kube-gang).
    for field in ["labels", "annotations"] {
        if let Some(m) = obj.at(&format!("/metadata/{field}")).filter(|m| m.is_object()) {
            out[0]["metadata"][field] = m.clone();
        }
    }
    out[0]["metadata"]["ownerReferences"] = json!([{
        "apiVersion": obj.get("apiVersion").cloned().unwrap_or_else(|| json!("batch.volcano.sh/v1alpha1")),
        "kind": "Job", "name": shape.name, "controller": true, "blockOwnerDeletion": true,
        "uid": obj.at("/metadata/uid").cloned().unwrap_or_else(|| json!("")),
    }]);
    // Its network-topology bound, as the controller copies it — with the Job CRD's defaults the
    // API server applies first (mode `hard`; `highestTierAllowed` 1 unless a tier is named).
    if let Some(t) = obj.at("/spec/networkTopology").filter(|t| !t.is_null()) {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.entry("mode").or_insert_with(|| json!("hard"));
            let named = m.get("highestTierName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
            if !named {
                m.entry("highestTierAllowed").or_insert_with(|| json!(1));
            }
        }
        out[0]["spec"]["networkTopology"] = t;
    }
    out.extend(pods);
    out
}

/// The pods of a LeaderWorkerSet, group by group, leader first ([`lws`]): the leader from the
/// leader template (the worker template when there is none), the workers from the worker template.
fn expand_lws(obj: &Value, shape: &WorkloadShape, stamps: &[Option<Stamp>]) -> Vec<Value> {
    let (leader, worker) = match stamps {
        [leader, worker] => (leader.as_ref(), worker.as_ref()),
        [worker] => (worker.as_ref(), worker.as_ref()),
        _ => return Vec::new(),
    };
    let size = shape.group_size.unwrap_or(1);
    let mut pods =
        Vec::with_capacity(usize::try_from(u64::from(shape.groups) * u64::from(size)).unwrap_or(0));
    let set = lws::Set::of(obj, &shape.name, &shape.namespace, size);
    for g in 0..shape.groups {
        let (leader_name, key) = set.group(g);
        for w in 0..size {
            let Some(stamp) = (if w == 0 { leader } else { worker }) else { continue };
            let mut metadata = stamp.metadata.clone();
            let mut spec = stamp.spec.clone();
            set.stamp((g, &leader_name, &key), w, &mut metadata, &mut spec);
            pods.push(pod_of(metadata, spec));
        }
    }
    pods
}

/// `stamp` with an AppWrapper pod set's `podSetInfos` entry merged in, as the AppWrapper controller
/// merges it into the pod template (`createComponent`): labels, annotations and node selector
/// added where the template has none of that key (a conflict is the controller's error; here the
/// template's value stays), tolerations appended, scheduling gates appended unless named already.
fn with_pod_set_info(stamp: &Stamp, info: &Value) -> Stamp {
    let mut metadata = stamp.metadata.clone();
    let mut spec = stamp.spec.clone();
    for key in ["labels", "annotations"] {
        if let Some(add) = info.get(key).and_then(Value::as_object)
            && let Some(m) = map_at_key(&mut metadata, key)
        {
            for (k, v) in add {
                m.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    if let Some(add) = info.get("nodeSelector").and_then(Value::as_object)
        && let Some(m) = map_at(&mut spec, &["nodeSelector"])
    {
        for (k, v) in add {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if let Some(sp) = spec.as_object_mut() {
        if let Some(add) = info.get("tolerations").and_then(Value::as_array).filter(|a| !a.is_empty()) {
            let list = sp.entry("tolerations").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(list) = list.as_array_mut() {
                list.extend(add.iter().cloned());
            }
        }
        if let Some(add) = info.get("schedulingGates").and_then(Value::as_array).filter(|a| !a.is_empty()) {
            let list = sp.entry("schedulingGates").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(list) = list.as_array_mut() {
                for gate in add {
                    let name = gate.get("name");
                    if name.is_some() && !list.iter().any(|g| g.get("name") == name) {
                        list.push(json!({"name": name}));
                    }
                }
            }
        }
    }
    Stamp { metadata, spec }
}

/// The map under `key` in `metadata`, made (or made from a non-map) on the way.
fn map_at_key<'a>(metadata: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let entry = metadata.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

/// The map at `keys` under `obj`, created (or made from a `null`) on the way: for the copies
/// [`expand`] writes out, never for the user's object.
fn map_at<'a>(obj: &'a mut Value, keys: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = obj;
    for k in keys {
        let map = cur.as_object_mut()?;
        let entry = map.entry(k.to_string()).or_insert_with(|| json!({}));
        if entry.is_null() {
            *entry = json!({});
        }
        cur = entry;
    }
    cur.as_object_mut()
}
