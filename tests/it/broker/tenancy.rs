//! What a tenant can do with the creds `cotal creds` hands out: a member's rights, revocation,
//! expiry. Every refusal is proven by the broker's own permissions-violation or authorization
//! error, not by a timeout alone.

use super::{Broker, Client, TWO, wait_for};
use crate::support::stdout;
use async_nats::jetstream;
use futures::StreamExt;
use std::time::Duration;

/// Wait (bounded) until the broker reported a permissions violation naming `subject`.
fn violation(b: &Broker, client: &mut Client, subject: &str) -> bool {
    let already = client
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("Permissions Violation") && e.contains(subject));
    already || wait_for(b, client, &format!("Publish to \"{subject}\""))
}

#[test]
fn a_member_publishes_subscribes_reads_streams_and_writes_keys_but_cannot_change_the_space() {
    let b = Broker::start(TWO);
    let admin = b.client("design").unwrap();
    // Another user's durable consumer, which the member must not delete.
    b.rt.block_on(async {
        let js = jetstream::new(admin.client.clone());
        let chat = js.get_stream("CHAT_design").await.unwrap();
        chat.create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("bob".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    });
    let creds = b.mint("design", &["--user", "alice"]);
    let mut alice = b
        .connect_with_inbox(&creds, Some("_INBOX_alice".into()))
        .unwrap();
    b.rt.block_on(async {
        let c = &alice.client;
        // Core publish and subscribe in the space's namespace.
        let mut sub = c.subscribe("cotal.design.presence.>").await.unwrap();
        c.publish("cotal.design.presence.alice", "here".into())
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.payload.as_ref(), b"here");
        // Publish into a stream, read it back through its own consumer.
        let js = jetstream::new(c.clone());
        js.publish("cotal.design.chat.general", "hello".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let chat = js.get_stream("CHAT_design").await.unwrap();
        let consumer = chat
            .create_consumer(jetstream::consumer::pull::Config {
                durable_name: Some("alice".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let m = batch.next().await.unwrap().unwrap();
        assert_eq!(m.payload.as_ref(), b"hello");
        m.ack().await.unwrap();
        // Keys of the space's buckets.
        let kv = js.get_key_value("cotal_channels_design").await.unwrap();
        kv.put("general", "topic".into()).await.unwrap();
        assert_eq!(kv.get("general").await.unwrap().unwrap().as_ref(), b"topic");
    });
    // Everything that changes a stream, a bucket or another user's consumer is refused by the
    // broker; the attempts run together.
    let denied = [
        "$JS.API.STREAM.DELETE.CHAT_design",
        "$JS.API.STREAM.UPDATE.CHAT_design",
        "$JS.API.STREAM.PURGE.CHAT_design",
        "$JS.API.STREAM.CREATE.EVIL",
        "$JS.API.STREAM.DELETE.KV_cotal_channels_design",
        "$JS.API.CONSUMER.DELETE.CHAT_design.bob",
        "$JS.API.CONSUMER.DURABLE.CREATE.CHAT_design.mallory",
    ];
    b.rt.block_on(async {
        let c = alice.client.clone();
        futures::future::join_all(denied.iter().map(|subject| {
            let c = c.clone();
            async move {
                let r = tokio::time::timeout(
                    Duration::from_secs(3),
                    c.request(subject.to_string(), "{}".into()),
                )
                .await;
                assert!(!matches!(r, Ok(Ok(_))), "{subject} answered a member");
            }
        }))
        .await;
    });
    for subject in denied {
        assert!(
            violation(&b, &mut alice, subject),
            "the broker refused {subject}: {:?}",
            alice.events.lock().unwrap()
        );
    }
    // The unnamed create subject, with a body naming another user's consumer (nats-server
    // would update it), and any inbox but its own (other users' deliveries and replies).
    let unnamed = "$JS.API.CONSUMER.CREATE.CHAT_design";
    b.rt.block_on(async {
        let body = r#"{"stream_name":"CHAT_design","config":{"name":"bob","description":"hijacked","ack_policy":"explicit","deliver_policy":"all"}}"#;
        alice
            .client
            .publish(unnamed, body.into())
            .await
            .unwrap();
        let _sub = alice.client.subscribe("_INBOX.>").await.unwrap();
        alice.client.flush().await.unwrap();
    });
    assert!(
        violation(&b, &mut alice, unnamed),
        "{:?}",
        alice.events.lock().unwrap()
    );
    let other_inbox = "Subscription to \"_INBOX.>\"";
    assert!(
        alice
            .events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains(other_inbox))
            || wait_for(&b, &mut alice, other_inbox),
        "{:?}",
        alice.events.lock().unwrap()
    );
    // The space is as it was: the stream with its message, the other user's consumer, the bucket.
    b.rt.block_on(async {
        let js = jetstream::new(admin.client.clone());
        let mut chat = js.get_stream("CHAT_design").await.unwrap();
        assert_eq!(chat.info().await.unwrap().state.messages, 1);
        assert_eq!(
            chat.consumer_info("bob").await.unwrap().config.description,
            None,
            "the other user's consumer was not changed"
        );
        assert!(js.get_stream("KV_cotal_channels_design").await.is_ok());
        assert!(js.get_stream("EVIL").await.is_err());
    });
}

#[test]
fn a_revoked_user_is_disconnected_and_refused_while_the_other_users_stay() {
    let b = Broker::start(TWO);
    let alice_creds = b.mint("design", &["--user", "alice"]);
    let bob_creds = b.mint("design", &["--user", "bob"]);
    let mut alice = b.connect(&alice_creds).unwrap();
    let bob = b.connect(&bob_creds).unwrap();
    let release = b.client("release").unwrap();

    b.root
        .cotal(&["creds", "revoke", "design", "--user", "alice"])
        .assert()
        .success();
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "design"])
            .assert()
            .success(),
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("alice") && l.contains("revoking")),
        "{listed}"
    );
    insta::assert_snapshot!("revocation_plan", b.run(&["plan", "--detailed-exitcode"]));
    b.root.apply().success();

    assert!(
        wait_for(&b, &mut alice, "disconnected"),
        "the revoked user's connection was closed: {:?}",
        alice.events.lock().unwrap()
    );
    let again = b.rt.block_on(
        async_nats::ConnectOptions::with_credentials(&alice_creds)
            .unwrap()
            .connect(b.url()),
    );
    assert!(
        again
            .err()
            .is_some_and(|e| e.to_string().contains("authorization violation")),
        "the revoked user is refused"
    );
    b.rt.block_on(async {
        bob.client
            .publish("cotal.design.chat.general", "still here".into())
            .await
            .unwrap();
        bob.client.flush().await.unwrap();
    });
    assert_eq!(bob.disconnects(), 0, "{:?}", bob.events.lock().unwrap());
    assert_eq!(release.disconnects(), 0);
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "design"])
            .assert()
            .success(),
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("alice") && l.contains("revoked ")),
        "{listed}"
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let audit = stdout(
        &b.root
            .cotal(&["audit", "--space", "design"])
            .assert()
            .success(),
    );
    for event in ["creds.minted", "creds.revoked", "space.users_revoked"] {
        assert!(audit.contains(event), "{event} audited: {audit}");
    }
    // A seed is a 58-character nkey starting S (then O, A or U); public keys, which the audit
    // holds, may contain "SU" anywhere.
    let seed = audit
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| w.len() == 58 && w.starts_with('S'));
    assert_eq!(seed, None, "no seed in the audit");
}

#[test]
fn creds_past_their_expiry_are_closed_and_refused() {
    let b = Broker::start(TWO);
    // Long enough for a loaded CI machine to connect before the expiry; the wait below is for
    // the broker's own event, bounded.
    let creds = b.mint("design", &["--user", "temp", "--expires", "10s"]);
    let mut temp = b.connect(&creds).unwrap();
    assert!(
        wait_for(&b, &mut temp, "disconnected"),
        "the broker closed the connection at its expiry: {:?}",
        temp.events.lock().unwrap()
    );
    // nats-server's expiry has one-second granularity and is inclusive at connect: in the
    // second of the expiry a connect is accepted and closed at once. Either way the creds
    // cannot hold a connection.
    match b.connect(&creds) {
        Err(e) => {
            let e = e.to_lowercase();
            assert!(e.contains("expired") || e.contains("authorization"), "{e}")
        }
        Ok(mut again) => assert!(
            wait_for(&b, &mut again, "disconnected"),
            "the broker closed the expired creds' connection: {:?}",
            again.events.lock().unwrap()
        ),
    }
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "design"])
            .assert()
            .success(),
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("temp") && l.contains("expired")),
        "{listed}"
    );
}

/// A tenant that breaks its own space (an admin deletes one of its streams and holds every
/// connection its limit allows) fails only its own provisioning: the space added beside it is
/// provisioned and servable, the state is written, the apply exits 8 (partly applied) naming
/// the space and why, and the next apply, once the tenant lets go, finishes only what is left.
#[test]
fn one_tenants_failure_is_its_own_and_every_other_space_is_applied() {
    let b = Broker::start("[spaces.alpha.limits]\nmax_connections = 2\n");
    let admin = b.creds("alpha");
    let mut first = b.connect(&admin).unwrap();
    let deleted = b.rt.block_on(async {
        let js = async_nats::jetstream::new(first.client.clone());
        let names: Vec<String> = js
            .stream_names()
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|n| n.unwrap())
            .collect();
        let victim = names.into_iter().min().expect("a stream of alpha");
        js.delete_stream(&victim).await.unwrap();
        victim
    });
    let mut second = b.connect(&admin).unwrap();
    assert!(
        b.connect(&admin).is_err(),
        "alpha holds its every connection"
    );

    b.desire("[spaces.alpha.limits]\nmax_connections = 2\n\n[spaces.beta]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("provision \"alpha\"") || plan.contains(&deleted),
        "{plan}"
    );
    let out = b.root.apply().code(8);
    let (o, e) = (stdout(&out), crate::support::stderr(&out));
    let said = format!("{o}{e}");
    assert!(
        said.contains("partly applied: 1 space step(s) failed")
            && said.contains("provision \"alpha\"")
            && said.contains("maximum account active connections exceeded"),
        "{said}"
    );
    let failures = said.split("partly applied:").nth(1).unwrap_or_default();
    assert!(
        !failures.contains("beta"),
        "beta's provisioning is not a failure: {failures}"
    );
    let beta = b.space_status("beta").unwrap();
    assert_eq!(beta["servable"], true, "{beta}");
    assert_eq!(beta["streams"], 15, "{beta}");
    let state = std::fs::read_to_string(b.root.file(".cotal/state.json")).unwrap();
    assert!(state.contains("\"beta\""), "the state is written: {state}");
    let audit = stdout(&b.root.cotal(&["audit"]).assert().success());
    assert!(audit.contains("space.step_failed"), "{audit}");
    // Only alpha's provisioning is left, and once alpha lets go of its connections it is done.
    let left = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(!left.contains("beta"), "{left}");
    // The tenant lets go: each connection drained and closed (the test's runtime runs the
    // connection's task only while it is driven, so the close is awaited as an event).
    for client in [&mut first, &mut second] {
        b.rt.block_on(client.client.drain()).unwrap();
        assert!(
            wait_for(&b, client, "closed"),
            "{:?}",
            client.events.lock().unwrap()
        );
    }
    // The broker frees the slots as it sees the connections close: until then each apply is
    // partly applied again, and then it is done.
    super::eventually(
        "alpha is provisioned once it let go",
        Duration::from_secs(20),
        || {
            let out = b.root.apply();
            let out = out.get_output();
            match out.status.code() {
                Some(0) => Ok(()),
                other => Err(format!(
                    "exit {other:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                        .split("partly applied:")
                        .nth(1)
                        .unwrap_or_default()
                )),
            }
        },
    );
    assert_eq!(b.space_status("alpha").unwrap()["streams"], 15);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// An admin that seals one of its own streams, or sets `deny_delete` on another, steers only
/// its own space: nats-server never lets anyone undo either in place, so the plan names each
/// in a warning (stream, lock, fix) instead of an update that would fail every apply, and
/// another space's change applies.
#[test]
fn a_sealed_or_delete_denied_stream_is_a_warning_and_never_stops_an_apply() {
    let b = Broker::start("[spaces.alpha]\n");
    let admin = b.client("alpha").unwrap();
    let (sealed, denied) = b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        let names: Vec<String> = js
            .stream_names()
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .map(|n| n.unwrap())
            .filter(|n| !n.starts_with("KV_"))
            .collect();
        let (first, second) = (names[0].clone(), names[1].clone());
        let mut config = js
            .get_stream(&first)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .config
            .clone();
        config.sealed = true;
        js.update_stream(config).await.unwrap();
        let mut config = js
            .get_stream(&second)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .config
            .clone();
        config.deny_delete = true;
        js.update_stream(config).await.unwrap();
        (first, second)
    });
    b.desire("[spaces.alpha]\n\n[spaces.beta]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains(&format!(
            "{sealed} of \"alpha\" was set sealed by a user of the space"
        )) && plan.contains(&format!("{denied} of \"alpha\" was set deny_delete = true"))
            && plan.contains("delete that stream with an admin of the space"),
        "{plan}"
    );
    assert!(
        !plan.contains(&format!("update {sealed}")),
        "no update that would fail: {plan}"
    );
    b.root.apply().success();
    assert_eq!(b.space_status("beta").unwrap()["servable"], true);
    let alpha = b.space_status("alpha").unwrap();
    assert_eq!(alpha["servable"], false, "{alpha}");
    // Nothing is left to do but what the operator must: the plan warns and has no step.
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}
