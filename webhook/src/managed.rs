//! The webhook manages its own serving certificate (`--serving-cert=managed`): it keeps a CA and
//! a serving certificate in a Secret, writes the CA bundle into `clientConfig.caBundle` of every
//! entry of both webhook configurations, and serves the certificate the Secret holds. What to
//! store is decided by [`crate::rotation`]; this module reads and writes the three objects.
//!
//! Every replica runs the same rounds (read, decide, write, inject), so none is special: writes
//! carry the `resourceVersion` they were decided from, and the replica whose write the API server
//! refuses (409) reads again and finds the other's work done. The only API access it needs is
//! `get` and `update` of that one Secret and of the two configurations, by name
//! (`manifests/base/webhook-rbac.yaml`); the Secret is shipped empty by the manifests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use crate::certs::Ca;
use crate::rotation::{self, Material, Policy};
use crate::tls::Served;

/// The Secret's data keys.
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const NEXT_CA_CRT: &str = "next-ca.crt";
pub const NEXT_CA_KEY: &str = "next-ca.key";
pub const CA_BUNDLE: &str = "ca-bundle.crt";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
/// When the next CA was published (RFC 3339), on the Secret.
pub const NEXT_CA_SINCE: &str = "kube-gang.io/next-ca-since";
/// When CAs that no longer sign leave the bundle (RFC 3339), on the Secret.
pub const RETIRE_CAS_AT: &str = "kube-gang.io/retire-cas-at";

/// The objects the webhook keeps.
#[derive(Clone, Debug)]
pub struct Target {
    /// The Secret's namespace and name.
    pub namespace: String,
    pub secret: String,
    /// The name of both webhook configurations (mutating and validating).
    pub configuration: String,
    /// The Service's DNS names the serving certificate must carry.
    pub names: Vec<String>,
}

/// One replica's certificate management.
#[derive(Clone)]
pub struct Manager {
    secrets: Api<Secret>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    target: Target,
    policy: Policy,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("target", &self.target).field("policy", &self.policy).finish()
    }
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok()).filter(|s| !s.trim().is_empty())
}

fn time_of(secret: &Secret, key: &str) -> Option<i64> {
    let value = secret.metadata.annotations.as_ref()?.get(key)?;
    value.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// What a Secret holds, as the rotation reads it (`None`: nothing of ours in it yet).
pub fn material_of(secret: &Secret) -> Option<Material> {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let pair = |crt: &str, key: &str| Some(Ca { cert_pem: text(data, crt)?, key_pem: text(data, key)? });
    let m = Material {
        ca: pair(CA_CRT, CA_KEY),
        next_ca: pair(NEXT_CA_CRT, NEXT_CA_KEY),
        next_since: time_of(secret, NEXT_CA_SINCE),
        retire_at: time_of(secret, RETIRE_CAS_AT),
        bundle: text(data, CA_BUNDLE).unwrap_or_default(),
        tls_crt: text(data, TLS_CRT).unwrap_or_default(),
        tls_key: text(data, TLS_KEY).unwrap_or_default(),
    };
    (m != Material::default()).then_some(m)
}

fn stamp(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map(|t| t.to_string()).unwrap_or_default()
}

/// `secret` (or a new one) holding `m`; other data keys and annotations are kept.
pub fn secret_with(secret: Option<&Secret>, target: &Target, m: &Material) -> Secret {
    let mut s = secret.cloned().unwrap_or_default();
    s.metadata.name = Some(target.secret.clone());
    s.metadata.namespace = Some(target.namespace.clone());
    let data = s.data.get_or_insert_with(BTreeMap::new);
    let mut put = |key: &str, value: Option<&str>| match value {
        Some(v) => {
            data.insert(key.to_string(), ByteString(v.as_bytes().to_vec()));
        }
        None => {
            data.remove(key);
        }
    };
    put(CA_CRT, m.ca.as_ref().map(|c| c.cert_pem.as_str()));
    put(CA_KEY, m.ca.as_ref().map(|c| c.key_pem.as_str()));
    put(NEXT_CA_CRT, m.next_ca.as_ref().map(|c| c.cert_pem.as_str()));
    put(NEXT_CA_KEY, m.next_ca.as_ref().map(|c| c.key_pem.as_str()));
    put(CA_BUNDLE, Some(&m.bundle));
    put(TLS_CRT, Some(&m.tls_crt));
    put(TLS_KEY, Some(&m.tls_key));
    let notes = s.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, at) in [(NEXT_CA_SINCE, m.next_since), (RETIRE_CAS_AT, m.retire_at)] {
        match at {
            Some(t) => notes.insert(key.to_string(), stamp(t)),
            None => notes.remove(key),
        };
    }
    s
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(ae) if ae.code == 409)
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(ae) if ae.code == 404)
}

/// What one round did.
#[derive(Clone, Debug)]
pub struct Round {
    /// What the Secret holds after the round.
    pub material: Material,
    /// What this replica changed in the Secret (empty: nothing, or another replica did first).
    pub changes: Vec<rotation::Change>,
    /// How many configurations this replica wrote the bundle into.
    pub injected: usize,
}

impl Manager {
    pub fn new(client: kube::Client, target: Target, policy: Policy) -> Self {
        Manager {
            secrets: Api::namespaced(client.clone(), &target.namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client),
            target,
            policy,
        }
    }

    /// One round at `now` (seconds since the epoch): read the Secret and both configurations,
    /// decide, write the Secret if the decision changed it, write the bundle into every webhook
    /// entry that lacks it. A write refused for a stale `resourceVersion` (another replica wrote
    /// first) is read again, up to three times.
    pub async fn round(&self, now: i64) -> anyhow::Result<Round> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_round(now).await {
                Err(e) if attempt < 3 && e.downcast_ref::<kube::Error>().is_some_and(conflict) => continue,
                other => return other,
            }
        }
    }

    async fn try_round(&self, now: i64) -> anyhow::Result<Round> {
        let name = &self.target.secret;
        let secret = self.secrets.get_opt(name).await.with_context(|| format!("reading Secret {name}"))?;
        let current = secret.as_ref().and_then(material_of);
        let mutating = self.get_config(&self.mutating).await?;
        let validating = self.get_config(&self.validating).await?;
        let mut published = Vec::new();
        for hooks in [
            mutating
                .as_ref()
                .map(|c| bundles(c.webhooks.iter().flatten().map(|w| &w.client_config.ca_bundle))),
            validating
                .as_ref()
                .map(|c| bundles(c.webhooks.iter().flatten().map(|w| &w.client_config.ca_bundle))),
        ]
        .into_iter()
        .flatten()
        {
            published.extend(hooks);
        }
        let decision = rotation::decide(current.as_ref(), &self.target.names, &published, now, &self.policy)?;
        if !decision.changes.is_empty() {
            let next = secret_with(secret.as_ref(), &self.target, &decision.material);
            let written = match &secret {
                Some(_) => self.secrets.replace(name, &PostParams::default(), &next).await,
                None => self.secrets.create(&PostParams::default(), &next).await,
            };
            written.map_err(anyhow::Error::from)?;
            for change in &decision.changes {
                tracing::info!(secret = %name, change = %change, "webhook certificate");
            }
        }
        let bundle = decision.material.bundle.as_bytes();
        let mut injected = 0;
        if let Some(mut c) = mutating
            && c.webhooks.iter().flatten().any(|w| !same(&w.client_config.ca_bundle, bundle))
        {
            for w in c.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = Some(ByteString(bundle.to_vec()));
            }
            self.mutating.replace(&self.target.configuration, &PostParams::default(), &c).await?;
            injected += 1;
        }
        if let Some(mut c) = validating
            && c.webhooks.iter().flatten().any(|w| !same(&w.client_config.ca_bundle, bundle))
        {
            for w in c.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = Some(ByteString(bundle.to_vec()));
            }
            self.validating.replace(&self.target.configuration, &PostParams::default(), &c).await?;
            injected += 1;
        }
        Ok(Round { material: decision.material, changes: decision.changes, injected })
    }

    async fn get_config<K>(&self, api: &Api<K>) -> anyhow::Result<Option<K>>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match api.get(&self.target.configuration).await {
            Ok(c) => Ok(Some(c)),
            Err(e) if not_found(&e) => {
                tracing::warn!(name = %self.target.configuration, "webhook configuration not found; no caBundle written");
                Ok(None)
            }
            Err(e) => Err(anyhow::Error::from(e)
                .context(format!("reading webhook configuration {}", self.target.configuration))),
        }
    }

    /// Rounds until the Secret holds a serving certificate (every second, up to 30 s apart), then
    /// what is to be served.
    pub async fn first(&self) -> Arc<Served> {
        let mut wait = Duration::from_secs(1);
        loop {
            match self.round(now()).await {
                Ok(r) => match Served::from_pem(r.material.tls_crt.as_bytes(), r.material.tls_key.as_bytes())
                {
                    Ok(served) => return served,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "stored serving certificate unusable")
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "webhook certificate not ready; retrying")
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(30));
        }
    }

    /// A round every `period`, forever, serving what the Secret holds.
    pub async fn run(self, served: Arc<Served>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            match self.round(now()).await {
                Ok(r) => match served.set(r.material.tls_crt.as_bytes(), r.material.tls_key.as_bytes()) {
                    Ok(true) => tracing::info!("serving certificate reloaded from the Secret"),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "stored serving certificate unusable; keeping the current one")
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "webhook certificate round failed; retrying")
                }
            }
        }
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn same(have: &Option<ByteString>, want: &[u8]) -> bool {
    have.as_ref().is_some_and(|b| b.0 == want)
}

/// Each entry's `caBundle` as text (empty when absent).
fn bundles<'a>(entries: impl Iterator<Item = &'a Option<ByteString>>) -> Vec<String> {
    entries
        .map(|b| b.as_ref().map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default())
        .collect()
}
