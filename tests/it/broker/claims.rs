//! The `full` resolver's claims push, the ground issue 58 builds on. What
//! `Control::push_claims` pushes is what the server then serves, asked of the server by its id,
//! and its user connects. Found here, and why a push must be proven, never inferred from its
//! answer: nats-server answers "jwt updated" to a claim another operator signed, and never
//! serves it; and ACCOUNTZ sees a pushed account only once its first use has loaded it.

use super::{Broker, eventually, free_port};
use crate::support::TestRoot;
use crate::support::nsc::Nsc;
use cotal::broker::control::Control;
use std::time::Duration;

#[test]
fn a_pushed_account_is_served_only_when_the_server_trusts_it_whatever_the_push_answered() {
    let port = free_port();
    let root = TestRoot::new();
    let nsc = Nsc::new(vec![Nsc::account("team")]);
    let conf = root.file("nats/nats.conf");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    let conf_text = nsc.server_conf_full(port, &root.file("nats/store"), &root.file("nats/jwt"));
    std::fs::write(&conf, conf_text).unwrap();
    let _server = Nsc::start(&conf);
    let b = Broker::running(root, port);
    let control = eventually(
        "the broker accepts its system user",
        Duration::from_secs(10),
        || Control::connect(&b.url(), &nsc.sys_creds()).map_err(|e| e.to_string()),
    );
    let team = nsc.get("team");
    let account = team.key.public_key();
    assert_eq!(
        control.account_jwt(&account).unwrap(),
        None,
        "unknown before the push"
    );
    assert!(
        b.connect(&nsc.user_creds(team, "alice")).is_err(),
        "no user of an account the server does not hold connects"
    );

    let jwt = nsc.account_jwt(team);
    let answers = control.push_claims(&jwt, 1).unwrap();
    assert_eq!(
        answers.get(control.server_id()),
        Some(&Ok(())),
        "{answers:?}"
    );
    // ACCOUNTZ answers only of accounts the server has registered, which a push alone does
    // not do: it stores the claims, and the first use of the account loads them.
    assert_eq!(
        control
            .account_jwt_of(control.server_id(), &account)
            .unwrap(),
        None,
        "stored, not yet loaded"
    );
    b.connect(&nsc.user_creds(team, "alice"))
        .expect("a user of the pushed account connects");
    assert_eq!(
        control
            .account_jwt_of(control.server_id(), &account)
            .unwrap()
            .as_deref(),
        Some(jwt.as_str()),
        "the server serves the claims pushed"
    );

    // Another operator's account: the server stores it and answers "jwt updated" (200) all
    // the same, so a push's answer proves nothing; it never serves it: its user is refused and
    // ACCOUNTZ holds nothing of it.
    let stranger = Nsc::new(vec![Nsc::account("team")]);
    let foreign = stranger.get("team");
    let answers = control
        .push_claims(&stranger.account_jwt(foreign), 1)
        .unwrap();
    assert_eq!(
        answers.get(control.server_id()),
        Some(&Ok(())),
        "nats-server 2.15.1 answers a foreign claim as stored: {answers:?}"
    );
    assert!(
        b.connect(&stranger.user_creds(foreign, "mallory")).is_err(),
        "a user of another operator's account is refused"
    );
    assert_eq!(
        control.account_jwt(&foreign.key.public_key()).unwrap(),
        None
    );
}
