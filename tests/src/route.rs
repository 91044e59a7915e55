//! A request's route: the path parsed into the resource it names ([`Target`]), and the state
//! every handler shares ([`Inner`]). Below the handlers (server, watch, subresources), so they
//! can all use it without importing each other.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::store::{Change, Key, Resource, Store};

/// Shared state of one fake.
#[derive(Debug)]
pub struct Inner {
    pub store: Mutex<Store>,
    pub changes: broadcast::Sender<Arc<Change>>,
    /// Resources served (a request for any other is a 404, like a missing CRD).
    pub served: Mutex<Vec<Resource>>,
    /// Bumped to end every open watch with 410 Gone (compaction).
    pub expiry: tokio::sync::watch::Sender<u64>,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_every: Mutex<Duration>,
}

/// A parsed request path.
#[derive(Clone, Debug)]
pub struct Target {
    pub res: Resource,
    pub namespace: String,
    pub name: Option<String>,
    pub sub: Option<String>,
}

impl Target {
    pub fn key(&self, name: &str) -> Key {
        (self.namespace.clone(), name.to_string())
    }
}

pub fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match *parts.first()? {
        "api" => (format!("/api/{}", parts.get(1)?), parts.get(2..)?),
        "apis" => (format!("/apis/{}/{}", parts.get(1)?, parts.get(2)?), parts.get(3..)?),
        _ => return None,
    };
    let (namespace, rest) = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        (rest[1].to_string(), &rest[2..])
    } else {
        (String::new(), rest)
    };
    // `/api/v1/namespaces/{name}` itself is the namespaces resource.
    if rest.is_empty() && !namespace.is_empty() {
        return Some(Target {
            res: (prefix, "namespaces".into()),
            namespace: String::new(),
            name: Some(namespace),
            sub: None,
        });
    }
    if rest.len() > 3 {
        return None;
    }
    Some(Target {
        res: (prefix, rest.first()?.to_string()),
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
    })
}

/// `pods`, `gangs.kube-gang.io`: how the API server names a resource in its messages.
pub fn qualified(res: &Resource) -> String {
    let group = res.0.strip_prefix("/apis/").and_then(|g| g.split('/').next()).unwrap_or("");
    if group.is_empty() { res.1.clone() } else { format!("{}.{group}", res.1) }
}
