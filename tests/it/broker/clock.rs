//! A host clock that jumps (`COTAL_CLOCK_SKEW`, a fault-injection build's hook on cotal's one
//! clock), against a real broker: a `*` revocation covers every user the ledger minted, a mint
//! after it waits for nothing, and a monitoring user's revocation leaves the JWT only by a
//! plan line that names it.

use super::Broker;
use crate::support::stdout;
use std::time::Duration;

const DAY: &str = "86400";

#[test]
fn revoke_all_refuses_creds_minted_under_a_clock_ahead_and_a_mint_under_a_clock_behind_waits_for_nothing()
 {
    let b = Broker::start("[spaces.design]\n");
    let mint = |name: &str, skew: &str| {
        stdout(
            &b.root
                .cotal(&["creds", "design", "--user", name, "--profile", "admin"])
                .env("COTAL_CLOCK_SKEW", skew)
                .timeout(Duration::from_secs(60))
                .assert()
                .success(),
        )
    };
    // Minted while the host's clock ran a day ahead: its JWT is issued "tomorrow".
    let ahead = mint("ahead", DAY);
    b.connect(&ahead).expect("a user issued ahead connects");
    b.root
        .cotal(&["creds", "revoke", "design", "--all"])
        .assert()
        .success();
    b.root.apply().success();
    let refused = b.connect(&ahead).err().unwrap_or_default();
    assert!(
        refused.contains("authorization violation"),
        "the user minted ahead is revoked by `*`: {refused}"
    );
    // The clock is now a day behind the `*` revocation: the mint is issued after it at once
    // (the old mint waited for the clock, holding the root's lock), and its user connects.
    let behind = mint("behind", &format!("-{DAY}"));
    b.connect(&behind)
        .expect("a user minted after the revocation connects");
    // The lock is free: an apply runs.
    b.root
        .cotal(&["apply", "--auto-approve"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
}

#[test]
fn a_monitoring_users_revocation_is_dropped_only_by_a_plan_line_naming_it() {
    let b = Broker::start("[spaces.design]\n");
    let out = b
        .root
        .cotal(&[
            "creds",
            "--system",
            "monitor",
            "--user",
            "watch",
            "--expires",
            "30d",
        ])
        .assert()
        .success();
    let creds = stdout(&out);
    b.root
        .cotal(&["creds", "revoke", "--system", "--user", "watch"])
        .assert()
        .success();
    b.root.apply().success();
    let key = cotal_key(&creds);
    // A clock 100 days ahead: the ledger says the user expired. An apply keeps the revocation
    // (before, it dropped it with no plan line) and the plan warns, naming the key and how to
    // drop it; asked to, the plan says it drops it.
    let ahead = (100 * 86_400).to_string();
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .env("COTAL_CLOCK_SKEW", &ahead)
        .assert()
        .success();
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "1 revocation(s) of monitoring users whose recorded expiry has passed stay in the monitoring account's JWT ({key}); `cotal apply --prune-revocations` drops them"
        )),
        "{said}"
    );
    let refused = b.connect(&creds).err().unwrap_or_default();
    assert!(
        refused.contains("authorization violation"),
        "the revoked monitoring user stays refused: {refused}"
    );
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--prune-revocations"])
            .env("COTAL_CLOCK_SKEW", &ahead)
            .assert()
            .success(),
    );
    assert!(
        plan.contains(&format!(
            "drop 1 revocation(s) of monitoring users whose recorded expiry has passed ({key})"
        )),
        "{plan}"
    );
}

/// The user public key of a creds file.
fn cotal_key(creds: &str) -> String {
    use base64::Engine as _;
    let jwt = creds
        .lines()
        .skip_while(|l| !l.contains("BEGIN NATS USER JWT"))
        .nth(1)
        .unwrap();
    let body = jwt.split('.').nth(1).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .unwrap(),
    )
    .unwrap();
    claims["sub"].as_str().unwrap().to_string()
}
