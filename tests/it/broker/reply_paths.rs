//! The boundaries cotal hands out, crossed as an attacker would (issue 54): nats-server checks
//! the subject a client publishes to, never the reply subject it attaches, and the answers the
//! broker produces (a stream's acknowledgement, a direct get, a pull, an ack's answer, a `$SYS`
//! reply) go to that reply subject. Each principal cotal hands out (a declared member, a
//! space's membership observer and connection evictor, a monitoring user) aims every answer it
//! can get at the JetStream API, another member's channel, a bucket key, the object store,
//! `$SYS`, another member's inbox, another tenant's events and cotal's own inbox. Each attempt
//! is checked twice: its answer is seen arriving in the principal's own account (by a witness
//! user of that account, so the attempt ran and its answer is accounted for), and its target
//! is untouched (streams and their messages, consumers, the acl record, the channels another
//! member posts to). Beside each, the legitimate use still works.

use super::{Broker, Client};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;

/// The issue's space: alice reads general and team.>, posts general; bob reads and posts
/// general and secret; carol reads general and posts nothing. And a second tenant.
const SPACES: &str = r#"evictor_creds = true

[spaces.alpha]
[spaces.alpha.members."acme.alice"]
read = ["general", "team.>"]
post = ["general"]
[spaces.alpha.members."acme.bob"]
read = ["general", "secret"]
post = ["general", "secret"]
[spaces.alpha.members."acme.carol"]
read = ["general"]
post = []

[spaces.beta]
"#;

/// Where every answer is aimed: the JetStream API (a consumer that would deliver the space's
/// DMs, a stream's deletion and purge), a bucket key (alice's own acl record), another
/// member's channel, the object store, `$SYS` and another member's inbox.
const TARGETS: [&str; 9] = [
    "$JS.API.CONSUMER.CREATE.DM_alpha.evil",
    "$JS.API.CONSUMER.DURABLE.CREATE.DM_alpha.evil",
    "$JS.API.STREAM.DELETE.INBOX_alpha",
    "$JS.API.STREAM.PURGE.TASK_alpha",
    "$KV.cotal_acl_alpha.acme.alice",
    "cotal.alpha.chat.acme.bob.secret",
    "$O.cotal_artifacts_alpha.C.evil",
    "$SYS.REQ.SERVER.PING",
    "_INBOX_acme_bob.x",
];

/// What the space's account holds that an attack could change: each stream's message count,
/// the consumers of its DM stream, alice's acl record and the last post to bob's `secret`.
#[derive(Debug, PartialEq)]
struct Holdings {
    streams: BTreeMap<String, u64>,
    dm_consumers: Vec<String>,
    acl: Option<Vec<u8>>,
    secret: Option<(u64, Vec<u8>)>,
}

fn holdings(b: &Broker, admin: &Client) -> Holdings {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        let mut streams = BTreeMap::new();
        let mut names = js.stream_names();
        while let Some(name) = names.next().await {
            let name = name.unwrap();
            let mut s = js.get_stream(&name).await.unwrap();
            streams.insert(name, s.info().await.unwrap().state.messages);
        }
        let dm = js.get_stream("DM_alpha").await.unwrap();
        let mut dm_consumers = Vec::new();
        let mut consumers = dm.consumer_names();
        while let Some(c) = consumers.next().await {
            dm_consumers.push(c.unwrap());
        }
        let acl = js
            .get_key_value("cotal_acl_alpha")
            .await
            .unwrap()
            .get("acme.alice")
            .await
            .unwrap()
            .map(|v| v.to_vec());
        let chat = js.get_stream("CHAT_alpha").await.unwrap();
        let secret = chat
            .get_last_raw_message_by_subject("cotal.alpha.chat.acme.bob.secret")
            .await
            .ok()
            .map(|last| (last.sequence, last.payload.to_vec()));
        Holdings {
            streams,
            dm_consumers,
            acl,
            secret,
        }
    })
}

/// A witness in the side account `account` of `space`: a user that subscribes to everything
/// there and may publish only its own ready mark (which nothing imports), so every answer
/// that lands in the account is seen; minted with the space's signing key, which its members'
/// accounts list. Returned once the broker delivers it its own mark: its subscription is in
/// force.
fn member_witness(b: &Broker, space: &str, account: &str) -> (Client, async_nats::Subscriber) {
    let root = cotal::store::Root::at(b.root.path()).unwrap();
    let record =
        cotal::store::account_record::load(&root, &cotal::model::SpaceName::parse(space).unwrap())
            .unwrap();
    let creds = cotal::mint::user(
        account,
        &record.account.signing_seed,
        "witness",
        cotal::trust::jwt::Permissions {
            publish: cotal::trust::jwt::Permission {
                allow: vec![READY.into()],
                deny: Vec::new(),
            },
            subscribe: cotal::trust::jwt::Permission {
                allow: vec![">".into()],
                deny: Vec::new(),
            },
            resp: None,
        },
        Some(Duration::from_secs(600)),
        None,
    )
    .unwrap()
    .creds;
    let client = b.connect(&creds).unwrap();
    let mut sub =
        b.rt.block_on(async { client.client.subscribe(">").await.unwrap() });
    b.rt.block_on(async {
        client.client.publish(READY, "".into()).await.unwrap();
        client.client.flush().await.unwrap();
        let m = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("the witness hears its own mark")
            .unwrap();
        assert_eq!(m.subject.as_str(), READY);
    });
    (client, sub)
}

/// The witness's ready mark.
const READY: &str = "witness.ready";

/// A round trip on `client`'s connection (a request it may make, answered): the broker has
/// processed everything the client sent before, its subscriptions included, and whatever
/// it sent the client before the answer is in hand. (A client's flush only writes out.)
fn settled(b: &Broker, client: &Client, request: &str) {
    b.rt.block_on(async {
        client
            .client
            .request(request.to_string(), "{}".into())
            .await
            .unwrap_or_else(|e| panic!("{request}: {e}"));
    });
}

/// The side account of `role` of `space` (`observer`, `evictor`, `member:OWNER.ACTOR`).
fn side(b: &Broker, space: &str, role: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.root.account_record(space)).unwrap()).unwrap();
    v["sideAccounts"][role]["pub"].as_str().unwrap().to_string()
}

/// Wait until `sub` has seen a message on each of `subjects` (the answers of the attempts);
/// the messages seen are returned by subject. A message a consumer delivers carries its
/// stream's subject (nats-server shows a delivery under it whatever the subject it was sent
/// to), so up to `deliveries` of those (their reply an ack of `consumer`) stand for that many
/// subjects of `subjects` not seen by name.
fn landed(
    b: &Broker,
    sub: &mut async_nats::Subscriber,
    subjects: &[&str],
) -> BTreeMap<String, Vec<u8>> {
    landed_with_deliveries(b, sub, subjects, None)
}

fn landed_with_deliveries(
    b: &Broker,
    sub: &mut async_nats::Subscriber,
    subjects: &[&str],
    consumer: Option<&str>,
) -> BTreeMap<String, Vec<u8>> {
    let mut seen = BTreeMap::new();
    let mut deliveries = 0;
    b.rt.block_on(async {
        while subjects.iter().filter(|s| seen.contains_key(**s)).count() + deliveries
            < subjects.len()
        {
            let m = tokio::time::timeout(Duration::from_secs(10), sub.next())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "answers seen in the principal's account: {:?} and {deliveries} deliveries, expected on {subjects:?}",
                        seen.keys().collect::<Vec<_>>()
                    )
                })
                .unwrap();
            let delivered = consumer.is_some_and(|c| {
                m.reply
                    .as_ref()
                    .is_some_and(|r| r.starts_with(&format!("$JS.ACK.{c}.")))
            });
            if delivered {
                deliveries += 1;
            } else {
                seen.insert(m.subject.to_string(), m.payload.to_vec());
            }
        }
    });
    seen
}

/// Publish `subject` with `body` on `client` once for each reply subject of `replies`.
fn aim(b: &Broker, client: &Client, subject: &str, body: &str, replies: &[&str]) {
    b.rt.block_on(async {
        for reply in replies {
            client
                .client
                .publish_with_reply(
                    subject.to_string(),
                    reply.to_string(),
                    body.to_string().into(),
                )
                .await
                .unwrap();
        }
        client.client.flush().await.unwrap();
    });
}

/// What `reader`, subscribed to `filter` (the subscription in force first), hears live once
/// `writer` stores `body` on `subject` (a request: the stream's acknowledgement is the answer).
fn heard_live(
    b: &Broker,
    reader: &Client,
    filter: &str,
    writer: &Client,
    subject: &str,
    body: &str,
) -> async_nats::Message {
    let mut sub =
        b.rt.block_on(async { reader.client.subscribe(filter.to_string()).await.unwrap() });
    settled(b, reader, "$JS.API.INFO");
    b.rt.block_on(async {
        writer
            .client
            .request(subject.to_string(), body.to_string().into())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap_or_else(|_| panic!("{filter}: {subject} heard live"))
            .unwrap()
    })
}

fn member(b: &Broker, who: &str) -> Client {
    let creds = b.mint("alpha", &["--member", &format!("acme.{who}")]);
    b.connect_with_inbox(&creds, Some(format!("_INBOX_acme_{who}")))
        .unwrap()
}

#[test]
fn a_member_aims_every_answer_it_can_get_and_reaches_nothing_past_its_grant() {
    let b = Broker::start(SPACES);
    b.root.apply().success(); // the acl records and consumers, with the broker running
    let admin = b.client("alpha").unwrap();
    // Something for every target to lose: a task, an inbox delivery, a DM, bob's secret.
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        for (subject, body) in [
            ("cotal.alpha.svc.build", "task"),
            ("cotal.alpha.dinbox.acme.bob", "delivery"),
            ("cotal.alpha.inst.acme.bob.acme.dave", "a DM for bob"),
        ] {
            js.publish(subject, body.into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    });
    let alice = member(&b, "alice");
    let bob = member(&b, "bob");
    let carol = member(&b, "carol");
    b.rt.block_on(async {
        bob.client
            .request("cotal.alpha.chat.acme.bob.secret", "SECRET".into())
            .await
            .unwrap();
    });
    let before = holdings(&b, &admin);

    // The legitimate use first: alice reads general live (bob's post), and her DMs live (the
    // stream's copy republished to her account).
    let heard = heard_live(
        &b,
        &alice,
        "cotal.alpha.chat.*.*.general",
        &bob,
        "cotal.alpha.chat.acme.bob.general",
        "from bob",
    );
    assert_eq!(heard.payload.as_ref(), b"from bob");
    let heard = heard_live(
        &b,
        &alice,
        "cotal.alpha.inst.acme.alice.>",
        &bob,
        "cotal.alpha.inst.acme.alice.acme.bob",
        "hi alice",
    );
    assert_eq!(heard.payload.as_ref(), b"hi alice");
    assert_eq!(
        heard.subject.as_str(),
        "cotal.alpha.inst.acme.alice.acme.bob"
    );

    // alice: a body of her choosing stored in her channel, then every answer aimed.
    let alice_account = side(&b, "alpha", "member:acme.alice");
    let (_w, mut witness) = member_witness(&b, "alpha", &alice_account);
    for body in [
        r#"{"stream_name":"DM_alpha","config":{"durable_name":"evil","deliver_subject":"_INBOX_acme_alice.dm","ack_policy":"none"}}"#,
        "{}",
        "",
    ] {
        b.rt.block_on(async {
            alice
                .client
                .request(
                    "cotal.alpha.chat.acme.alice.general",
                    body.to_string().into(),
                )
                .await
                .unwrap();
        });
        // A direct get of her own last post, its answer aimed at each target.
        aim(
            &b,
            &alice,
            "$JS.API.DIRECT.GET.CHAT_alpha.cotal.alpha.chat.acme.alice.general",
            "",
            &TARGETS,
        );
        let seen = landed(&b, &mut witness, &TARGETS);
        assert_eq!(
            seen["$JS.API.STREAM.PURGE.TASK_alpha"],
            body.as_bytes(),
            "the answer (her chosen body) landed in her own account"
        );
    }
    // Her history through her consumer (the legitimate use), and an ack of what it delivered
    // with its answer aimed; then pulls of it that answer at once (a message, or a status when
    // none is left), each answer aimed.
    let ack = b.rt.block_on(async {
        let js = async_nats::jetstream::new(alice.client.clone());
        let consumer: async_nats::jetstream::consumer::PullConsumer = js
            .get_stream_no_info("CHAT_alpha")
            .await
            .unwrap()
            .get_consumer("acme_alice")
            .await
            .unwrap();
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let m = batch.next().await.expect("her history").unwrap();
        assert_eq!(
            m.payload.as_ref(),
            b"from bob",
            "her read channels' history"
        );
        m.reply.clone().unwrap().to_string()
    });
    aim(&b, &alice, &ack, "", &["$JS.API.STREAM.DELETE.DLV_alpha"]);
    landed(&b, &mut witness, &["$JS.API.STREAM.DELETE.DLV_alpha"]);
    aim(
        &b,
        &alice,
        "$JS.API.CONSUMER.MSG.NEXT.CHAT_alpha.acme_alice",
        r#"{"batch":1,"no_wait":true}"#,
        &TARGETS,
    );
    landed_with_deliveries(&b, &mut witness, &TARGETS, Some("CHAT_alpha.acme_alice"));
    // Its stream's info and the account's, fixed JSON, aimed too.
    aim(&b, &alice, "$JS.API.INFO", "", &TARGETS);
    landed(&b, &mut witness, &TARGETS);
    aim(
        &b,
        &alice,
        "$JS.API.CONSUMER.INFO.CHAT_alpha.acme_alice",
        "",
        &TARGETS,
    );
    landed(&b, &mut witness, &TARGETS);
    // A post's acknowledgement (fixed JSON, the stream's and the sequence), aimed too: each
    // post is stored, its acknowledgement lands in her account.
    aim(
        &b,
        &alice,
        "cotal.alpha.chat.acme.alice.general",
        "acked",
        &TARGETS,
    );
    let acks = landed(&b, &mut witness, &TARGETS);
    assert!(
        String::from_utf8_lossy(&acks["$JS.API.STREAM.DELETE.INBOX_alpha"]).contains("\"seq\""),
        "a PubAck: {acks:?}"
    );

    // carol, who may post nowhere: her presence key, her only write, read back with every
    // answer aimed.
    let carol_account = side(&b, "alpha", "member:acme.carol");
    let (_cw, mut carol_witness) = member_witness(&b, "alpha", &carol_account);
    b.rt.block_on(async {
        carol
            .client
            .request("$KV.cotal_presence_alpha.acme.carol", "{}".into())
            .await
            .unwrap();
    });
    aim(
        &b,
        &carol,
        "$JS.API.DIRECT.GET.KV_cotal_presence_alpha.$KV.cotal_presence_alpha.acme.carol",
        "",
        &TARGETS,
    );
    landed(&b, &mut carol_witness, &TARGETS);

    // Nothing of the space's account moved but what the members were allowed to write: their
    // own posts and carol's presence key.
    let after = holdings(&b, &admin);
    let mut expected = before;
    // bob's post, alice's three, and her posts whose acknowledgements she aimed
    *expected.streams.get_mut("CHAT_alpha").unwrap() += 4 + TARGETS.len() as u64;
    *expected.streams.get_mut("DM_alpha").unwrap() += 1; // bob's DM to alice
    *expected.streams.get_mut("KV_cotal_presence_alpha").unwrap() += 1;
    assert_eq!(after, expected, "every target untouched");
    assert!(
        after.dm_consumers.is_empty(),
        "no consumer delivers the DMs"
    );

    // Still the legitimate use: history through her consumer, the presence directory and the
    // registry read, and a post where she may not is refused by the broker.
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(alice.client.clone());
        let presence = js.get_key_value("cotal_presence_alpha").await.unwrap();
        assert_eq!(
            presence.get("acme.carol").await.unwrap().unwrap().as_ref(),
            b"{}"
        );
        let registry = js.get_key_value("cotal_channels_alpha").await.unwrap();
        assert_eq!(
            registry
                .get(cotal::space::channels::DEFAULTS_KEY)
                .await
                .unwrap()
                .as_deref(),
            Some(cotal::space::channels::SEEDED_DEFAULTS.as_bytes()),
            "the registry's keys read"
        );
    });
}

#[test]
fn a_spaces_observer_evictor_and_a_monitoring_user_answer_only_into_their_own_account() {
    let b = Broker::start(SPACES);
    b.root.apply().success(); // the acl records, with the broker running
    let admin = b.client("alpha").unwrap();
    let before = holdings(&b, &admin);
    let alpha = b.root.account_pub("alpha");
    let beta = b.root.account_pub("beta");
    let file = |space: &str, f: &str| {
        std::fs::read_to_string(
            b.root
                .file(&format!(".cotal/space.{}/{f}", hex::encode(space))),
        )
        .unwrap()
    };
    // beta's observer listens to its own space's connects: nothing of alpha's answers may
    // reach it.
    let beta_observer = b
        .connect_with_inbox(
            &file("beta", "membership-observer.creds"),
            Some(format!("_INBOX_{beta}")),
        )
        .unwrap();
    let mut beta_events = b.rt.block_on(async {
        beta_observer
            .client
            .subscribe(format!("$SYS.ACCOUNT.{beta}.CONNECT"))
            .await
            .unwrap()
    });
    let beta_connz = format!("$SYS.REQ.ACCOUNT.{beta}.CONNZ");
    settled(&b, &beta_observer, &beta_connz);
    // cotal's own control inbox: a control user of the system account listening where they
    // are aimed sees nothing of them either.
    let control = b
        .connect(
            &cotal::mint::system_user(
                &cotal::store::Root::at(b.root.path()).unwrap(),
                "cotal-test-control",
                cotal::space::permissions::control(),
            )
            .unwrap(),
        )
        .unwrap();
    let mut control_inbox = b.rt.block_on(async {
        control
            .client
            .subscribe("_INBOX.cotal.control")
            .await
            .unwrap()
    });
    settled(&b, &control, "$SYS.REQ.SERVER.PING.VARZ");
    let targets = [
        format!("$SYS.ACCOUNT.{beta}.CONNECT"),
        "_INBOX.cotal.control".to_string(),
        "$SYS.REQ.SERVER.PING".to_string(),
        format!("$JS.API.STREAM.DELETE.CHAT_{}", "alpha"),
        "$JS.API.STREAM.PURGE.CHAT_alpha".to_string(),
        "$KV.cotal_acl_alpha.acme.alice".to_string(),
    ];
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();

    // The observer: its own space's CONNZ and connects, the legitimate use.
    let observer = b
        .connect_with_inbox(
            &file("alpha", "membership-observer.creds"),
            Some(format!("_INBOX_{alpha}")),
        )
        .unwrap();
    let mut own_events = b.rt.block_on(async {
        observer
            .client
            .subscribe(format!("$SYS.ACCOUNT.{alpha}.CONNECT"))
            .await
            .unwrap()
    });
    let connz = format!("$SYS.REQ.ACCOUNT.{alpha}.CONNZ");
    settled(&b, &observer, &connz);
    let _late = b.client("alpha").unwrap();
    b.rt.block_on(async {
        let e = tokio::time::timeout(Duration::from_secs(10), own_events.next())
            .await
            .expect("the observer hears its space's connects")
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&e.payload).unwrap();
        assert_eq!(v["client"]["acc"], alpha.as_str());
    });
    // Its CONNZ answer aimed at its own space's connects lands in its own account, where it
    // hears it itself (its template lets it subscribe there, and nowhere else but its inbox).
    aim(
        &b,
        &observer,
        &connz,
        "{}",
        &[&format!("$SYS.ACCOUNT.{alpha}.CONNECT")],
    );
    // (Connect events the broker sends on that subject too may come first.)
    b.rt.block_on(async {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(10), own_events.next())
                .await
                .expect("the answer landed in the observer's own account")
                .unwrap();
            if String::from_utf8_lossy(&m.payload).contains("\"connections\"") {
                break;
            }
        }
    });
    aimed_then_answered(&b, &observer, &connz, "{}", &targets);

    // The evictor: its space's CONNZ and KICK, their answers aimed the same way. The kick
    // names no client: it answers with an error, and kicks nobody.
    let evictor = b
        .connect_with_inbox(
            &file("alpha", "connection-evictor.creds"),
            Some(format!("_INBOX_{alpha}")),
        )
        .unwrap();
    aimed_then_answered(&b, &evictor, &connz, "{}", &targets);
    let server = evictor.client.server_info().server_id;
    aimed_then_answered(
        &b,
        &evictor,
        &format!("$SYS.REQ.SERVER.{server}.KICK"),
        r#"{"cid":999999}"#,
        &targets,
    );

    // A monitoring user: every read-only answer it may get, aimed the same way; it still
    // reads what it is for.
    let monitor = b.mint_monitor();
    let monitor = b.connect(&monitor).unwrap();
    for request in ["$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.SERVER.PING.CONNZ"] {
        let answer = aimed_then_answered(&b, &monitor, request, "{}", &targets);
        let v: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert!(v["data"]["server_id"].is_string(), "{v}");
    }

    // Every answer aimed above was sent before the last one each got back (each handler
    // answers in order). None reached beta's observer nor cotal's inbox: after a round trip on
    // each, whatever the broker sent them before is in hand, and there is nothing.
    settled(&b, &beta_observer, &beta_connz);
    assert!(
        futures::FutureExt::now_or_never(beta_events.next()).is_none(),
        "beta's observer received an answer aimed at its events"
    );
    settled(&b, &control, "$SYS.REQ.SERVER.PING.VARZ");
    assert!(
        futures::FutureExt::now_or_never(control_inbox.next()).is_none(),
        "cotal's control inbox received an answer aimed at it"
    );
    // And alpha's data is untouched.
    assert_eq!(holdings(&b, &admin), before, "every target untouched");
}

/// Aim the answers of `subject` at each of `targets`, then ask it once with the client's own
/// inbox, and return that answer: a system handler answers in order, so once it is in hand
/// every answer aimed before was sent wherever it went.
fn aimed_then_answered(
    b: &Broker,
    client: &Client,
    subject: &str,
    body: &str,
    targets: &[&str],
) -> Vec<u8> {
    aim(b, client, subject, body, targets);
    b.rt.block_on(async {
        client
            .client
            .request(subject.to_string(), body.to_string().into())
            .await
            .unwrap_or_else(|e| panic!("{subject}: {e}"))
            .payload
            .to_vec()
    })
}

#[test]
fn an_admin_cannot_delete_or_purge_what_cotal_provisions_through_the_api() {
    let b = Broker::start("[spaces.ops]\n");
    let mut admin = b.client("ops").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        js.publish("cotal.ops.svc.build", "task".into())
            .await
            .unwrap()
            .await
            .unwrap();
        for subject in [
            "$JS.API.STREAM.DELETE.TASK_ops",
            "$JS.API.STREAM.PURGE.TASK_ops",
        ] {
            admin.client.publish(subject, "".into()).await.unwrap();
        }
        admin.client.flush().await.unwrap();
    });
    for subject in [
        "$JS.API.STREAM.DELETE.TASK_ops",
        "$JS.API.STREAM.PURGE.TASK_ops",
    ] {
        assert!(
            super::wait_for(&b, &mut admin, &format!("Publish to \"{subject}\"")),
            "{subject} refused: {:?}",
            admin.events.lock().unwrap()
        );
    }
    let admin = b.client("ops").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        let mut task = js.get_stream("TASK_ops").await.expect("TASK_ops kept");
        assert_eq!(task.info().await.unwrap().state.messages, 1, "not purged");
        // Its own stream, it still deletes.
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "MINE".into(),
            subjects: vec!["mine.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        js.delete_stream("MINE").await.unwrap();
    });
}

/// The issue's cluster attack: a space's observer loops its CONNZ with every node's STATSZ
/// subject as the reply, which (from the system account) made every node look like it had
/// no JetStream, so no R3 stream could be placed. From the observer's own account the
/// answers land where nothing listens: the system account never sees them (a control user
/// listening on every node's STATSZ gets only the nodes' own), and the cluster still places a
/// new space's R3 streams and a tenant's own R3 stream.
#[test]
fn an_observer_aiming_its_answers_at_the_nodes_statsz_leaves_the_cluster_placing_r3_streams() {
    let b = Broker::start_cluster("[spaces.alpha]\n");
    let alpha = b.root.account_pub("alpha");
    let control = b
        .connect(
            &cotal::mint::system_user(
                &cotal::store::Root::at(b.root.path()).unwrap(),
                "cotal-test-control",
                cotal::space::permissions::control(),
            )
            .unwrap(),
        )
        .unwrap();
    let (mut statsz, ids) = b.rt.block_on(async {
        let sub = control
            .client
            .subscribe("$SYS.SERVER.*.STATSZ")
            .await
            .unwrap();
        // Every node's id, from each node's own answer to a ping.
        let inbox = control.client.new_inbox();
        let mut answers = control.client.subscribe(inbox.clone()).await.unwrap();
        control
            .client
            .publish_with_reply("$SYS.REQ.SERVER.PING.VARZ", inbox, "{}".into())
            .await
            .unwrap();
        let mut ids = std::collections::BTreeSet::new();
        while ids.len() < 3 {
            let m = tokio::time::timeout(Duration::from_secs(10), answers.next())
                .await
                .expect("every node answers the ping")
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            ids.insert(v["server"]["id"].as_str().unwrap().to_string());
        }
        (sub, ids)
    });
    let targets: Vec<String> = ids
        .iter()
        .map(|id| format!("$SYS.SERVER.{id}.STATSZ"))
        .collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    let observer = b
        .connect_with_inbox(
            &std::fs::read_to_string(b.root.file(&format!(
                ".cotal/space.{}/membership-observer.creds",
                hex::encode("alpha")
            )))
            .unwrap(),
            Some(format!("_INBOX_{alpha}")),
        )
        .unwrap();
    // The loop, then one answer in hand: every aimed answer before it was sent.
    for _ in 0..50 {
        aim(
            &b,
            &observer,
            &format!("$SYS.REQ.ACCOUNT.{alpha}.CONNZ"),
            "{}",
            &targets,
        );
    }
    aimed_then_answered(
        &b,
        &observer,
        &format!("$SYS.REQ.ACCOUNT.{alpha}.CONNZ"),
        "{}",
        &targets,
    );
    // The system account saw none of them: after a round trip, every STATSZ it has in hand
    // is a node's own.
    settled(&b, &control, "$SYS.REQ.SERVER.PING.VARZ");
    while let Some(Some(m)) = futures::FutureExt::now_or_never(statsz.next()) {
        let text = String::from_utf8_lossy(&m.payload);
        assert!(
            !text.contains("\"connections\""),
            "an observer's CONNZ reached {}: {text}",
            m.subject
        );
    }
    // The cluster still places R3 streams: a new space's, provisioned by the apply, and a
    // tenant's own.
    b.desire("[spaces.alpha]\n\n[spaces.beta]\n");
    b.root.apply().success();
    let beta = b.space_status("beta").unwrap();
    assert_eq!(beta["streams"], 15, "{beta}");
    assert_eq!(beta["replicas"], 3, "{beta}");
    let admin = b.client("alpha").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(admin.client.clone());
        let mut mine = js
            .create_stream(async_nats::jetstream::stream::Config {
                name: "MINE".into(),
                subjects: vec!["mine.>".into()],
                num_replicas: 3,
                ..Default::default()
            })
            .await
            .expect("an R3 stream is placed");
        let info = mine.info().await.unwrap();
        assert_eq!(
            info.cluster.as_ref().map(|c| c.replicas.len()),
            Some(2),
            "a leader and two replicas"
        );
    });
}
