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
