//! Evictions, off the loop. Each cycle hands over the evictions its plan wants ([`run`]); each
//! victim is sent once and, when the API server refuses it for now (a PodDisruptionBudget's 429,
//! a server error), retried on its own schedule — after the server's `Retry-After`, backing off
//! exponentially — without holding up the loop or any other victim. The loop hears which
//! victims are blocked and why ([`Blocked`]), so the preempting gang's message can say.
//!
//! Evictions go through a client without kube's built-in retries: those would retry a 429 up to
//! 15 times inside one request, honouring `Retry-After` (10 s for a PodDisruptionBudget), and
//! the victim's own schedule is the point here.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use scheduler_core::model::PodKey;
use scheduler_core::plan::Eviction;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lease::Standing;

/// First retry after a refusal without `Retry-After`; doubled per attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between two attempts on one victim.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long an eviction that was made is not sent again (the watch may still show the pod).
const DONE_FOR: Duration = Duration::from_secs(30);

/// What the loop hears about a victim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Its eviction is refused for now, with the API server's reason (naming the
    /// PodDisruptionBudget when one blocks it).
    By(PodKey, String),
    /// No longer blocked (evicted, gone, or no longer wanted).
    No(PodKey),
}

/// The answer to one eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Evicted, or nothing left to evict (the pod is gone or was replaced: 404, or 409 on the
    /// UID precondition).
    Done,
    /// Refused for now: retry no sooner than `retry_after` (when the server said), with `why`.
    Refused { why: String, retry_after: Option<Duration> },
    /// Not sent (this replica may not act).
    NotSent,
}

/// Reads the API server's answer to an eviction. A 429 from a PodDisruptionBudget carries the
/// budget in a `DisruptionBudget` cause (`The disruption budget web needs 2 healthy pods and
/// has 2 currently`), which is what a user needs to see; otherwise the Status message.
pub fn answer(status: u16, retry_after: Option<&str>, body: &[u8]) -> Answer {
    if (200..300).contains(&status) || status == 404 || status == 409 {
        return Answer::Done;
    }
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let cause =
        parsed.as_ref().and_then(|s| s.pointer("/details/causes")).and_then(Value::as_array).and_then(
            |causes| {
                causes
                    .iter()
                    .find(|c| c.get("reason").and_then(Value::as_str) == Some("DisruptionBudget"))
                    .and_then(|c| c.get("message").and_then(Value::as_str))
            },
        );
    let message = parsed.as_ref().and_then(|s| s.get("message")).and_then(Value::as_str);
    let why = cause.or(message).map_or_else(|| format!("HTTP {status}"), |m| format!("{m} (HTTP {status})"));
    let header = retry_after.and_then(|v| v.trim().parse::<u64>().ok());
    let detail =
        parsed.as_ref().and_then(|s| s.pointer("/details/retryAfterSeconds")).and_then(Value::as_u64);
    Answer::Refused { why, retry_after: header.or(detail).map(Duration::from_secs) }
}

/// When to try a victim again after `attempts` refusals: the server's word if it gave one,
/// else an exponential backoff — whichever is later.
pub fn next_try(attempts: u32, retry_after: Option<Duration>) -> Duration {
    let factor = 1u32.checked_shl(attempts.saturating_sub(1).min(16)).unwrap_or(u32::MAX);
    let backoff = FIRST_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF);
    retry_after.map_or(backoff, |r| r.max(backoff).min(MAX_BACKOFF.max(r)))
}

#[derive(Debug)]
struct Victim {
    eviction: Eviction,
    attempts: u32,
    not_before: Instant,
    in_flight: bool,
    blocked: bool,
}

/// Sends the evictions `wanted` holds (the last plan's), each on its own schedule, until `stop`.
pub async fn run(
    client: kube::Client,
    mut wanted: watch::Receiver<Vec<Eviction>>,
    blocked: mpsc::UnboundedSender<Blocked>,
    standing: watch::Receiver<Standing>,
    concurrency: usize,
    stop: CancellationToken,
) {
    let mut victims: BTreeMap<PodKey, Victim> = BTreeMap::new();
    let mut done: HashMap<PodKey, Instant> = HashMap::new();
    let mut flying = FuturesUnordered::new();
    loop {
        // Send what is due, up to `concurrency` at once.
        let now = Instant::now();
        let mut slots = concurrency.saturating_sub(flying.len());
        for (pod, v) in victims.iter_mut() {
            if slots == 0 {
                break;
            }
            if v.in_flight || v.not_before > now {
                continue;
            }
            v.in_flight = true;
            slots -= 1;
            let (client, standing, e) = (client.clone(), standing.clone(), v.eviction.clone());
            let pod = pod.clone();
            flying.push(async move { (pod, send(&client, &standing, &e).await) });
        }
        let wake = victims
            .values()
            .filter(|v| !v.in_flight)
            .map(|v| v.not_before)
            .min()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            () = stop.cancelled() => return,
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = Instant::now();
                done.retain(|_, at| now.duration_since(*at) < DONE_FOR);
                let list = wanted.borrow_and_update().clone();
                let keep: std::collections::BTreeSet<&PodKey> = list.iter().map(|e| &e.pod).collect();
                victims.retain(|pod, v| {
                    let stays = keep.contains(pod) || v.in_flight;
                    if !stays && v.blocked {
                        let _ = blocked.send(Blocked::No(pod.clone()));
                    }
                    stays
                });
                for e in list {
                    if done.contains_key(&e.pod) {
                        continue;
                    }
                    victims.entry(e.pod.clone()).or_insert(Victim {
                        eviction: e,
                        attempts: 0,
                        not_before: now,
                        in_flight: false,
                        blocked: false,
                    });
                }
            }
            Some((pod, answer)) = flying.next(), if !flying.is_empty() => {
                let Some(v) = victims.get_mut(&pod) else { continue };
                v.in_flight = false;
                match answer {
                    Answer::Done => {
                        if v.blocked {
                            let _ = blocked.send(Blocked::No(pod.clone()));
                        }
                        victims.remove(&pod);
                        done.insert(pod, Instant::now());
                    }
                    Answer::Refused { why, retry_after } => {
                        v.attempts = v.attempts.saturating_add(1);
                        let wait = next_try(v.attempts, retry_after);
                        v.not_before = Instant::now() + wait;
                        tracing::info!(pod = %pod, attempts = v.attempts, retry_in = ?wait, reason = %why, "eviction refused; retrying later");
                        v.blocked = true;
                        let _ = blocked.send(Blocked::By(pod, why));
                    }
                    // Not leading: drop everything; a leader's next plan says what it wants.
                    Answer::NotSent => {
                        victims.clear();
                    }
                }
            }
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Sends one eviction; leadership is checked again after the client's rate limiter (a guard).
async fn send(client: &kube::Client, standing: &watch::Receiver<Standing>, e: &Eviction) -> Answer {
    if !standing.borrow().may_act() {
        return Answer::NotSent;
    }
    let r = crate::apply::eviction(e);
    let body = serde_json::to_vec(&r.body).unwrap_or_default();
    let request = match http::Request::builder()
        .method(r.method)
        .uri(&r.path)
        .header("content-type", r.content_type)
        .extension(crate::apply::guard(standing))
        .body(kube::client::Body::from(body))
    {
        Ok(req) => req,
        Err(err) => return Answer::Refused { why: err.to_string(), retry_after: None },
    };
    match client.send(request).await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let retry_after =
                resp.headers().get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(String::from);
            let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
            answer(status, retry_after.as_deref(), &bytes)
        }
        Err(err) if crate::ratelimit::not_sent(&err) => Answer::NotSent,
        Err(err) => Answer::Refused { why: err.to_string(), retry_after: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_budget_refusal_names_the_budget_and_its_retry_after() {
        // The shape kube-apiserver answers with when a PodDisruptionBudget allows no disruption
        // (pkg/registry/core/pod/storage/eviction.go): 429, a DisruptionBudget cause.
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}]}});
        let a = answer(429, Some("10"), &serde_json::to_vec(&body).unwrap());
        assert_eq!(
            a,
            Answer::Refused {
                why: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently (HTTP 429)"
                    .into(),
                retry_after: Some(Duration::from_secs(10)),
            }
        );
        let plain = answer(500, None, b"not json");
        assert_eq!(plain, Answer::Refused { why: "HTTP 500".into(), retry_after: None });
        for gone in [200, 201, 404, 409] {
            assert_eq!(answer(gone, None, b""), Answer::Done, "{gone}");
        }
    }

    #[test]
    fn retries_back_off_and_never_come_before_the_servers_word() {
        assert_eq!(next_try(1, None), FIRST_BACKOFF);
        assert_eq!(next_try(3, None), FIRST_BACKOFF * 4);
        assert_eq!(next_try(40, None), MAX_BACKOFF);
        assert_eq!(next_try(1, Some(Duration::from_secs(10))), Duration::from_secs(10));
        assert_eq!(next_try(12, Some(Duration::from_secs(1))), MAX_BACKOFF);
    }
}
