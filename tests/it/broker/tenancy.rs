//! The creds `cotal creds` hands out, over their life: the retired `member` profile's users
//! revoked by the next apply, revocation, expiry, one tenant's failure kept its own. Every
//! refusal is proven by the broker's own authorization error, not by a timeout alone.
//! (What a member can reach is proven in `reply_paths` and `members`.)

use super::{Broker, TWO, wait_for};
use crate::support::{stderr, stdout};
use async_nats::jetstream;
use futures::StreamExt;
use std::time::Duration;

/// A space whose member `acme.alice` reads and posts `general`, beside a second space.
const MEMBERS: &str = r#"[spaces.design]
[spaces.design.members."acme.alice"]
read = ["general"]
post = ["general"]

[spaces.release]
"#;

/// A root minted before side accounts (issue 54): its ledger names a user of the retired
/// `member` profile and a declared member's user, both in the space's own account, where
/// every answer the broker gives them lands. `cotal creds --user` now refuses the profile and
/// says what to do instead; the next plan names both users and why their creds change; the
/// apply closes their connections and refuses their creds while the space's admin stays; the
/// plan after it is a no-op; the member's new creds work.
#[test]
fn users_minted_in_the_space_account_before_side_accounts_are_named_and_revoked_by_the_next_apply()
{
    let b = Broker::start(MEMBERS);
    // A user of the space's account is its owner's, said explicitly; the member profile is
    // refused with what to do instead.
    let said = stderr(
        &b.root
            .cotal(&["creds", "design", "--user", "bob"])
            .assert()
            .failure(),
    );
    assert!(
        said.contains("say so with --profile admin") && said.contains("--member OWNER.ACTOR"),
        "{said}"
    );
    let said = stderr(
        &b.root
            .cotal(&["creds", "design", "--user", "bob", "--profile", "member"])
            .assert()
            .failure(),
    );
    assert!(
        said.contains("the `member` profile is retired") && said.contains("--member OWNER.ACTOR"),
        "{said}"
    );
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "design"])
            .assert()
            .success(),
    );
    assert!(!listed.contains("bob"), "nothing minted: {listed}");

    // The old root: a user of each kind minted in the space's account and recorded as cotal
    // recorded them then (no side account).
    let root = cotal::store::Root::at(b.root.path()).unwrap();
    let space = cotal::model::SpaceName::parse("design").unwrap();
    let record = cotal::store::account_record::load(&root, &space).unwrap();
    let everything_in_the_space = cotal::trust::jwt::Permissions {
        publish: cotal::trust::jwt::Permission {
            allow: vec!["cotal.design.>".into(), "$JS.API.>".into()],
            deny: Vec::new(),
        },
        subscribe: cotal::trust::jwt::Permission {
            allow: vec!["cotal.design.>".into(), "_INBOX.>".into()],
            deny: Vec::new(),
        },
        resp: None,
    };
    let old = |name: &str| {
        cotal::mint::user(
            &record.account.public,
            &record.account.signing_seed,
            name,
            everything_in_the_space.clone(),
            None,
            None,
        )
        .unwrap()
    };
    let (bob, alice, ci) = (old("bob"), old("acme.alice"), old("ci"));
    let grant =
        cotal::space::members::Grant::new(vec!["general".into()], vec!["general".into()]).unwrap();
    let mut ledger = cotal::store::users::load(&root, &space, &record.account.public).unwrap();
    for (name, user, profile, member) in [
        (
            "bob",
            &bob,
            cotal::space::permissions::Profile::Member,
            None,
        ),
        // An owner minted before the owner's guard: kept, and named by every plan.
        ("ci", &ci, cotal::space::permissions::Profile::Admin, None),
        (
            "acme.alice",
            &alice,
            cotal::space::permissions::Profile::Member,
            Some(cotal::space::members::MemberMark {
                principal: "acme.alice".into(),
                grant: grant.digest(),
                read: grant.read.clone(),
                post: grant.post.clone(),
            }),
        ),
    ] {
        ledger.minted.push(cotal::store::users::Minted {
            name: name.to_string(),
            key: user.key.clone(),
            profile,
            issued_at: user.issued_at,
            expires_at: None,
            signed_by: Some(record.account.signing_pub.clone()),
            member,
            account: None,
            owner_guard: false,
        });
    }
    cotal::store::users::save(&root, &space, &ledger).unwrap();
    let mut old_bob = b.connect(&bob.creds).unwrap();
    let mut old_alice = b.connect(&alice.creds).unwrap();
    let admin = b.client("design").unwrap();

    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("user(s) of the retired `member` profile (bob): their creds stop working"),
        "{plan}"
    );
    let warned = |text: &str| {
        text.contains(
            "1 owner user(s) minted before the owner's guard (ci): they may still delete and purge",
        )
    };
    assert!(warned(&plan), "{plan}");
    assert!(
        plan.contains(
            "declared members minted in the space's account (acme.alice): their creds stop working"
        ) && plan.contains("cotal creds design --member OWNER.ACTOR"),
        "{plan}"
    );
    b.root.apply().success();
    for (name, client, creds) in [
        ("bob", &mut old_bob, &bob.creds),
        ("acme.alice", &mut old_alice, &alice.creds),
    ] {
        assert!(
            wait_for(&b, client, "disconnected"),
            "{name}'s old connection was closed: {:?}",
            client.events.lock().unwrap()
        );
        let again = b.connect(creds);
        assert!(
            again
                .as_ref()
                .err()
                .is_some_and(|e| e.contains("authorization violation")),
            "{name}'s old creds are refused: {:?}",
            again.err()
        );
    }
    assert_eq!(admin.disconnects(), 0, "{:?}", admin.events.lock().unwrap());
    // Nothing to change; the old owner is still named (its creds are its owner's to replace).
    let after = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert!(warned(&format!("{}{}", stdout(&after), stderr(&after))));
    // The member's new creds: a user of its own account, posting where it may.
    let fresh = b.mint("design", &["--member", "acme.alice"]);
    let alice = b
        .connect_with_inbox(&fresh, Some("_INBOX_acme_alice".into()))
        .unwrap();
    b.rt.block_on(async {
        let js = jetstream::new(admin.client.clone());
        let mut chat = js.get_stream("CHAT_design").await.unwrap();
        let before = chat.info().await.unwrap().state.messages;
        jetstream::new(alice.client.clone())
            .publish("cotal.design.chat.acme.alice.general", "hello".into())
            .await
            .unwrap()
            .await
            .expect("the chat stream acknowledges the member's post");
        assert_eq!(chat.info().await.unwrap().state.messages, before + 1);
    });
}

#[test]
fn a_revoked_user_is_disconnected_and_refused_while_the_other_users_stay() {
    let b = Broker::start(TWO);
    let alice_creds = b.mint("design", &["--user", "alice", "--profile", "admin"]);
    let bob_creds = b.mint("design", &["--user", "bob", "--profile", "admin"]);
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
    let creds = b.mint(
        "design",
        &["--user", "temp", "--profile", "admin", "--expires", "10s"],
    );
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
    let admin = b.owner("alpha");
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

/// A member's connections count in its own account (nats-server counts them per account), so
/// its account carries the space's connection limit: a member holds at most what the space
/// declares, and a changed limit follows to the member's account at the next apply.
#[test]
fn a_members_account_holds_the_spaces_connection_limit_and_follows_its_change() {
    let declared = |max: u32| {
        format!(
            "[spaces.design.limits]\nmax_connections = {max}\n[spaces.design.members.\"acme.alice\"]\nread = [\"general\"]\npost = [\"general\"]\n"
        )
    };
    let b = Broker::start(&declared(2));
    let creds = b.mint("design", &["--member", "acme.alice"]);
    let inbox = || Some("_INBOX_acme_alice".to_string());
    let _first = b.connect_with_inbox(&creds, inbox()).unwrap();
    let _second = b.connect_with_inbox(&creds, inbox()).unwrap();
    let third = b.connect_with_inbox(&creds, inbox());
    assert!(
        third
            .as_ref()
            .err()
            .is_some_and(|e| e.contains("maximum") && e.contains("connections")),
        "the member's third connection is refused: {:?}",
        third.err()
    );
    b.desire(&declared(3));
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains(
            "member acme.alice account: its connection and payload limits follow the space's"
        ),
        "{plan}"
    );
    b.root.apply().success();
    b.connect_with_inbox(&creds, inbox())
        .expect("the raised limit admits a third connection");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// `up` completes provisioning; a space whose own provisioning fails is said, step and why, as
/// `apply` says it, with exit 8 (partly done): the others are served, and `apply` finishes it.
#[cfg(feature = "fault-injection")]
#[test]
fn up_names_the_space_it_could_not_provision_and_exits_8_while_the_others_are_served() {
    let b = Broker::start("[spaces.alpha.limits]\nmax_connections = 2\n\n[spaces.beta]\n");
    let admin = b.owner("alpha");
    // alpha's owner deletes one of its streams: the next `up` provisions it again.
    {
        let first = b.connect(&admin).unwrap();
        b.rt.block_on(async {
            let js = async_nats::jetstream::new(first.client.clone());
            js.delete_stream("CHAT_alpha").await.unwrap();
        });
    }
    b.root.cotal(&["down"]).assert().success();
    let paused = crate::support::Paused::at(&b.root, &["up"], "after-journal-open");
    // The broker runs; alpha's owner takes its every connection before the provisioner's.
    let mut one = b.connect(&admin).unwrap();
    let mut two = b.connect(&admin).unwrap();
    let (code, said) = paused.resume();
    assert_eq!(code, Some(8), "{said}");
    assert!(
        said.contains("partly done: the broker runs, but 1 space step(s) failed")
            && said.contains("provision \"alpha\"")
            && said.contains("maximum account active connections exceeded"),
        "{said}"
    );
    assert_eq!(b.space_status("beta").unwrap()["servable"], true);
    assert_eq!(b.space_status("alpha").unwrap()["servable"], false);
    // The tenant lets go (each close awaited as an event); the broker frees the slots as it
    // sees them close, and `apply` finishes what `up` could not.
    for client in [&mut one, &mut two] {
        b.rt.block_on(client.client.drain()).unwrap();
        assert!(
            wait_for(&b, client, "closed"),
            "{:?}",
            client.events.lock().unwrap()
        );
    }
    super::eventually(
        "alpha is provisioned once it let go",
        Duration::from_secs(20),
        || match b.root.apply().get_output().status.code() {
            Some(0) => Ok(()),
            other => Err(format!("exit {other:?}")),
        },
    );
    assert_eq!(b.space_status("alpha").unwrap()["servable"], true);
}
