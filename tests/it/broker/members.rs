//! Members declared in cotal.toml against a real broker, tried by a foreign client with the
//! creds `cotal creds --member` mints: the broker itself refuses what the grant does not allow
//! (a post, a live subscription, a history consumer, a direct get by sequence), the `acl`
//! record holds exactly the read list, and narrowing the grant revokes the creds minted under
//! the old one.

use super::{Broker, Client, eventually, wait_for};
use crate::support::stdout;
use async_nats::jetstream;
use futures::StreamExt;
use std::time::Duration;

fn declared(read: &str) -> String {
    format!(
        "[spaces.design]\n\n[spaces.design.members.\"acme.alice\"]\nread = [{read}]\npost = [\"team.backend\"]\n"
    )
}

/// The acl record of `key` as an admin of the space reads it (`None`: absent or deleted).
fn acl(b: &Broker, admin: &Client, key: &str) -> Option<serde_json::Value> {
    b.rt.block_on(async {
        let kv = jetstream::new(admin.client.clone())
            .get_key_value("cotal_acl_design")
            .await
            .unwrap();
        kv.get(key)
            .await
            .unwrap()
            .map(|v| serde_json::from_slice(&v).unwrap())
    })
}

/// After a round trip on `client`'s connection: the server has processed every subscription
/// it sent before (a flush only writes them out).
async fn settled(client: &Client) {
    jetstream::new(client.client.clone())
        .query_account()
        .await
        .unwrap();
}

/// The filters of alice's consumer as an admin reads them (`None`: there is none).
fn consumer_filters(b: &Broker, admin: &Client) -> Option<Vec<String>> {
    b.rt.block_on(async {
        let chat = jetstream::new(admin.client.clone())
            .get_stream("CHAT_design")
            .await
            .unwrap();
        let mut c: jetstream::consumer::PullConsumer =
            chat.get_consumer("acme_alice").await.ok()?;
        Some(c.info().await.unwrap().config.filter_subjects.clone())
    })
}

/// Mint alice's creds and connect with her inbox prefix.
fn alice(b: &Broker) -> (String, Client) {
    let creds = b.mint("design", &["--member", "acme.alice"]);
    let client = b
        .connect_with_inbox(&creds, Some("_INBOX_acme_alice".into()))
        .unwrap();
    (creds, client)
}

/// The server told `client` it refused `what` on `subject` (a permissions violation), now or
/// within the wait for its next events.
fn refused(b: &Broker, client: &mut Client, what: &str, subject: &str) {
    let needle = format!("{what} \"{subject}\"");
    let seen = client
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("Permissions Violation") && e.contains(&needle));
    assert!(
        seen || wait_for(b, client, &needle),
        "the broker refuses {needle}: {:?}",
        client.events.lock().unwrap()
    );
}

#[test]
fn a_members_grant_is_enforced_by_the_broker_and_narrowing_it_revokes_its_creds() {
    let b = Broker::start(&declared("\"team.>\""));
    // The apply with the broker running writes the record (`up` only provisions, as for
    // channels); then nothing is left to apply.
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("+ member acme.alice: reads team.>; posts team.backend")
            && plan
                .contains("write 1 member acl record of \"design\" (compare-and-set; no reload)"),
        "{plan}"
    );
    b.root.apply().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let admin = b.client("design").unwrap();
    assert_eq!(
        acl(&b, &admin, "acme.alice").unwrap()["allowSubscribe"],
        serde_json::json!(["team.>"])
    );
    // A record changed by hand is drift: shown, and put back by the apply.
    b.rt.block_on(async {
        jetstream::new(admin.client.clone())
            .get_key_value("cotal_acl_design")
            .await
            .unwrap()
            .put(
                "acme.alice",
                r#"{"allowSubscribe":[">"],"revision":9,"updatedAt":1}"#.into(),
            )
            .await
            .unwrap();
    });
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("~ member acme.alice: its acl record reads [>] (changed outside cotal), put back to reads team.>; posts team.backend"),
        "{plan}"
    );
    b.root.apply().success();
    let record = acl(&b, &admin, "acme.alice").unwrap();
    assert_eq!(record["allowSubscribe"], serde_json::json!(["team.>"]));
    assert_eq!(
        record["revision"], 10,
        "one more than the record it replaced"
    );
    // A plan that touches the space lists its members with their grants, changed or not.
    b.desire(&format!(
        "{}[spaces.design.limits]\nmax_connections = 50\n",
        declared("\"team.>\"")
    ));
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains(
            "member acme.alice: reads team.>; posts team.backend (declared; no change planned)"
        ),
        "{plan}"
    );
    b.desire(&declared("\"team.>\""));
    let (old_creds, mut alice_c) = alice(&b);
    let mut seen = b.rt.block_on(async {
        let s = admin.client.subscribe("cotal.design.chat.>").await.unwrap();
        settled(&admin).await;
        s
    });
    b.rt.block_on(async {
        let js = jetstream::new(alice_c.client.clone());
        // Posting to its post channel works (stored, acknowledged); to another is refused.
        js.publish(
            "cotal.design.chat.acme.alice.team.backend",
            "build failed".into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
        alice_c
            .client
            .publish("cotal.design.chat.acme.alice.random", "nope".into())
            .await
            .unwrap();
        alice_c.client.flush().await.unwrap();
    });
    refused(
        &b,
        &mut alice_c,
        "Publish to",
        "cotal.design.chat.acme.alice.random",
    );
    let got = b.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), seen.next())
            .await
            .unwrap_or_else(|_| panic!("admin: {:?}", admin.events.lock().unwrap()))
            .unwrap()
    });
    assert_eq!(
        got.subject.as_str(),
        "cotal.design.chat.acme.alice.team.backend"
    );

    // Live: a read channel's subscription receives; another's is refused.
    let mut api = b.rt.block_on(async {
        let s = alice_c
            .client
            .subscribe("cotal.design.chat.*.*.team.api")
            .await
            .unwrap();
        settled(&alice_c).await;
        s
    });
    b.rt.block_on(async {
        let _random = alice_c
            .client
            .subscribe("cotal.design.chat.*.*.random")
            .await
            .unwrap();
        alice_c.client.flush().await.unwrap();
        let js = jetstream::new(admin.client.clone());
        js.publish("cotal.design.chat.acme.bob.team.api", "ship it".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    refused(
        &b,
        &mut alice_c,
        "Subscription to",
        "cotal.design.chat.*.*.random",
    );
    let got = b.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), api.next())
            .await
            .unwrap_or_else(|_| panic!("alice: {:?}", alice_c.events.lock().unwrap()))
            .unwrap()
    });
    assert_eq!(got.payload.as_ref(), b"ship it");

    // History: through the consumer cotal made for it (filtered to its read patterns) it reads
    // its read channels only; making a consumer of its own (whose config could deliver
    // anywhere) is refused, and so is a direct get by sequence.
    let random_seq = b.rt.block_on(async {
        jetstream::new(admin.client.clone())
            .publish("cotal.design.chat.acme.bob.random", "secret".into())
            .await
            .unwrap()
            .await
            .unwrap()
            .sequence
    });
    b.rt.block_on(async {
        let mut js = jetstream::new(alice_c.client.clone());
        js.set_timeout(Duration::from_secs(3));
        let chat = js.get_stream_no_info("CHAT_design").await.unwrap();
        assert!(
            chat.create_consumer(jetstream::consumer::pull::Config {
                name: Some("acme_alice".into()),
                filter_subject: "cotal.design.chat.*.*.random".into(),
                ..Default::default()
            })
            .await
            .is_err(),
            "a consumer of its own"
        );
        let consumer: jetstream::consumer::PullConsumer = chat
            .get_consumer("acme_alice")
            .await
            .expect("the consumer cotal made for it");
        let mut messages = consumer.fetch().max_messages(3).messages().await.unwrap();
        let mut read = Vec::new();
        while let Some(m) = messages.next().await {
            let m = m.unwrap();
            read.push(String::from_utf8(m.payload.to_vec()).unwrap());
            m.ack().await.unwrap();
        }
        assert_eq!(read, ["build failed", "ship it"], "its read channels only");
        assert!(
            chat.direct_get(random_seq).await.is_err(),
            "a direct get by sequence reaches any channel"
        );
    });
    refused(
        &b,
        &mut alice_c,
        "Publish to",
        "$JS.API.CONSUMER.CREATE.CHAT_design.acme_alice.cotal.design.chat.*.*.random",
    );
    refused(
        &b,
        &mut alice_c,
        "Publish to",
        "$JS.API.DIRECT.GET.CHAT_design",
    );
    // No reply permission: a message it sends itself with a chosen reply subject does not let
    // it publish there.
    b.rt.block_on(async {
        let mut dm = alice_c
            .client
            .subscribe("cotal.design.inst.acme.alice.>")
            .await
            .unwrap();
        settled(&alice_c).await;
        alice_c
            .client
            .publish_with_reply(
                "cotal.design.inst.acme.alice.acme.alice",
                "$JS.API.STREAM.INFO.CHAT_design",
                "{}".into(),
            )
            .await
            .unwrap();
        let m = tokio::time::timeout(Duration::from_secs(10), dm.next())
            .await
            .unwrap()
            .unwrap();
        // The copy the stream republishes may come first, without the reply subject: what
        // is tried is the same either way, a publish by alice to the subject it chose.
        let reply = m
            .reply
            .unwrap_or_else(|| "$JS.API.STREAM.INFO.CHAT_design".into());
        alice_c.client.publish(reply, "{}".into()).await.unwrap();
        alice_c.client.flush().await.unwrap();
    });
    refused(
        &b,
        &mut alice_c,
        "Publish to",
        "$JS.API.STREAM.INFO.CHAT_design",
    );

    // Narrowed: the plan says what it takes away and the live connection it closes, the apply
    // revokes the old creds (their connection is closed), and new creds carry the narrow grant.
    b.desire(&declared("\"team.api\""));
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("~ member acme.alice: reads +team.api -team.>; 1 user(s) minted under the old grant revoked; closes 1 live connection"),
        "{plan}"
    );
    b.root.apply().success();
    assert_eq!(
        acl(&b, &admin, "acme.alice").unwrap()["allowSubscribe"],
        serde_json::json!(["team.api"])
    );
    assert_eq!(
        consumer_filters(&b, &admin).unwrap(),
        ["cotal.design.chat.*.*.team.api"],
        "its consumer narrowed with the grant"
    );
    eventually(
        "the revoked creds' connection is closed",
        Duration::from_secs(10),
        || {
            (alice_c.disconnects() > 0)
                .then_some(())
                .ok_or_else(|| "still connected".to_string())
        },
    );
    assert!(
        b.connect_with_inbox(&old_creds, Some("_INBOX_acme_alice".into()))
            .is_err(),
        "creds of the old grant are refused"
    );
    let (_, mut narrow) = alice(&b);
    b.rt.block_on(async {
        let _backend = narrow
            .client
            .subscribe("cotal.design.chat.*.*.team.backend")
            .await
            .unwrap();
        narrow.client.flush().await.unwrap();
    });
    refused(
        &b,
        &mut narrow,
        "Subscription to",
        "cotal.design.chat.*.*.team.backend",
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // Removed: its users revoked first, then its record deleted; nothing left after.
    b.desire("[spaces.design]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains(
            "- member acme.alice: 1 user(s) revoked; closes 1 live connection, then its acl record deleted"
        ),
        "{plan}"
    );
    b.root.apply().success();
    assert_eq!(acl(&b, &admin, "acme.alice"), None);
    assert_eq!(consumer_filters(&b, &admin), None, "its consumer deleted");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(audit.contains("space.members_written"), "{audit}");
}
