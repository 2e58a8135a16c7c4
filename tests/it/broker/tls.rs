//! TLS on the client listener against a real nats-server, with a throwaway CA the test makes
//! (rcgen): a plaintext client is refused, a client that trusts the CA connects, a new
//! certificate at the same paths is planned naming both, applied hot with no sibling
//! disconnect and then served, mutual TLS refuses a client without a certificate while cotal
//! presents its own, and an expired or mismatched pair is refused at plan time with nothing
//! changed.

use super::{Broker, free_port};
use crate::support::{TestRoot, stdout};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

pub(super) struct Leaf {
    pub(super) cert: String,
    pub(super) key: String,
    pub(super) der: Vec<u8>,
}

pub(super) fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

pub(super) fn leaf(ca: &CertifiedIssuer<'static, KeyPair>, names: &[&str], expired: bool) -> Leaf {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    Leaf {
        cert: cert.pem(),
        key: key.serialize_pem(),
        der: cert.der().to_vec(),
    }
}

pub(super) fn write(root: &TestRoot, rel: &str, text: &str, mode: u32) {
    let path = root.file(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn install(root: &TestRoot, leaf: &Leaf) {
    write(root, "tls/server.pem", &leaf.cert, 0o644);
    write(root, "tls/server.key", &leaf.key, 0o600);
}

const TLS: &str = "[broker.tls]\ncert = \"tls/server.pem\"\nkey = \"tls/server.key\"\nca = \"tls/ca.pem\"\n\n[spaces.design]\n\n[spaces.design.members.\"acme.alice\"]\nread = [\"general\"]\npost = [\"general\"]\n\n[spaces.release]\n";

/// The connection events a client saw.
type Events = Arc<std::sync::Mutex<Vec<String>>>;

/// A client of `space` that trusts the test's CA (and presents `client` when given).
fn tls_client(
    b: &Broker,
    space: &str,
    client: Option<(&str, &str)>,
) -> Result<(async_nats::Client, Events), String> {
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = events.clone();
    let mut options = async_nats::ConnectOptions::with_credentials(&b.creds(space))
        .unwrap()
        .require_tls(true)
        .add_root_certificates(b.root.file("tls/ca.pem"))
        .max_reconnects(Some(0))
        .connection_timeout(Duration::from_secs(5))
        .event_callback(move |e| {
            let log = log.clone();
            async move { log.lock().unwrap().push(e.to_string()) }
        });
    if let Some((cert, key)) = client {
        options = options.add_client_certificate(b.root.file(cert), b.root.file(key));
    }
    let client =
        b.rt.block_on(options.connect(b.url()))
            .map_err(|e| e.to_string())?;
    Ok((client, events))
}

/// The fingerprint of the certificate the listener serves now, read in a TLS handshake of
/// the test's own (after the server's plaintext INFO, as NATS does it).
fn served(b: &Broker) -> String {
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
    let mut info = String::new();
    std::io::BufReader::new(tcp.try_clone().unwrap())
        .read_line(&mut info)
        .unwrap();
    assert!(info.contains("\"tls_required\":true"), "{info}");
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(b.root.file("tls/ca.pem")).unwrap();
    for c in rustls_pki_types::pem::PemObject::pem_slice_iter(&ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    let leaf = conn.peer_certificates().unwrap()[0].as_ref().to_vec();
    cotal::trust::digest::sha256(&leaf)
}

#[test]
fn the_client_listener_serves_tls_rotates_hot_verifies_clients_and_refuses_bad_pairs() {
    let ca = ca();
    let root = TestRoot::init();
    write(&root, "tls/ca.pem", &ca.pem(), 0o644);
    let first = leaf(&ca, &["127.0.0.1", "localhost"], false);
    install(&root, &first);
    let port = free_port();
    root.desire_on(port, TLS);
    root.apply().success();
    let conf = std::fs::read_to_string(root.file(".cotal/auth/server.conf")).unwrap();
    assert!(conf.contains("tls {"), "{conf}");
    assert!(
        !conf.contains("PRIVATE KEY"),
        "the config names the key, never holds it"
    );
    // `up` provisions every space over TLS: cotal's own connections trust the CA.
    root.cotal(&["up"]).assert().success();
    let b = Broker::running(root, port);

    // Plaintext: the server requires TLS before anything else; a plaintext CONNECT gets no PONG.
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = std::io::BufReader::new(tcp.try_clone().unwrap());
    let mut info = String::new();
    reader.read_line(&mut info).unwrap();
    assert!(info.contains("\"tls_required\":true"), "{info}");
    tcp.write_all(b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    assert!(
        !rest.contains("PONG"),
        "a plaintext client was served: {rest}"
    );

    // A client that trusts the CA connects and publishes.
    let (sibling, sibling_events) = tls_client(&b, "design", None).unwrap();
    b.rt.block_on(async {
        sibling.publish("probe", "hello".into()).await.unwrap();
        sibling.flush().await.unwrap();
    });
    assert_eq!(served(&b), cotal::trust::digest::sha256(&first.der));

    // The README's client, as a declared member over TLS: `--ca` trusts the broker's CA.
    let creds = b.root.file("alice.creds");
    std::fs::write(&creds, b.mint("design", &["--member", "acme.alice"])).unwrap();
    let pubsub = |ca: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cotal-pubsub"));
        if let Some(ca) = ca {
            cmd.arg("--ca").arg(b.root.file(ca));
        }
        cmd.arg(format!("tls://127.0.0.1:{port}"))
            .arg(&creds)
            .args(["design", "acme.alice", "general", "over tls"])
            .output()
            .unwrap()
    };
    let posted = pubsub(Some("tls/ca.pem"));
    let said = String::from_utf8_lossy(&posted.stdout);
    assert!(
        posted.status.success() && said.contains("read back: \"over tls\""),
        "{said}{}",
        String::from_utf8_lossy(&posted.stderr)
    );
    assert!(
        !pubsub(None).status.success(),
        "without --ca the broker's certificate is not trusted"
    );

    // A new certificate at the same paths: a change naming both, applied hot, then served.
    let second = leaf(&ca, &["127.0.0.1", "localhost"], false);
    install(&b.root, &second);
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    let (old, new) = (
        cotal::trust::digest::sha256(&first.der),
        cotal::trust::digest::sha256(&second.der),
    );
    assert!(
        plan.contains("the client listener's TLS certificate changes")
            && plan.contains(&old)
            && plan.contains(&new),
        "{plan}"
    );
    let applied = stdout(&b.root.apply().success());
    assert!(applied.contains("Reload confirmed"), "{applied}");
    assert_eq!(served(&b), new, "the reload serves the new certificate");
    b.rt.block_on(async {
        sibling.publish("probe", "still here".into()).await.unwrap();
        sibling.flush().await.unwrap();
    });
    assert!(
        !sibling_events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("disconnected")),
        "the sibling never noticed: {:?}",
        sibling_events.lock().unwrap()
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // The reload is confirmed by the certificate served, not by the config's digest (which
    // covers the paths only): a certificate swapped in after the plan is caught and rolled back.
    let planned = leaf(&ca, &["127.0.0.1", "localhost"], false);
    install(&b.root, &planned);
    let paused =
        crate::support::Paused::at(&b.root, &["apply", "--auto-approve"], "after-journal-open");
    let swapped = leaf(&ca, &["127.0.0.1", "localhost"], false);
    install(&b.root, &swapped);
    let (code, err) = paused.resume();
    assert_eq!(code, Some(7), "rolled back: {err}");
    assert!(
        err.contains(&format!(
            "still serves certificate {}, not {}",
            cotal::trust::digest::sha256(&swapped.der),
            cotal::trust::digest::sha256(&planned.der)
        )),
        "{err}"
    );
    // Planned again, the certificate on disk is the one applied and served.
    b.root.apply().success();
    assert_eq!(served(&b), cotal::trust::digest::sha256(&swapped.der));
    install(&b.root, &second);
    b.root.apply().success();

    // Mutual TLS: cotal presents its own certificate; a client without one is refused.
    let cotal_leaf = leaf(&ca, &["cotal"], false);
    write(&b.root, "tls/cotal.pem", &cotal_leaf.cert, 0o644);
    write(&b.root, "tls/cotal.key", &cotal_leaf.key, 0o600);
    let member = leaf(&ca, &["member"], false);
    write(&b.root, "tls/member.pem", &member.cert, 0o644);
    write(&b.root, "tls/member.key", &member.key, 0o600);
    b.desire(&TLS.replace(
        "ca = \"tls/ca.pem\"\n",
        "ca = \"tls/ca.pem\"\nverify = true\nclient_cert = \"tls/cotal.pem\"\nclient_key = \"tls/cotal.key\"\n",
    ));
    b.root.apply().success();
    assert!(
        tls_client(&b, "release", None).is_err(),
        "a client without a certificate is refused under verify"
    );
    tls_client(&b, "release", Some(("tls/member.pem", "tls/member.key")))
        .expect("a client with a certificate the CA signed connects");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // An expired pair, and a key that is not the certificate's: refused at plan time.
    let expired = leaf(&ca, &["127.0.0.1"], true);
    install(&b.root, &expired);
    let mid = b.root.snapshot();
    for args in [&["plan"][..], &["apply", "--auto-approve"][..]] {
        let out = b.root.cotal(args).assert().code(3);
        let err = crate::support::stderr(&out);
        assert!(
            err.contains("cotal.toml:") && err.contains("expired at 2021-01-01"),
            "{err}"
        );
    }
    assert_eq!(b.root.snapshot(), mid, "nothing changed");
    write(&b.root, "tls/server.pem", &second.cert, 0o644);
    write(&b.root, "tls/server.key", &first.key, 0o600);
    let out = b.root.cotal(&["plan"]).assert().code(3);
    let err = crate::support::stderr(&out);
    assert!(err.contains("does not match the certificate"), "{err}");
    assert!(
        !err.contains("PRIVATE KEY"),
        "the key is never printed: {err}"
    );
    // A private key others may read is refused.
    install(&b.root, &second);
    std::fs::set_permissions(
        b.root.file("tls/server.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let err = crate::support::stderr(&b.root.cotal(&["plan"]).assert().code(3));
    assert!(err.contains("readable by every user"), "{err}");
    std::fs::set_permissions(
        b.root.file("tls/server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // Put right, the plan is empty again.
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // Turning TLS off is a restart, not a reload: refused while the broker runs.
    b.desire("[spaces.design]\n\n[spaces.release]\n");
    let err = crate::support::stderr(&b.root.cotal(&["plan"]).assert().code(3));
    assert!(
        err.contains("client TLS is turned off while the broker runs"),
        "{err}"
    );
}

#[test]
fn a_browser_client_connects_over_wss_with_the_brokers_certificate() {
    let ca = ca();
    let root = TestRoot::init();
    write(&root, "tls/ca.pem", &ca.pem(), 0o644);
    install(&root, &leaf(&ca, &["127.0.0.1", "localhost"], false));
    let (port, ws) = (free_port(), free_port());
    root.desire_on(
        port,
        &TLS.replace(
            "[spaces.design]",
            &format!("[broker.websocket]\nport = {ws}\n\n[spaces.design]"),
        ),
    );
    root.apply().success();
    root.cotal(&["up"]).assert().success();
    let b = Broker::running(root, port);
    let conf = std::fs::read_to_string(b.root.file(".cotal/auth/server.conf")).unwrap();
    assert!(
        conf.contains("websocket {") && !conf.contains("no_tls"),
        "{conf}"
    );
    let creds = b.creds("design");
    let ca_file = b.root.file("tls/ca.pem");
    b.rt.block_on(async {
        let client = async_nats::ConnectOptions::with_credentials(&creds)
            .unwrap()
            .add_root_certificates(ca_file)
            .connect(format!("wss://127.0.0.1:{ws}"))
            .await
            .expect("a wss client trusting the CA connects with the space's creds");
        let mut sub = client.subscribe("cotal.wss.probe").await.unwrap();
        client
            .publish("cotal.wss.probe", "over wss".into())
            .await
            .unwrap();
        client.flush().await.unwrap();
        let got = futures::StreamExt::next(&mut sub).await.unwrap();
        assert_eq!(&got.payload[..], b"over wss");
    });
}

#[test]
fn cotal_reaches_its_broker_by_address_and_checks_the_certificate_by_its_declared_name() {
    // The certificate names only `broker.test`, which does not resolve here: cotal dials
    // 127.0.0.1 and checks the certificate against the name `names` declares.
    let ca = ca();
    let root = TestRoot::init();
    write(&root, "tls/ca.pem", &ca.pem(), 0o644);
    install(&root, &leaf(&ca, &["broker.test"], false));
    let port = free_port();
    let declared = TLS.replace(
        "ca = \"tls/ca.pem\"\n",
        "ca = \"tls/ca.pem\"\nnames = [\"broker.test\"]\n",
    );
    // Without `names`, the listener's own address is checked, and refused at plan time.
    root.desire_on(port, TLS);
    let err = crate::support::stderr(&root.cotal(&["plan"]).assert().code(3));
    assert!(err.contains("does not cover \"127.0.0.1\""), "{err}");
    root.desire_on(port, &declared);
    root.apply().success();
    // `up` provisions every space over TLS: it checks the certificate by the declared name.
    root.cotal(&["up"]).assert().success();
    let b = Broker::running(root, port);
    let status = b.status();
    assert_eq!(status["spaces"][0]["servable"], true, "{status}");
}

#[test]
fn a_route_certificate_only_for_servers_is_refused_at_its_line() {
    let root = TestRoot::init();
    let authority = ca();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &authority).unwrap();
    write(&root, "tls/ca.pem", &authority.pem(), 0o644);
    write(&root, "tls/route.pem", &cert.pem(), 0o644);
    write(&root, "tls/route.key", &key.serialize_pem(), 0o600);
    let desired = cotal::desired::parse(
        "version = 1\n[cluster]\n[[cluster.nodes]]\nname = \"n1\"\nport = 4222\ncluster_port = 6222\n[[cluster.nodes]]\nname = \"n2\"\nport = 4223\ncluster_port = 6223\n[cluster.tls]\ncert = \"tls/route.pem\"\nkey = \"tls/route.key\"\nca = \"tls/ca.pem\"\n[spaces.a]\n",
        "cotal.toml",
    )
    .unwrap();
    let settings = desired.topology.route_tls.as_ref().unwrap();
    let store = cotal::store::Root::at(root.path()).unwrap();
    let routes = cotal::tls::observe(&store, settings, cotal::tls::Use::Routes);
    assert_eq!(
        routes.problems,
        [
            "cotal.toml:12:8: the certificate tls/route.pem is not usable both as a server and as a client (its extended key usage lacks clientAuth): every node presents it on the routes it opens too"
        ]
    );
    // The same certificate serves a client listener.
    let listener = cotal::tls::observe(&store, settings, cotal::tls::Use::Listener);
    assert!(listener.problems.is_empty(), "{:?}", listener.problems);

    // Both usages, signed by the CA: accepted.
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let both = params.signed_by(&key, &authority).unwrap();
    write(&root, "tls/route.pem", &both.pem(), 0o644);
    write(&root, "tls/route.key", &key.serialize_pem(), 0o600);
    let routes = cotal::tls::observe(&store, settings, cotal::tls::Use::Routes);
    assert!(routes.problems.is_empty(), "{:?}", routes.problems);

    // Signed by another CA: the nodes would refuse each other's routes, so the plan refuses it.
    let foreign = leaf(&ca(), &["127.0.0.1"], false);
    write(&root, "tls/route.pem", &foreign.cert, 0o644);
    write(&root, "tls/route.key", &foreign.key, 0o600);
    let routes = cotal::tls::observe(&store, settings, cotal::tls::Use::Routes);
    assert_eq!(routes.problems.len(), 2, "{:?}", routes.problems);
    for (problem, side) in routes.problems.iter().zip(["client", "server"]) {
        assert!(
            problem.starts_with(&format!(
                "cotal.toml:12:8: the certificate tls/route.pem is not accepted as a route's {side} by the CA tls/ca.pem:"
            )),
            "{problem}"
        );
    }
}
