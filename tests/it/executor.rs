//! The executor against a fake broker (the real one is in `broker`): a reload the data
//! plane does not confirm is rolled back, and a generation moved by another writer refuses the
//! promotion naming it. Both leave the previous config and generation in place.

use crate::support::TestRoot;
use cotal::apply::{self, Context};
use cotal::audit::Actor;
use cotal::broker::{Broker, Expectation};
use cotal::error::{Error, Result};
use cotal::model::SpaceName;
use cotal::{observe, plan};
use std::path::PathBuf;
use std::time::Duration;

/// A running broker whose reloads confirm and whose data plane says what it is told to.
#[derive(Default)]
struct Fake {
    verify_fails: bool,
    reloads: usize,
    /// (space, accepts) of every connection probe.
    verified: Vec<(String, bool)>,
    /// (space, loaded) of every check through the system account.
    loaded: Vec<(String, bool)>,
    /// Spaces whose provisioning the broker refuses (`*`: every space's).
    provision_fails: Vec<String>,
    /// Spaces whose provisioning was asked, in order.
    provisioned: Vec<String>,
}

impl Broker for Fake {
    fn running(&self) -> bool {
        true
    }
    fn delete_streams(&mut self, _: &SpaceName, account: &str, _: &[PathBuf]) -> Result<()> {
        assert!(account.starts_with('A'), "an account key");
        Ok(())
    }
    fn survey_streams(
        &mut self,
        _: &SpaceName,
        purger: &str,
    ) -> Result<Vec<cotal::broker::live::StreamSurvey>> {
        assert!(purger.contains("BEGIN NATS USER JWT"));
        Ok(Vec::new())
    }
    fn purge_streams(
        &mut self,
        _: &SpaceName,
        purger: &str,
        _: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<(String, u64)>> {
        assert!(purger.contains("BEGIN NATS USER JWT"));
        Ok(Vec::new())
    }
    fn reload(&mut self, digests: &[(String, String)]) -> Result<Duration> {
        assert!(digests.iter().all(|(_, d)| d.starts_with("sha256:")));
        self.reloads += 1;
        Ok(Duration::from_millis(1))
    }
    fn restore(&mut self) -> Result<bool> {
        self.reloads += 1;
        Ok(true)
    }
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()> {
        for e in expectations {
            match e {
                Expectation::Accepts { space, .. } => self.verified.push((space.to_string(), true)),
                Expectation::Refuses { space, .. } => {
                    self.verified.push((space.to_string(), false))
                }
                Expectation::Loaded { space, jwt, .. } => {
                    assert!(jwt.starts_with("eyJ"));
                    self.loaded.push((space.to_string(), true))
                }
                Expectation::Unloaded { space, .. } => self.loaded.push((space.to_string(), false)),
                Expectation::SystemLoaded { .. } => self.loaded.push(("$SYS".into(), true)),
                Expectation::MonitorLoaded { .. } => self.loaded.push(("$MONITOR".into(), true)),
                Expectation::SideLoaded {
                    space, role, jwt, ..
                } => self
                    .loaded
                    .push((format!("{space}: {role}"), jwt.is_some())),
                Expectation::Serves { fingerprint } => {
                    assert!(fingerprint.starts_with("sha256:"));
                    self.loaded.push(("tls".into(), true))
                }
                Expectation::RoutesServe { fingerprint, .. } => {
                    assert!(fingerprint.starts_with("sha256:"));
                    self.loaded.push(("route tls".into(), true))
                }
                Expectation::NoStreams { space, .. } => {
                    self.loaded.push((format!("{space} stopped"), true))
                }
            }
        }
        if self.verify_fails {
            Err(Error::other("the data plane disagrees"))
        } else {
            Ok(())
        }
    }
    fn await_streams(
        &mut self,
        space: &SpaceName,
        creds: &str,
        _account: &str,
        _streams: &[String],
    ) -> Result<()> {
        assert!(creds.contains("BEGIN NATS USER JWT"));
        self.loaded.push((format!("{space} recovered"), true));
        Ok(())
    }
    fn provision(
        &mut self,
        work: &cotal::broker::Provisioning,
    ) -> Result<cotal::broker::Provisioned> {
        let space = &work.space;
        assert!(work.creds.contains("BEGIN NATS USER JWT"));
        self.provisioned.push(space.to_string());
        if self
            .provision_fails
            .iter()
            .any(|f| f == "*" || f == space.as_str())
        {
            return Err(
                cotal::error::BrokerError::api("stream create", "insufficient resources").into(),
            );
        }
        Ok(cotal::broker::Provisioned {
            work: vec!["created".into()],
            registry_seed: None,
        })
    }
    fn write_acl(
        &mut self,
        _: &SpaceName,
        writer: &str,
        _: &[cotal::space::channels::Write],
    ) -> Result<()> {
        assert!(writer.contains("BEGIN NATS USER JWT"));
        Ok(())
    }
    fn write_channels(
        &mut self,
        _: &SpaceName,
        writer: &str,
        writes: &[cotal::space::channels::Write],
    ) -> Result<Vec<cotal::space::channels::Written>> {
        assert!(writer.contains("BEGIN NATS USER JWT"));
        Ok(writes
            .iter()
            .map(|w| (w.key.clone(), w.value.clone(), Some(1)))
            .collect())
    }
}

fn apply_with(root: &TestRoot, broker: &mut Fake, before_execute: impl FnOnce()) -> Result<()> {
    apply_outcome(root, broker, before_execute).map(|_| ())
}

/// [`apply_outcome`] planned as with the broker running (the fake is), so the plan
/// provisions what it adds.
fn apply_running(root: &TestRoot, broker: &mut Fake) -> Result<apply::Outcome> {
    RUNNING.with(|r| r.set(true));
    let result = apply_outcome(root, broker, || {});
    RUNNING.with(|r| r.set(false));
    result
}

thread_local! {
    /// Whether [`apply_outcome`] observes the broker as running.
    static RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn apply_outcome(
    root: &TestRoot,
    broker: &mut Fake,
    before_execute: impl FnOnce(),
) -> Result<apply::Outcome> {
    let r = cotal::store::Root::at(root.path()).unwrap();
    let (desired, digest) = observe::desired(&r).unwrap();
    let mut observed = observe::observe(&r, &desired, digest).unwrap();
    if RUNNING.with(|r| r.get()) {
        for n in &mut observed.nodes {
            n.process = cotal::observed::BrokerProcess::Answering;
        }
    }
    let plan = plan::compute(&desired, &observed, &Default::default()).unwrap();
    before_execute();
    let lock = cotal::store::lock::acquire(
        &r,
        &cotal::store::lock::Holder {
            pid: std::process::id(),
            host: "t".into(),
            command: "test".into(),
            since: "now".into(),
        },
        Duration::ZERO,
    )
    .unwrap();
    let nodes = plan::nodes(&desired, &observed);
    let ctx = Context {
        root: &r,
        nodes: &nodes,
        observed: &observed,
        actor: Actor {
            user: "t".into(),
            host: "t".into(),
        },
        lock: &lock,
        progress: &cotal::apply::Silent,
    };
    apply::execute(&ctx, &plan, broker)
}

#[test]
fn an_unverified_reload_is_rolled_back_and_a_verified_one_checks_every_change() {
    let root = TestRoot::init();
    root.desire("[spaces.keep]\n\n[spaces.gone]\n");
    root.apply().success();
    let conf = std::fs::read(root.file(".cotal/auth/server.conf")).unwrap();

    root.desire("[spaces.keep]\nstate = \"suspended\"\n\n[spaces.new]\n");
    let mut fake = Fake {
        verify_fails: true,
        ..Fake::default()
    };
    let err = apply_with(&root, &mut fake, || {}).unwrap_err();
    assert!(
        matches!(err, Error::Interrupted(_)),
        "the removal passed its commit point: {err}"
    );
    assert!(err.to_string().contains("the data plane disagrees"));
    assert_eq!(fake.reloads, 2, "the new config, then the restored one");
    assert_eq!(
        std::fs::read(root.file(".cotal/auth/server.conf")).unwrap(),
        conf,
        ".prev restored"
    );
    assert_eq!(root.generation(), 1, "the generation is unchanged");
    let mut expected = vec![
        ("gone".to_string(), false),
        ("keep".to_string(), false),
        ("new".to_string(), true),
    ];
    expected.sort();
    let mut seen = fake.verified.clone();
    seen.sort();
    assert_eq!(seen, expected, "added accept, removed and suspended refuse");
    let mut loaded = fake.loaded.clone();
    loaded.sort();
    assert_eq!(
        loaded,
        vec![
            ("gone".to_string(), false),
            ("keep".to_string(), true),
            // Suspended with its space, its observer's account is re-issued too.
            ("keep: observer".to_string(), true),
            ("new".to_string(), true),
            ("new: observer".to_string(), true),
        ],
        "changed accounts loaded with their new JWT, removed ones unloaded (the system account is not touched: a suspension closes the space's observer account, not the system account's users)"
    );
    assert!(
        !root.account_record("new").exists(),
        "the rolled-back add's record was put back (removed)"
    );

    // The journal is open (a commit point passed): the next apply finishes.
    let mut fake = Fake::default();
    apply_with(&root, &mut fake, || {}).unwrap();
    assert_eq!(root.generation(), 2);
    assert!(!root.file(".cotal/maintenance/journal.json").exists());
}

#[test]
fn an_unverified_reload_before_any_commit_point_is_exit_7() {
    let root = TestRoot::init();
    root.desire("[spaces.keep]\n");
    root.apply().success();
    root.desire("[spaces.keep]\n\n[spaces.new]\n");
    let mut fake = Fake {
        verify_fails: true,
        ..Fake::default()
    };
    let err = apply_with(&root, &mut fake, || {}).unwrap_err();
    assert_eq!(err.exit_code(), cotal::error::exit::ROLLED_BACK, "{err}");
    assert!(!root.file(".cotal/maintenance/journal.json").exists());
    assert_eq!(root.generation(), 1);
    assert!(!root.account_record("new").exists(), "{err}");
}

/// A generation another cotal promoted behind the lock is refused naming that apply: its
/// operator, time and plan, from the audit.
#[test]
fn a_generation_another_cotal_promoted_is_refused_naming_it() {
    let root = TestRoot::init();
    root.desire("[spaces.keep]\n");
    root.apply().success();
    root.desire("[spaces.keep]\n\n[spaces.new]\n");
    let record = root.file(".cotal/auth/broker-config.json");
    let mut fake = Fake::default();
    let err = apply_with(&root, &mut fake, || {
        let text = std::fs::read_to_string(&record)
            .unwrap()
            .replace("\"gen\":1", "\"gen\":2");
        std::fs::write(&record, text).unwrap();
        let line = r#"{"time":"2026-12-02T10:00:00Z","event":"apply.completed","actor":{"user":"mallory","host":"laptop"},"generation":{"before":1,"after":2},"plan_digest":"sha256:feed","outcome":"completed"}"#;
        let mut audit = std::fs::OpenOptions::new()
            .append(true)
            .open(root.file(".cotal/audit.jsonl"))
            .unwrap();
        std::io::Write::write_all(&mut audit, format!("{line}\n").as_bytes()).unwrap();
    })
    .unwrap_err();
    assert_eq!(err.exit_code(), cotal::error::exit::REFUSED);
    assert!(
        err.to_string().contains(
            "generation 2 was promoted by mallory@laptop at 2026-12-02T10:00:00Z (plan sha256:feed)"
        ),
        "{err}"
    );
    assert_eq!(fake.reloads, 0, "nothing was reloaded");
}

#[test]
fn a_generation_moved_by_another_writer_refuses_the_promotion() {
    let root = TestRoot::init();
    root.desire("[spaces.keep]\n");
    root.apply().success();
    root.desire("[spaces.keep]\n\n[spaces.new]\n");
    let record = root.file(".cotal/auth/broker-config.json");
    let conf = std::fs::read(root.file(".cotal/auth/server.conf")).unwrap();
    let mut fake = Fake::default();
    let err = apply_with(&root, &mut fake, || {
        // Another writer, which bypassed the lock, promotes between the plan and the promotion.
        let text = std::fs::read_to_string(&record)
            .unwrap()
            .replace("\"gen\":1", "\"gen\":7");
        std::fs::write(&record, text).unwrap();
    })
    .unwrap_err();
    assert_eq!(err.exit_code(), cotal::error::exit::REFUSED);
    assert!(
        err.to_string().contains("the generation moved from 1 to 7")
            && err
                .to_string()
                .contains("no cotal recorded completing generation 7")
            && err
                .to_string()
                .contains("broker-config.json was changed at"),
        "{err}"
    );
    assert_eq!(fake.reloads, 0, "nothing was reloaded");
    assert_eq!(
        std::fs::read(root.file(".cotal/auth/server.conf")).unwrap(),
        conf
    );
    assert!(!root.file(".cotal/auth/server.conf.next").exists());
}

/// One space's provisioning that the broker refuses is that space's alone: every other space
/// is provisioned, and the outcome names the one that failed (exit 8 at the command line).
#[test]
fn a_space_whose_provisioning_fails_is_reported_and_the_others_are_provisioned() {
    let root = TestRoot::init();
    root.desire("[spaces.keep]\n");
    root.apply().success();
    root.desire("[spaces.keep]\n\n[spaces.a]\n\n[spaces.bad]\n\n[spaces.c]\n");
    let mut fake = Fake {
        provision_fails: vec!["bad".into()],
        ..Fake::default()
    };
    let outcome = apply_running(&root, &mut fake).unwrap();
    let failed: Vec<&str> = outcome.failed.iter().map(|f| f.space.as_str()).collect();
    assert_eq!(failed, ["bad"]);
    assert!(outcome.failed[0].reason.contains("insufficient resources"));
    let mut provisioned = fake.provisioned.clone();
    provisioned.sort();
    assert_eq!(provisioned, ["a", "bad", "c"]);
    assert_eq!(root.generation(), 2, "the promotion stands");
}

/// When every space's provisioning fails, the broker itself is failing them: after 8 in a
/// row the next failure stops the apply as any failed apply does, instead of failing every
/// remaining space one by one.
#[test]
fn after_eight_spaces_fail_in_a_row_the_next_failure_stops_the_apply() {
    let root = TestRoot::init();
    // With quotas, so that the store holds thirteen spaces whatever the test machine's disk
    // (without them each reserves 4 GiB, and a CI disk of 67 GiB free fits only twelve).
    let quotas = "[defaults.limits]\nmax_storage = \"4MiB\"\n";
    root.desire(&format!("{quotas}[spaces.keep]\n"));
    root.apply().success();
    let mut text = format!("{quotas}[spaces.keep]\n");
    for i in 0..12 {
        text.push_str(&format!("\n[spaces.s{i:02}]\n"));
    }
    root.desire(&text);
    let mut fake = Fake {
        provision_fails: vec!["*".into()],
        ..Fake::default()
    };
    let err = apply_running(&root, &mut fake).unwrap_err();
    assert!(err.to_string().contains("insufficient resources"), "{err}");
    assert_ne!(
        err.exit_code(),
        cotal::error::exit::PARTLY_APPLIED,
        "not one space's: {err}"
    );
    // Exactly eight were isolated (each audited as its space's); the ninth stopped the apply.
    let audit = crate::support::stdout(&root.cotal(&["audit"]).assert().success());
    assert_eq!(
        audit.matches("space.step_failed").count(),
        8,
        "eight isolated, then the apply stopped: {audit}"
    );
    assert!(audit.contains("apply.failed"), "{audit}");
}
