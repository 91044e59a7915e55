//! The webhook's own certificate management against the strict fake API server
//! (`kube-gang-tests`): a whole CA rotation on a simulated clock, by two replicas, with a restart
//! mid-rotation, seeded with the Secret and the webhook configurations the manifests ship. After
//! every step, each replica's serving certificate is verified (rustls, as a client would) against
//! the `caBundle` of every webhook entry of both configurations, at the simulated time: no client
//! may ever see a certificate from a CA it does not trust. And every request the webhook made is
//! one the manifests' RBAC grants.

use std::sync::Arc;

use gang_webhook::managed::{Manager, Round, Target};
use gang_webhook::rotation::{Change, Policy};
use kube_gang_tests::FakeApi;
use serde_json::Value;

const NS: &str = "kube-gang-system";
const DAY: i64 = 86_400;

fn manifests(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/base").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| {
            let v: Value = serde::Deserialize::deserialize(d).unwrap();
            v
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind(docs: &[Value], kind: &str) -> Vec<Value> {
    docs.iter().filter(|d| d["kind"] == kind).cloned().collect()
}

async fn cluster() -> FakeApi {
    let fake = FakeApi::start(&[
        ("/api/v1", "secrets"),
        ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"),
        ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
    ])
    .await;
    for c in manifests("webhook-configurations.yaml") {
        fake.put(c);
    }
    // The empty Secret the manifests ship, in the namespace kustomize gives it.
    for mut s in of_kind(&manifests("webhook.yaml"), "Secret") {
        s["metadata"]["namespace"] = NS.into();
        fake.put(s);
    }
    fake
}

fn target() -> Target {
    Target {
        namespace: NS.into(),
        secret: "gang-webhook-tls".into(),
        configuration: "gang-webhook".into(),
        names: gang_webhook::certs::dns_names("gang-webhook", NS, &[]),
    }
}

fn replica(fake: &FakeApi) -> Manager {
    let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
    Manager::new(client, target(), Policy::default())
}

/// Every `caBundle` of every webhook entry of both configurations, decoded.
fn published(fake: &FakeApi) -> Vec<(String, String)> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        let c = fake.get("admissionregistration.k8s.io/v1", kind, "", "gang-webhook").unwrap();
        for w in c["webhooks"].as_array().unwrap() {
            let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or("");
            let pem = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            out.push((w["name"].as_str().unwrap().to_string(), String::from_utf8(pem).unwrap()));
        }
    }
    out
}

/// Whether `leaf_pem` verifies against `bundle` for the Service's name at `now`, as a client would.
fn verifies(leaf_pem: &str, bundle: &str, now: i64) -> bool {
    use rustls::client::danger::ServerCertVerifier as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut bundle.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    if roots.is_empty() {
        return false;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .unwrap();
    let leaf = rustls_pemfile::certs(&mut leaf_pem.as_bytes()).next().unwrap().unwrap();
    let name = rustls::pki_types::ServerName::try_from("gang-webhook.kube-gang-system.svc").unwrap();
    let at = rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(now as u64));
    verifier.verify_server_cert(&leaf, &[], &name, &[], at).is_ok()
}

/// No client sees an unknown CA: every replica's serving certificate verifies against every
/// published bundle.
fn assert_trusted(fake: &FakeApi, served: &[(&str, &str)], now: i64, step: &str) {
    let bundles = published(fake);
    let entries: usize = manifests("webhook-configurations.yaml")
        .iter()
        .map(|c| c["webhooks"].as_array().unwrap().len())
        .sum();
    assert_eq!(bundles.len(), entries, "{step}: every webhook entry of both configurations");
    for (replica, leaf) in served {
        for (hook, bundle) in &bundles {
            assert!(verifies(leaf, bundle, now), "{step}: {replica}'s certificate is not trusted by {hook}");
        }
    }
}

fn cas_in(bundle: &str) -> usize {
    bundle.matches("BEGIN CERTIFICATE").count()
}

#[tokio::test]
async fn a_ca_rotation_by_two_replicas_never_shows_a_client_an_unknown_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = cluster().await;
    let (a, b) = (replica(&fake), replica(&fake));
    let t0 = jiff::Timestamp::now().as_second();

    // Both replicas start at once: one creates, the other's write is refused (409) and it reads
    // what the first wrote.
    let (ra, rb) = tokio::join!(a.round(t0), b.round(t0));
    let (ra, rb): (Round, Round) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.material, rb.material, "both replicas serve what the Secret holds");
    let created: Vec<&Round> = [&ra, &rb].into_iter().filter(|r| !r.changes.is_empty()).collect();
    assert_eq!(created.len(), 1, "one replica creates the CA: {:?} {:?}", ra.changes, rb.changes);
    assert!(matches!(created[0].changes[0], Change::Created(_)));
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.method == "PUT" && r.path.ends_with("/secrets/gang-webhook-tls") && r.status == 409),
        "the second write carried the resourceVersion it read and was refused"
    );
    let (mut leaf_a, mut leaf_b) = (ra.material.tls_crt.clone(), rb.material.tls_crt.clone());
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t0, "created");
    let ca1 = ra.material.ca.clone().unwrap();

    // Nothing is due: a round writes nothing.
    let writes = |fake: &FakeApi| fake.requests().iter().filter(|r| r.method != "GET").count();
    let before = writes(&fake);
    let r = a.round(t0 + 60).await.unwrap();
    assert!(r.changes.is_empty() && r.injected == 0, "{:?}", r.changes);
    assert_eq!(writes(&fake), before, "a round with nothing due sends no write");

    // 61 days on, the serving certificate is within 30 days of its end: issued again by CA 1.
    let t = t0 + 61 * DAY;
    let r = b.round(t).await.unwrap();
    assert!(
        matches!(r.changes.as_slice(), [Change::ServingIssued(why)] if why == "near its end"),
        "{:?}",
        r.changes
    );
    assert_eq!(r.material.ca.as_ref(), Some(&ca1));
    leaf_b = r.material.tls_crt.clone();
    assert_ne!(leaf_a, leaf_b);
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t, "serving certificate renewed");
    assert_eq!(a.round(t + 5).await.unwrap().material.tls_crt, leaf_b, "a reloads it");
    let t = t0 + 200 * DAY;
    leaf_a = a.round(t).await.unwrap().material.tls_crt;
    leaf_b = b.round(t + 5).await.unwrap().material.tls_crt;
    assert_eq!(leaf_a, leaf_b);

    // 276 days on, CA 1 is within 90 days of its end: CA 2 is published beside it.
    let t_pub = t0 + 276 * DAY;
    let r = a.round(t_pub).await.unwrap();
    assert!(r.changes.contains(&Change::NextCaPublished), "{:?}", r.changes);
    assert_eq!(r.injected, 2, "both configurations get the bundle of CA 1 and CA 2");
    assert_eq!(r.material.ca.as_ref(), Some(&ca1), "CA 1 still signs");
    let ca2 = r.material.next_ca.clone().unwrap();
    assert!(published(&fake).iter().all(|(_, b)| cas_in(b) == 2));
    leaf_a = r.material.tls_crt.clone();
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t_pub, "CA 2 published");

    // Replica a restarts mid-rotation: a new process knows only what the Secret holds, and it
    // does not promote CA 2 before the overlap has passed.
    drop(a);
    let a = replica(&fake);
    let r = a.round(t_pub + 100).await.unwrap();
    assert!(r.changes.is_empty(), "too early to promote: {:?}", r.changes);
    assert_eq!(r.material.next_ca.as_ref(), Some(&ca2), "the restarted replica carries on with CA 2");

    // One webhook entry lost CA 2 (its caBundle as it was before): CA 2 is not promoted while a
    // client may not trust it; the round writes the bundle back instead.
    let mut v = fake
        .get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "gang-webhook")
        .unwrap();
    {
        use base64::Engine as _;
        v["webhooks"][0]["clientConfig"]["caBundle"] =
            base64::engine::general_purpose::STANDARD.encode(&ca1.cert_pem).into();
    }
    fake.put(v);
    let t = t_pub + 400;
    let r = b.round(t).await.unwrap();
    assert!(!r.changes.contains(&Change::CaPromoted), "{:?}", r.changes);
    assert_eq!(r.injected, 1, "the configuration that lost CA 2 gets it back");
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t, "bundle restored");

    // Now every entry trusts CA 2: b promotes it and serves a certificate it signed; a, not yet
    // round again, still serves CA 1's, which every entry still trusts.
    let t_promote = t + 10;
    let r = b.round(t_promote).await.unwrap();
    assert!(r.changes.contains(&Change::CaPromoted), "{:?}", r.changes);
    assert_eq!(r.material.ca.as_ref(), Some(&ca2));
    leaf_b = r.material.tls_crt.clone();
    assert!(!verifies(&leaf_b, &ca1.cert_pem, t_promote), "b's certificate is CA 2's");
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t_promote, "CA 2 promoted, a not yet reloaded");
    leaf_a = a.round(t_promote + 30).await.unwrap().material.tls_crt;
    assert_eq!(leaf_a, leaf_b, "a serves what the Secret holds after its next round");

    // Restarted again between promotion and retirement: CA 1 leaves the bundle only once the
    // overlap has passed since the promotion.
    drop(a);
    let a = replica(&fake);
    let r = a.round(t_promote + 200).await.unwrap();
    assert!(r.changes.is_empty(), "{:?}", r.changes);
    assert!(published(&fake).iter().all(|(_, b)| cas_in(b) == 2), "CA 1 still trusted");
    let t_retire = t_promote + 300;
    let r = a.round(t_retire).await.unwrap();
    assert_eq!(r.changes, vec![Change::Retired(1)]);
    assert_eq!(r.injected, 2);
    assert!(published(&fake).iter().all(|(_, b)| cas_in(b) == 1), "only CA 2 is trusted now");
    leaf_b = b.round(t_retire + 1).await.unwrap().material.tls_crt;
    assert_trusted(&fake, &[("a", &leaf_a), ("b", &leaf_b)], t_retire, "CA 1 retired");
    // The check above can fail: a certificate of CA 1 is refused by every entry now.
    let old = gang_webhook::certs::issue(&ca1, &target().names, t_retire - 10, t_retire + DAY).unwrap().0;
    assert!(published(&fake).iter().all(|(_, b)| !verifies(&old, b, t_retire)));

    // Every request was one the manifests' RBAC grants, and the rules name exactly these objects.
    assert_requests_granted(&fake);
}

/// The RBAC rules the manifests give the webhook's ServiceAccount.
fn granted() -> Vec<(String, Value)> {
    let docs = manifests("webhook-cert-rbac.yaml");
    let mut rules = Vec::new();
    for role in docs.iter().filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole") {
        let namespace = if role["kind"] == "Role" { NS } else { "" };
        for r in role["rules"].as_array().unwrap() {
            rules.push((namespace.to_string(), r.clone()));
        }
    }
    // Bound to the webhook's ServiceAccount.
    for binding in docs.iter().filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding") {
        assert_eq!(binding["subjects"][0]["name"], "gang-webhook", "{binding}");
    }
    rules
}

fn assert_requests_granted(fake: &FakeApi) {
    let rules = granted();
    let has = |r: &Value, f: &str, v: &str| r[f].as_array().unwrap().iter().any(|x| x == v);
    for req in fake.requests() {
        let t = kube_gang_tests::server::parse_path(&req.path).unwrap();
        let group = t.res.0.strip_prefix("/apis/").and_then(|g| g.split('/').next()).unwrap_or("");
        let verb = match req.method.as_str() {
            "GET" if t.name.is_some() => "get",
            "GET" => "list",
            "PUT" => "update",
            "POST" => "create",
            "PATCH" => "patch",
            "DELETE" => "delete",
            other => panic!("{other}"),
        };
        let name = t.name.clone().unwrap_or_default();
        let ok = rules.iter().any(|(ns, r)| {
            (ns.is_empty() || *ns == t.namespace)
                && has(r, "apiGroups", group)
                && has(r, "resources", &t.res.1)
                && has(r, "verbs", verb)
                && r.get("resourceNames")
                    .is_none_or(|n| n.as_array().unwrap().iter().any(|x| x == name.as_str()))
        });
        assert!(
            ok,
            "{} {} ({verb} {}/{name}) is not granted by manifests/base/webhook-cert-rbac.yaml",
            req.method, req.path, t.res.1
        );
    }
    // Exactly these objects: every rule names them.
    for (_, r) in &rules {
        assert!(
            r["resourceNames"].as_array().is_some_and(|n| n.len() == 1),
            "a rule not bound to one name: {r}"
        );
        assert!(!has(r, "verbs", "create") && !has(r, "verbs", "delete") && !has(r, "verbs", "list"), "{r}");
    }
}

/// A Secret someone broke (its CA key replaced) is started afresh rather than served broken,
/// and a Secret holding what the API server would refuse is never written.
#[tokio::test]
async fn a_broken_secret_is_replaced_and_writes_stay_within_the_api_servers_rules() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = cluster().await;
    let a = replica(&fake);
    let t0 = jiff::Timestamp::now().as_second();
    let first = a.round(t0).await.unwrap().material;
    let mut s = fake.get("v1", "Secret", NS, "gang-webhook-tls").unwrap();
    {
        use base64::Engine as _;
        let other = gang_webhook::certs::new_ca(t0, t0 + DAY).unwrap();
        s["data"]["ca.key"] = base64::engine::general_purpose::STANDARD.encode(other.key_pem).into();
    }
    fake.put(s);
    let r = a.round(t0 + 10).await.unwrap();
    assert!(
        matches!(r.changes.as_slice(), [Change::Created(why)] if why.contains("ca.key is not the key of ca.crt")),
        "{:?}",
        r.changes
    );
    assert_ne!(r.material.ca, first.ca);
    assert_trusted(&fake, &[("a", &r.material.tls_crt)], t0 + 10, "recreated");
    assert!(
        fake.requests().iter().all(|q| q.status < 400 || q.status == 409),
        "{:?}",
        fake.requests().iter().map(|q| (&q.method, &q.path, q.status)).collect::<Vec<_>>()
    );
}

/// The whole webhook (`serve`, as `main` runs it) with `--serving-cert=managed` against the fake,
/// from the empty Secret the manifests ship: it makes its CA, writes the bundle into both
/// configurations, and serves, over real TLS, a certificate that a client trusting exactly that
/// bundle accepts for the Service's name, with no other step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_serves_a_certificate_its_published_bundle_vouches_for() {
    use base64::Engine as _;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, probe) = (free(), free());
    let args = <gang_webhook::Args as clap::Parser>::parse_from([
        "gang-webhook",
        "--serving-cert=managed",
        "--cert-namespace",
        NS,
        "--gang-lookup=false",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--probe-listen",
        &format!("127.0.0.1:{probe}"),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(gang_webhook::serve(args, async move {
        let _ = stopped.await;
    }));
    // Its bundle, once it has written one into the configurations.
    let mut bundle = String::new();
    for _ in 0..200 {
        let c = fake
            .get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "gang-webhook")
            .unwrap();
        if let Some(b) = c["webhooks"][0]["clientConfig"]["caBundle"].as_str() {
            bundle = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).unwrap()).unwrap();
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(bundle.contains("BEGIN CERTIFICATE"), "no caBundle written");
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut bundle.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let client =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("gang-webhook.kube-gang-system.svc").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(client)).connect(name, tcp).await;
    assert!(tls.is_ok(), "the served certificate is trusted by the published bundle: {:?}", tls.err());
    let _ = stop.send(());
    served.await.unwrap().unwrap();
}
