//! list and watch as kube-apiserver serves them: selectors, pagination, bookmarks, timeouts,
//! compaction.

use std::time::Duration;

use futures::StreamExt;
use kube_gang_tests::{FakeApi, gang_pod, node};
use serde_json::{Value, json};

async fn fake() -> FakeApi {
    let api = FakeApi::start(&[]).await;
    for i in 0..5 {
        let mut p = gang_pod("ml", &format!("w-{i}"), if i < 3 { "a" } else { "b" }, 1);
        if i % 2 == 0 {
            p["spec"]["nodeName"] = json!("n1");
            p["status"]["phase"] = json!("Running");
        }
        api.put(p);
    }
    api.put(gang_pod("other", "x-0", "a", 1));
    api
}

async fn list(api: &FakeApi, uri: &str) -> (u16, Value) {
    let a = api.call("GET", uri, "", &Value::Null).await;
    (a.status, a.body)
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The events of a watch, until the server ends it or `wait` passes without a line.
async fn watch(api: &FakeApi, uri: &str, wait: Duration) -> (Vec<Value>, bool) {
    let resp = api.send("GET", uri, "", "").await;
    let mut body = resp.into_body().into_data_stream();
    let mut out = Vec::new();
    let mut text = String::new();
    loop {
        match tokio::time::timeout(wait, body.next()).await {
            Ok(Some(Ok(chunk))) => {
                text.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(i) = text.find('\n') {
                    out.push(serde_json::from_str(&text[..i]).unwrap());
                    text.drain(..=i);
                }
            }
            Ok(_) => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let api = fake().await;
    let (_, l) = list(&api, "/api/v1/pods?labelSelector=kube-gang.io%2Fgang%3Da").await;
    assert_eq!(names(&l), ["w-0", "w-1", "w-2", "x-0"]);
    let (_, l) = list(&api, "/api/v1/namespaces/ml/pods?fieldSelector=spec.nodeName%3D").await;
    assert_eq!(names(&l), ["w-1", "w-3"], "unbound pods, as kube-scheduler lists them");
    let (_, l) = list(&api, "/api/v1/pods?fieldSelector=spec.schedulerName%3Dgang-scheduler,status.phase%21%3DRunning&labelSelector=kube-gang.io%2Fgang+in+(b)").await;
    assert_eq!(names(&l), ["w-3"]);
    let (status, body) = list(&api, "/api/v1/pods?fieldSelector=spec.priority%3D1").await;
    assert_eq!((status, body["message"].as_str()), (400, Some("field label not supported: spec.priority")));
    assert_eq!(body["kind"], "Status");
}

#[tokio::test]
async fn limit_and_continue_page_through_a_list() {
    let api = fake().await;
    let (_, first) = list(&api, "/api/v1/pods?limit=2").await;
    assert_eq!(names(&first), ["w-0", "w-1"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 4);
    assert_eq!(first["kind"], "PodList");
    let rv = first["metadata"]["resourceVersion"].clone();
    let mut all = names(&first);
    let mut token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let mut remaining = vec![first["metadata"]["remainingItemCount"].clone()];
    loop {
        let (_, page) = list(&api, &format!("/api/v1/pods?limit=2&continue={token}")).await;
        assert_eq!(page["metadata"]["resourceVersion"], rv, "every page of one list has its version");
        all.extend(names(&page));
        remaining.push(page["metadata"]["remainingItemCount"].clone());
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    assert_eq!(all, ["w-0", "w-1", "w-2", "w-3", "w-4", "x-0"]);
    assert_eq!(remaining, [json!(4), json!(2), Value::Null], "counted, not walked; none on the last page");
    // A namespaced list pages through its namespace only, with its own count.
    let (_, first) = list(&api, "/api/v1/namespaces/ml/pods?limit=3").await;
    assert_eq!(names(&first), ["w-0", "w-1", "w-2"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 2);
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (_, rest) = list(&api, &format!("/api/v1/namespaces/ml/pods?limit=3&continue={token}")).await;
    assert_eq!(names(&rest), ["w-3", "w-4"]);
    assert!(
        rest["metadata"].get("continue").is_none() && rest["metadata"].get("remainingItemCount").is_none()
    );
    // A selective list says there is more without counting it.
    let (_, sel) = list(&api, "/api/v1/pods?limit=1&labelSelector=kube-gang.io%2Fgang%3Da").await;
    assert!(sel["metadata"]["continue"].is_string() && sel["metadata"].get("remainingItemCount").is_none());
    // A continue token from before a compaction is 410 Gone.
    let (_, first) = list(&api, "/api/v1/pods?limit=2").await;
    api.put(node("n1", "8", 0, &[]));
    api.compact();
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (status, body) = list(&api, &format!("/api/v1/pods?limit=2&continue={token}")).await;
    assert_eq!((status, body["reason"].as_str()), (410, Some("Expired")));
}

#[tokio::test]
async fn a_watch_resumes_from_a_version_with_its_selector() {
    let api = fake().await;
    let (_, l) = list(&api, "/api/v1/pods").await;
    let rv = l["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // A pending pod is bound: a watch on unbound pods sees it leave.
    let mut p = api.get("v1", "Pod", "ml", "w-1").unwrap();
    p["spec"]["nodeName"] = json!("n2");
    api.put(p);
    api.put(gang_pod("ml", "w-9", "b", 1));
    let uri = format!(
        "/api/v1/namespaces/ml/pods?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3D&timeoutSeconds=1"
    );
    let (events, ended) = watch(&api, &uri, Duration::from_secs(3)).await;
    assert!(ended, "timeoutSeconds ends the stream");
    assert_eq!(types(&events), ["DELETED", "ADDED"]);
    assert_eq!(events[0]["object"]["metadata"]["name"], "w-1");
    assert_eq!(events[1]["object"]["metadata"]["name"], "w-9");
}

#[tokio::test]
async fn bookmarks_carry_the_current_version_and_end_a_timed_out_watch() {
    let api = fake().await;
    api.bookmark_every(Duration::from_millis(100));
    let (_, l) = list(&api, "/api/v1/nodes").await;
    let rv = l["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let put_later = {
        let api = api.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            api.put(gang_pod("ml", "late", "a", 1));
        })
    };
    let uri =
        format!("/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1");
    let (events, ended) = watch(&api, &uri, Duration::from_secs(3)).await;
    put_later.await.unwrap();
    assert!(ended);
    assert!(events.len() >= 3, "{events:#?}");
    assert!(events.iter().all(|e| e["type"] == "BOOKMARK"), "no node changed: {events:#?}");
    assert_eq!(events[0]["object"]["kind"], "Node");
    let versions: Vec<u64> = events
        .iter()
        .map(|e| e["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(versions.windows(2).all(|w| w[0] <= w[1]), "{versions:?}");
    assert!(
        versions.last().unwrap() > &rv.parse::<u64>().unwrap(),
        "a pod change moves the bookmark on: {versions:?}"
    );
    // Without allowWatchBookmarks, none.
    let uri = format!("/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1");
    let (events, ended) = watch(&api, &uri, Duration::from_secs(3)).await;
    assert!(ended && events.is_empty(), "{events:#?}");
}

#[tokio::test]
async fn compaction_ends_open_watches_and_old_versions_are_gone() {
    let api = fake().await;
    let (_, l) = list(&api, "/api/v1/pods").await;
    let rv = l["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let open = {
        let api = api.clone();
        let uri = format!("/api/v1/pods?watch=true&resourceVersion={rv}");
        tokio::spawn(async move { watch(&api, &uri, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.put(gang_pod("ml", "new", "a", 1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.compact();
    let (events, ended) = open.await.unwrap();
    assert!(ended, "the server ended the watch");
    assert_eq!(types(&events), ["ADDED", "ERROR"]);
    assert_eq!(events[1]["object"]["code"], 410);
    assert_eq!(events[1]["object"]["reason"], "Expired");
    let (events, ended) =
        watch(&api, &format!("/api/v1/pods?watch=true&resourceVersion={rv}"), Duration::from_secs(2)).await;
    assert!(ended);
    assert_eq!(types(&events), ["ERROR"]);
    assert!(events[0]["object"]["message"].as_str().unwrap().starts_with("too old resource version"));
}

#[tokio::test]
async fn a_watch_without_a_version_starts_with_the_current_state() {
    let api = fake().await;
    let (events, _) =
        watch(&api, "/api/v1/namespaces/other/pods?watch=true&timeoutSeconds=1", Duration::from_secs(3))
            .await;
    assert_eq!(types(&events), ["ADDED"]);
    assert_eq!(events[0]["object"]["metadata"]["name"], "x-0");
}
