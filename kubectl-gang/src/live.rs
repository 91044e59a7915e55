//! Reading a live cluster with kube-rs: kubeconfig (multi-path `KUBECONFIG` merged as kubectl
//! does), `--context`, the context's namespace; every object the core reads, every dialect's gang
//! objects included (a dialect whose CRD is not installed is skipped).

use std::path::Path;

use anyhow::Context;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use scheduler_core::cluster::{ApiKind, Compact, READ};
use serde_json::Value;

/// A connected client and the namespace of its context.
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
    /// `host:port` of the API server, as kubectl names it in its errors.
    pub server: String,
}

/// Where kubectl (client-go) sends requests when it finds no configuration at all: no
/// `--kubeconfig`, no `$KUBECONFIG`, no `~/.kube/config`, not in a cluster.
pub const NO_CONFIG_SERVER: &str = "http://localhost:8080";

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("namespace", &self.namespace).finish_non_exhaustive()
    }
}

/// Connects as kubectl would.
pub async fn connect(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Connection> {
    let options = KubeConfigOptions { context: context.map(String::from), ..KubeConfigOptions::default() };
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None => match Kubeconfig::from_env()? {
            Some(kc) => kube::Config::from_custom_kubeconfig(kc, &options).await?,
            None => match kube::Config::from_kubeconfig(&options).await {
                Ok(c) => c,
                Err(e) => match kube::Config::incluster() {
                    Ok(c) => c,
                    // Nothing configured: kubectl talks to localhost:8080 then (and says the
                    // connection was refused); so does the plugin. A kubeconfig that exists but
                    // cannot be read is that error.
                    Err(_) if !default_kubeconfig_exists() => {
                        kube::Config::new(NO_CONFIG_SERVER.parse().context("the default server")?)
                    }
                    Err(_) => return Err(e.into()),
                },
            },
        },
    };
    let namespace = config.default_namespace.clone();
    let server =
        config.cluster_url.authority().map_or_else(|| config.cluster_url.to_string(), ToString::to_string);
    let client = kube::Client::try_from(config)?;
    Ok(Connection { client, namespace, server })
}

/// Whether `~/.kube/config` exists (kubectl's default kubeconfig).
fn default_kubeconfig_exists() -> bool {
    std::env::var_os("HOME").is_some_and(|h| Path::new(&h).join(".kube/config").exists())
}

/// kubectl's words for an API server that cannot be reached: `The connection to the server
/// HOST:PORT was refused - did you specify the right host or port?` when nothing listens, `Unable
/// to connect to the server: …` otherwise; other errors as they are.
pub fn as_kubectl_says(e: anyhow::Error, server: &str) -> anyhow::Error {
    let unreachable = e.chain().any(|c| {
        c.downcast_ref::<kube::Error>()
            .is_some_and(|k| matches!(k, kube::Error::HyperError(_) | kube::Error::Service(_)))
    });
    if !unreachable {
        return e;
    }
    let text = format!("{e:#}").to_lowercase();
    if text.contains("connection refused") {
        anyhow::anyhow!(
            "The connection to the server {server} was refused - did you specify the right host or port?"
        )
    } else {
        anyhow::anyhow!("Unable to connect to the server: {}", e.root_cause())
    }
}

fn resource(k: &ApiKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(k.group, k.version, k.kind), k.plural)
}

/// Everything `status`, `simulate` and `snapshot` read (the core's list, and ProvisioningRequests):
/// (resource, required).
/// Only nodes and pods are required: a user who may not list namespaces or priority classes, or a
/// cluster without some dialect's CRD, still gets an answer.
pub fn resources() -> Vec<(ApiResource, bool)> {
    let mut out: Vec<_> =
        READ.iter().map(|k| (resource(k), matches!(k.kind, "Node" | "Pod") && k.builtin)).collect();
    out.push((resource(&PROVISIONING_REQUESTS), false));
    out
}

/// Beyond the core's list, optional: cluster-autoscaler's ProvisioningRequests, whose state
/// `status` reports for gangs waiting for capacity.
const PROVISIONING_REQUESTS: ApiKind = ApiKind {
    group: "autoscaling.x-k8s.io",
    version: "v1",
    kind: "ProvisioningRequest",
    plural: "provisioningrequests",
    builtin: false,
};

/// Objects per list request, as kubectl lists (`--chunk-size`): no one response holds every pod of
/// a large cluster.
const PAGE: u32 = 500;

/// Lists every object of `r` (in `namespace`, else in all), page by page, each stored as compact
/// JSON with its `apiVersion` and `kind` (and without `managedFields`, which nothing here reads):
/// memory stays near the size of the JSON served, where decoded values cost many times that.
async fn list_all(
    client: &kube::Client,
    r: &ApiResource,
    namespace: Option<&str>,
    out: &mut Vec<Compact>,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    };
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let list = api.list(&params).await?;
        for mut o in list.items {
            o.metadata.managed_fields = None;
            let mut v = serde_json::to_value(o).map_err(kube::Error::SerdeError)?;
            if let Some(m) = v.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(r.api_version.clone()));
                m.insert("kind".into(), Value::String(r.kind.clone()));
            }
            out.push(Compact::new(&v));
        }
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Lists every resource the plugin reads, as raw objects with `apiVersion` and `kind`, held as
/// compact JSON.
pub async fn fetch(live: &Connection) -> anyhow::Result<Vec<Compact>> {
    let mut out = Vec::new();
    for (r, required) in resources() {
        match list_all(&live.client, &r, None, &mut out).await {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if !required && (e.code == 404 || e.code == 403) => {}
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!("listing {}", r.plural));
                return Err(as_kubectl_says(e, &live.server));
            }
        }
    }
    Ok(out)
}

/// Events in `namespace` (events.k8s.io/v1, else core v1), for the detail view.
pub async fn events(live: &Connection, namespace: &str) -> anyhow::Result<Vec<Compact>> {
    let events = [
        ApiKind { group: "events.k8s.io", version: "v1", kind: "Event", plural: "events", builtin: true },
        ApiKind { group: "", version: "v1", kind: "Event", plural: "events", builtin: true },
    ];
    for r in events.iter().map(resource) {
        let mut out = Vec::new();
        match list_all(&live.client, &r, Some(namespace), &mut out).await {
            Ok(()) => return Ok(out),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {}
            Err(e) => return Err(anyhow::Error::new(e).context("listing events")),
        }
    }
    Ok(Vec::new())
}
