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
        Some(path) => kube::Config::from_custom_kubeconfig(read_kubeconfig(path)?, &options).await?,
        None => match kubeconfig_from_env_or_home()? {
            Some(kc) => kube::Config::from_custom_kubeconfig(kc, &options).await?,
            // Nothing configured: kubectl talks to localhost:8080 then (and says the connection
            // was refused); so does the plugin, unless it runs in a pod.
            None => match kube::Config::incluster() {
                Ok(c) => c,
                Err(_) => kube::Config::new(NO_CONFIG_SERVER.parse().context("the default server")?),
            },
        },
    };
    let namespace = config.default_namespace.clone();
    let server =
        config.cluster_url.authority().map_or_else(|| config.cluster_url.to_string(), ToString::to_string);
    let client = kube::Client::try_from(config)?;
    Ok(Connection { client, namespace, server })
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

/// `KUBECONFIG`'s files merged (as kubectl merges them: the first to set a value wins), else
/// `~/.kube/config` when it exists, each read by [`read_kubeconfig`]; `None`: neither (the
/// in-cluster configuration is next).
fn kubeconfig_from_env_or_home() -> anyhow::Result<Option<Kubeconfig>> {
    if let Some(value) = std::env::var_os("KUBECONFIG") {
        let paths: Vec<_> = std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()).collect();
        if !paths.is_empty() {
            let mut merged = Kubeconfig::default();
            for p in paths {
                merged = merged.merge(read_kubeconfig(&p)?)?;
            }
            return Ok(Some(merged));
        }
    }
    match std::env::home_dir().map(|h| h.join(".kube").join("config")) {
        Some(path) if path.exists() => Ok(Some(read_kubeconfig(&path)?)),
        _ => Ok(None),
    }
}

/// A kubeconfig file read within bounds, as kube would read it otherwise unbounded (`--kubeconfig
/// /dev/zero` took 12.6 GB): the file at most [`crate::input::MAX_SIDE_FILE_BYTES`], read as kubectl
/// reads YAML ([`crate::yaml`]: depth and alias limits), and every file it names — a cluster's
/// `certificate-authority`, a user's `client-certificate`, `client-key` and `tokenFile`,
/// relative ones from the kubeconfig's directory, as kubectl resolves them — read the same way
/// now and written into it as their `-data` forms (`token` for the token file), so that nothing
/// the client reads later is unbounded. (A kubeconfig is read once by this short-lived command:
/// a token file rotating under it is not followed, as it would not be either way.)
pub fn read_kubeconfig(path: &Path) -> anyhow::Result<Kubeconfig> {
    use base64::Engine as _;
    let what = || format!("reading kubeconfig {}", path.display());
    let text = crate::input::read_side_file(path).with_context(what)?;
    let docs = crate::yaml::documents(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
        .with_context(what)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let resolve = |file: &str| {
        let p = Path::new(file);
        if p.is_relative() { dir.join(p) } else { p.to_path_buf() }
    };
    let mut merged = Kubeconfig::default();
    for mut doc in docs {
        if doc.is_null() {
            continue;
        }
        // Each named file, inlined: `(list, entry, path field, data field, as text)`.
        for (list, entry, file_field, data_field, text) in [
            ("clusters", "cluster", "certificate-authority", "certificate-authority-data", false),
            ("users", "user", "client-certificate", "client-certificate-data", false),
            ("users", "user", "client-key", "client-key-data", false),
            ("users", "user", "tokenFile", "token", true),
        ] {
            let Some(items) = doc.get_mut(list).and_then(Value::as_array_mut) else { continue };
            for item in items {
                let Some(fields) = item.get_mut(entry).and_then(Value::as_object_mut) else { continue };
                let Some(file) = fields.get(file_field).and_then(Value::as_str).map(resolve) else {
                    continue;
                };
                // The inline form wins in kubectl when both are set; the file is then never read.
                if fields.get(data_field).is_some_and(|d| !d.is_null()) {
                    fields.remove(file_field);
                    continue;
                }
                let bytes = crate::input::read_side_bytes(&file)
                    .with_context(|| format!("{file_field} named by kubeconfig {}", path.display()))?;
                let data = if text {
                    String::from_utf8_lossy(&bytes).trim().to_string()
                } else {
                    base64::engine::general_purpose::STANDARD.encode(&bytes)
                };
                fields.remove(file_field);
                fields.insert(data_field.into(), Value::String(data));
            }
        }
        // An exec plugin's relative command (one with a path separator) runs from the
        // kubeconfig's directory, as kubectl runs it.
        if let Some(users) = doc.get_mut("users").and_then(Value::as_array_mut) {
            for user in users {
                if let Some(command) = user.pointer_mut("/user/exec/command")
                    && let Some(c) = command.as_str().filter(|c| c.contains(std::path::MAIN_SEPARATOR))
                    && Path::new(c).is_relative()
                {
                    *command = Value::String(dir.join(c).display().to_string());
                }
            }
        }
        let kc = Kubeconfig::from_yaml(&serde_json::to_string(&doc)?).with_context(what)?;
        merged = merged.merge(kc).with_context(what)?;
    }
    Ok(merged)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file a kubeconfig names is read within bounds and written into it: relative paths from
    /// the kubeconfig's directory, the inline form left as it is when both are set.
    #[test]
    fn a_kubeconfig_and_the_files_it_names_are_read_within_bounds() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pki")).unwrap();
        std::fs::write(dir.path().join("pki/ca.crt"), "CA PEM").unwrap();
        std::fs::write(dir.path().join("pki/client.crt"), "CERT PEM").unwrap();
        std::fs::write(dir.path().join("pki/client.key"), "KEY PEM").unwrap();
        std::fs::write(dir.path().join("token"), "sekret\n").unwrap();
        let config = dir.path().join("config");
        std::fs::write(
            &config,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:6443', certificate-authority: pki/ca.crt}\n\
             users:\n- name: u\n  user: {client-certificate: pki/client.crt, client-key: pki/client.key}\n\
             - name: t\n  user: {tokenFile: token}\n\
             - name: both\n  user: {token: inline, tokenFile: /dev/zero}\n\
             contexts:\n- name: c\n  context: {cluster: k, user: u}\n",
        )
        .unwrap();
        let kc = read_kubeconfig(&config).unwrap();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some(b64("CA PEM").as_str()));
        assert_eq!(cluster.certificate_authority, None, "nothing left for the client to read later");
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.client_certificate_data.as_deref(), Some(b64("CERT PEM").as_str()));
        assert!(user.client_key_data.is_some() && user.client_key.is_none());
        let token = kc.auth_infos[1].auth_info.as_ref().unwrap();
        assert!(token.token.is_some() && token.token_file.is_none());
        assert_eq!(kc.current_context.as_deref(), Some("c"));
        // A kubeconfig that is /dev/zero, or names it, stops at the bound, naming the file.
        if Path::new("/dev/zero").exists() {
            let err = format!("{:#}", read_kubeconfig(Path::new("/dev/zero")).unwrap_err());
            assert!(err.contains("/dev/zero: larger than 16 MiB"), "{err}");
            std::fs::write(&config, "clusters:\n- name: k\n  cluster: {certificate-authority: /dev/zero}\n")
                .unwrap();
            let err = format!("{:#}", read_kubeconfig(&config).unwrap_err());
            assert!(
                err.contains("certificate-authority named by kubeconfig") && err.contains("16 MiB"),
                "{err}"
            );
        }
        // Deeply nested YAML is refused as any input is.
        std::fs::write(&config, format!("a: {}", "[".repeat(500))).unwrap();
        assert!(format!("{:#}", read_kubeconfig(&config).unwrap_err()).contains("nested deeper"));
    }
}
