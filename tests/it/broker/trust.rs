//! Believe only what the broker confirms (issue 9), against a real nats-server: the root reached
//! through aliases, a reload verdict tenants cannot write, squatters on the port, removals that
//! stay committed, a suspended space removed while its client hammers the door, a removal the
//! broker blocks, a space at its connection limit, a rollback that leaves the refused change in
//! the plan, and the config digest cotal computes against the one nats-server reports.

use super::{Broker, Immutable, TWO, free_port, publish, wait_for};
use crate::support::{TestRoot, stderr, stdout};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How a command reaches the root.
enum Via {
    Flag(PathBuf),
    Env(PathBuf),
    Cwd(PathBuf),
}

fn cotal_via(via: &Via, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cotal"));
    cmd.env_remove("COTAL_ROOT")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    match via {
        Via::Flag(p) => {
            cmd.arg("--root").arg(p);
        }
        Via::Env(p) => {
            cmd.env("COTAL_ROOT", p);
        }
        Via::Cwd(p) => {
            cmd.current_dir(p);
        }
    }
    cmd.args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_verb_through_an_alias_of_the_root_sees_the_running_broker() {
    let b = Broker::start(TWO);
    let pid = b.pid();
    let aliases = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(b.root.path()).unwrap();
    let link = aliases.path().join("alias");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let parent = aliases.path().join("parent");
    std::os::unix::fs::symlink(real.parent().unwrap(), &parent).unwrap();
    let through_parent = parent.join(real.file_name().unwrap());
    for via in [
        Via::Flag(link.clone()),
        Via::Env(link.clone()),
        Via::Cwd(through_parent),
    ] {
        let status = cotal_via(&via, &["status", "--format", "json"]);
        assert!(status.status.success(), "{}", text(&status.stderr));
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        assert_eq!(status["broker"]["state"], "running", "{status}");
        assert_eq!(status["broker"]["pid"], pid, "{status}");
        assert_eq!(status["root"], real.to_str().unwrap(), "the canonical root");
        let plan = cotal_via(&via, &["plan", "--format", "json"]);
        assert!(plan.status.success(), "{}", text(&plan.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
        assert_eq!(plan["broker_running"], true);
        let up = cotal_via(&via, &["up"]);
        assert!(up.status.success(), "{}", text(&up.stderr));
        assert!(
            text(&up.stdout).contains(&format!("already running (pid {pid})")),
            "{}",
            text(&up.stdout)
        );
    }
    // A removal through the alias goes through the running broker and reloads it.
    let mut release = b.client("release").unwrap();
    let account = b.root.account_pub("release");
    b.desire("[spaces.design]\n");
    let out = cotal_via(
        &Via::Flag(link.clone()),
        &["apply", "--auto-approve", "--allow-destroy"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Reload confirmed by nats-server"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        wait_for(&b, &mut release, "disconnected"),
        "release evicted"
    );
    assert_eq!(b.pid(), pid, "the same broker, not a second one");
    assert!(
        !b.root
            .file(&format!(".cotal/nats/jetstream/{account}"))
            .exists()
    );
    assert_eq!(b.status()["broker"]["state"], "running");
    // And it is stopped through the alias too.
    let down = cotal_via(&Via::Env(link), &["down"]);
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(
        text(&down.stdout).contains(&format!("nats-server stopped (pid {pid})")),
        "{}",
        text(&down.stdout)
    );
    assert!(!cotal::store::process_alive(pid));
}

/// A client that keeps reconnecting every few milliseconds, reporting each attempt.
struct Hammer {
    client: async_nats::Client,
    attempts: mpsc::Receiver<usize>,
    events: Arc<Mutex<Vec<String>>>,
}

impl Hammer {
    fn start(rt: &tokio::runtime::Runtime, b: &Broker, space: &str, name: &str) -> Hammer {
        let creds = b.creds(space);
        let (tx, attempts) = mpsc::channel();
        let tx = Mutex::new(tx);
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        let options = async_nats::ConnectOptions::with_credentials(&creds)
            .unwrap()
            .name(name)
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(2))
            .reconnect_delay_callback(move |attempt| {
                let _ = tx.lock().unwrap().send(attempt);
                Duration::from_millis(5)
            })
            .event_callback(move |event| {
                let log = log.clone();
                async move { log.lock().unwrap().push(event.to_string()) }
            });
        let client = rt.block_on(options.connect(b.url())).unwrap();
        Hammer {
            client,
            attempts,
            events,
        }
    }

    /// Wait for `n` more reconnect attempts (each one a refused connection).
    fn attempts(&self, n: usize) {
        for _ in 0..n {
            self.attempts
                .recv_timeout(Duration::from_secs(30))
                .expect("the client keeps trying to reconnect");
        }
    }

    fn connected_after_first_disconnect(&self) -> bool {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .skip_while(|e| !e.contains("disconnected"))
            .any(|e| e == "connected")
    }
}

/// A tenant writing its chosen connection name into the broker's log, over and over: it logs
/// in with the name, then sends a malformed protocol line, which nats-server logs as an error
/// carrying the name before it closes the connection.
struct NameWriter {
    stop: Arc<std::sync::atomic::AtomicBool>,
    rounds: mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NameWriter {
    fn start(url_port: u16, creds: &str, name: &str) -> NameWriter {
        use std::io::{BufRead, Write};
        let jwt = creds.lines().nth(1).unwrap().to_string();
        let seed = creds
            .lines()
            .skip_while(|l| !l.contains("BEGIN USER NKEY SEED"))
            .nth(1)
            .unwrap()
            .to_string();
        let key = nkeys::KeyPair::from_seed(&seed).unwrap();
        let name = name.to_string();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rounds) = mpsc::channel();
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", url_port)) else {
                    return;
                };
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut info = String::new();
                if reader.read_line(&mut info).is_err() {
                    continue;
                }
                let info: serde_json::Value =
                    serde_json::from_str(info.trim_start_matches("INFO ").trim()).unwrap();
                let nonce = info["nonce"].as_str().unwrap();
                use base64::Engine as _;
                let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(key.sign(nonce.as_bytes()).unwrap());
                let connect = serde_json::json!({
                    "jwt": jwt, "sig": sig, "name": name, "verbose": false, "pedantic": false,
                    "protocol": 1, "lang": "hostile", "version": "0"
                });
                let mut w = &stream;
                let _ = write!(w, "CONNECT {connect}\r\nPING\r\n");
                let mut pong = String::new();
                let _ = reader.read_line(&mut pong);
                // Logged as `[ERR] ... - "0:hostile:<name>" - ... Client parser ERROR`.
                let _ = w.write_all(b"PUB\r\n");
                let mut rest = String::new();
                let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
                let _ = tx.send(());
            }
        });
        NameWriter {
            stop,
            rounds,
            thread: Some(thread),
        }
    }

    /// Wait for `n` more lines written.
    fn rounds(&self, n: usize) {
        for _ in 0..n {
            self.rounds
                .recv_timeout(Duration::from_secs(30))
                .expect("the tenant keeps writing its name into the log");
        }
    }
}

impl Drop for NameWriter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_tenant_named_like_a_reload_line_never_changes_the_verdict() {
    let b = Broker::start(TWO);
    for phrase in [
        "Failed to reload server configuration",
        "Reloaded server configuration",
    ] {
        // A tenant of release floods the log with its chosen connection name while release is
        // suspended (then resumed).
        let writer = NameWriter::start(b.port, &b.creds("release"), phrase);
        writer.rounds(3);
        let log = std::fs::read_to_string(b.root.file(".cotal/nats.log")).unwrap();
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("hostile:{phrase}")) && l.contains("[ERR]")),
            "the tenant's name is in the log: the attack is in place"
        );
        let apply = |spaces: &str, state: &str| {
            b.desire(spaces);
            let out = b
                .root
                .cotal(&["apply", "--auto-approve"])
                .assert()
                .success();
            assert!(
                stdout(&out).contains("Reload confirmed"),
                "{}",
                stdout(&out)
            );
            assert_eq!(b.space_status("release").unwrap()["state"], state);
        };
        apply(
            "[spaces.design]\n\n[spaces.release]\nstate = \"suspended\"\n",
            "suspended",
        );
        apply(TWO, "active");
        writer.rounds(3);
    }
}

#[test]
fn a_broker_of_this_root_without_its_pidfile_is_never_taken_for_stopped() {
    let b = Broker::start(TWO);
    let pid = b.pid();
    let release = b.root.account_pub("release");
    // The pidfile and the promoted config are lost, and cotal.toml names another port.
    std::fs::remove_file(b.root.file(".cotal/nats.pid")).unwrap();
    std::fs::remove_file(b.root.file(".cotal/auth/server.conf")).unwrap();
    b.root.desire_on(free_port(), "[spaces.design]\n");
    let status = b
        .root
        .cotal(&["status", "--format", "json"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(status["broker"]["state"], "unknown", "{status}");
    let before = b.root.snapshot();
    for args in [
        &["apply", "--auto-approve", "--allow-destroy"][..],
        &["up"][..],
    ] {
        let out = b.root.cotal(args).assert().code(3);
        assert!(
            stderr(&out).contains(&format!("pid {pid} is this root's nats-server")),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        b.root.snapshot(),
        before,
        "nothing deleted, nothing started"
    );
    assert!(
        b.root
            .file(&format!(".cotal/nats/jetstream/{release}"))
            .exists(),
        "release's data is intact"
    );
    // `down` finds it by what it runs, and stops it.
    let down = b.root.cotal(&["down"]).assert().success();
    assert!(
        stdout(&down).contains(&format!("nats-server stopped (pid {pid})")),
        "{}",
        stdout(&down)
    );
    assert!(!cotal::store::process_alive(pid));
}

#[test]
fn a_foreign_programs_command_line_is_shown_escaped_never_written_to_the_terminal() {
    use std::io::BufRead;
    let root = TestRoot::init();
    let port = free_port();
    root.desire_on(port, TWO);
    root.apply().success();
    // Whoever takes the port writes its own command line: here one that would clear the
    // operator's screen and print a forged line.
    let hostile = "\u{1b}[2J\u{1b}[Hcotal: all spaces healthy\r";
    let mut squatter = std::process::Command::new("python3")
        .arg("-c")
        .arg("exec(__import__('os').environ['C'])")
        .arg(hostile)
        .env(
            "C",
            format!(
                "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',{port}))\ns.listen()\nprint('ready',flush=True)\nsys.stdin.read()"
            ),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut ready = String::new();
    std::io::BufReader::new(squatter.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let out = root.cotal(&["up"]).assert().code(3);
    let err = stderr(&out);
    let _ = squatter.kill();
    let _ = squatter.wait();
    assert!(
        err.contains(&format!("pid {}", squatter.id())),
        "names the holder: {err}"
    );
    assert!(
        err.contains("\\u{1b}[2J\\u{1b}[Hcotal: all spaces healthy\\u{d}"),
        "its command line, escaped: {err}"
    );
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "{err:?}");
}

#[test]
fn up_refuses_a_port_held_by_another_program_and_names_it() {
    let root = TestRoot::init();
    let port = free_port();
    root.desire_on(port, TWO);
    root.apply().success();
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let before = root.snapshot();
    let out = root.cotal(&["up"]).assert().code(3);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "names the holder: {err}"
    );
    assert!(
        err.contains(&format!("listens on 127.0.0.1:{port}")),
        "{err}"
    );
    assert_eq!(root.snapshot(), before, "nothing started, nothing written");
    let status = root
        .cotal(&["status", "--format", "json"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(status["broker"]["state"], "unknown", "{status}");
    root.cotal(&["plan"]).assert().code(3);
    drop(squatter);

    // Another root's nats-server on the same port: refused, naming it.
    let other = Broker::start_on(port, "[spaces.x]\n");
    let out = root.cotal(&["up"]).assert().code(3);
    let err = stderr(&out);
    let other_conf = std::fs::canonicalize(other.root.file(".cotal/auth/server.conf")).unwrap();
    assert!(err.contains("nats-server"), "{err}");
    assert!(
        err.contains(other_conf.to_str().unwrap()),
        "names the other broker's config: {err}"
    );
    assert!(err.contains(&format!("pid {}", other.pid())), "{err}");
    assert!(!root.file(".cotal/nats.pid").exists());
    drop(other);
}

#[test]
fn a_removal_that_fails_after_its_first_deletion_stays_committed_and_is_finished() {
    let b = Broker::start(TWO);
    let release = b.client("release").unwrap();
    publish(&b, &release, "release", 3);
    drop(release);
    b.root.cotal(&["down"]).assert().success();
    let account = b.root.account_pub("release");
    let folder = b.root.file(&format!(".cotal/nats/jetstream/{account}"));
    let mut streams: Vec<PathBuf> = std::fs::read_dir(folder.join("streams"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    streams.sort();
    let meta = streams[1].join("meta.inf");
    assert!(meta.is_file(), "{}", meta.display());
    let obstacle = Immutable::set(&meta);

    b.desire("[spaces.design]\n");
    let out = b
        .root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .code(6);
    let err = stderr(&out);
    assert!(err.contains("after a commit point"), "{err}");
    assert!(
        err.contains("Operation not permitted"),
        "names the obstacle: {err}"
    );
    assert!(
        !streams[0].exists() && streams[2].exists(),
        "the first stream was deleted, the removal stopped at the second"
    );
    let journal: serde_json::Value = serde_json::from_slice(
        &std::fs::read(b.root.file(".cotal/maintenance/journal.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(journal["removals"][0]["space"], "release");
    assert_eq!(journal["removals"][0]["committed"], true, "{journal}");
    // Every other verb knows the removal is under way.
    b.root.cotal(&["up"]).assert().code(6);

    drop(obstacle);
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    assert!(stdout(&out).contains("Apply complete"), "{}", stdout(&out));
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    assert!(
        !folder.exists(),
        "every stream of the removed space is gone"
    );
    assert!(!b.root.account_record("release").exists());
}

#[test]
fn a_suspended_space_is_removed_on_a_running_broker_and_its_client_never_gets_back_in() {
    let b = Broker::start(TWO);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let hammer = Hammer::start(&rt, &b, "release", "release-client");
    rt.block_on(hammer.client.flush()).unwrap();
    b.desire("[spaces.design]\n\n[spaces.release]\nstate = \"suspended\"\n");
    b.root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    hammer.attempts(3);
    let account = b.root.account_pub("release");
    b.desire("[spaces.design]\n");
    let out = b
        .root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .success();
    assert!(stdout(&out).contains("Apply complete"), "{}", stdout(&out));
    hammer.attempts(3);
    assert!(
        !hammer.connected_after_first_disconnect(),
        "the suspended tenant never got back in: {:?}",
        hammer.events.lock().unwrap()
    );
    assert!(
        !b.root
            .file(&format!(".cotal/nats/jetstream/{account}"))
            .exists()
    );
    assert!(!b.root.account_record("release").exists());
    assert!(b.space_status("release").is_none());
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_removal_the_broker_blocks_exits_6_and_down_still_works() {
    let b = Broker::start(TWO);
    let account = b.root.account_pub("release");
    b.desire("[spaces.design]\n");
    let paused = crate::support::Paused::at(
        &b.root,
        &["apply", "--auto-approve", "--allow-destroy"],
        "after-removal-committed",
    );
    // The broker stops answering between the commit point and the deletion.
    let broker_pid = b.pid();
    let pid = nix::unistd::Pid::from_raw(broker_pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let (code, err) = paused.resume();
    assert_eq!(code, Some(6), "{err}");
    assert!(err.contains("after a commit point"), "{err}");
    assert!(err.contains("no reply within"), "names the obstacle: {err}");
    assert!(err.contains("`cotal down`"), "says what to do: {err}");
    assert!(b.root.file(".cotal/maintenance/journal.json").exists());
    // The operator can always stop the broker, journal open or not.
    let down = b.root.cotal(&["down", "--grace", "1s"]).assert().success();
    assert!(
        stdout(&down).contains("nats-server stopped"),
        "{}",
        stdout(&down)
    );
    assert!(!cotal::store::process_alive(broker_pid));
    // With the broker stopped, the next apply finishes the removal.
    b.root.apply().success();
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    assert!(
        !b.root
            .file(&format!(".cotal/nats/jetstream/{account}"))
            .exists()
    );
    assert!(!b.root.account_record("release").exists());
}

#[test]
fn a_limit_change_at_the_connection_limit_evicts_nobody_it_should_not() {
    let spaces = |max: u32, extra: &str| {
        format!("[spaces.design.limits]\nmax_connections = {max}\n{extra}\n[spaces.release]\n")
    };
    let b = Broker::start(&spaces(3, ""));
    let clients: Vec<_> = (0..3).map(|_| b.client("design").unwrap()).collect();
    assert!(b.client("design").is_err(), "the space is full");
    b.desire(&spaces(3, "max_consumers = 100\n"));
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    assert!(
        stdout(&out).contains("Reload confirmed"),
        "{}",
        stdout(&out)
    );
    for c in &clients {
        b.rt.block_on(c.client.flush()).unwrap();
        assert_eq!(c.disconnects(), 0);
    }
    // Lowering the limit below the live count closes the newest connections, and only them.
    b.desire(&spaces(5, "max_consumers = 100\n"));
    b.root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    let mut clients = clients;
    clients.push(b.client("design").unwrap());
    b.desire(&spaces(2, "max_consumers = 100\n"));
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    assert!(stdout(&out).contains("Apply complete"), "{}", stdout(&out));
    let (oldest, newest) = clients.split_at_mut(2);
    for c in newest.iter_mut() {
        assert!(wait_for(&b, c, "disconnected"), "the newest are closed");
    }
    for c in oldest.iter() {
        b.rt.block_on(c.client.flush()).unwrap();
        assert_eq!(c.disconnects(), 0, "the oldest stay");
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_rolled_back_change_is_still_a_change_in_the_next_plan() {
    let b = Broker::start(TWO);
    let record = std::fs::read(b.root.account_record("design")).unwrap();
    let generation = b.root.generation();
    b.desire("[spaces.design.limits]\nmax_connections = 7\n\n[spaces.release]\n");
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .env("COTAL_FAULT", "break-config")
        .assert()
        .code(7);
    assert!(
        stderr(&out).contains("every record this apply wrote was put back"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(b.root.account_record("design")).unwrap(),
        record,
        "the re-issued record was put back"
    );
    assert_eq!(b.root.generation(), generation);
    insta::assert_snapshot!(
        "a_limit_change_on_a_running_broker",
        b.run(&["plan", "--detailed-exitcode"])
    );
    b.root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn the_config_digest_cotal_computes_is_the_one_nats_server_reports() {
    // Characters Go's JSON encoder escapes and serde_json does not, in the store path.
    let root = TestRoot::init();
    let port = free_port();
    let toml = format!(
        "version = 1\n\n[broker]\nport = {port}\nstore_dir = \".cotal/store <&> \u{2028} é\"\n\n{TWO}"
    );
    std::fs::write(root.file("cotal.toml"), toml).unwrap();
    root.apply().success();
    let r = cotal::store::Root::at(root.path()).unwrap();
    let (desired, digest) = cotal::observe::desired(&r).unwrap();
    let observed = cotal::observe::observe(&r, &desired, digest).unwrap();
    let cotal::observed::BrokerRecordState::Valid(trust) = &observed.broker else {
        panic!("broker record");
    };
    let node = cotal::plan::nodes(&desired, &observed).remove(0);
    let rendered = cotal::render::render(
        trust,
        &cotal::observed::preloads(&observed.inventory.spaces),
        &node,
    )
    .unwrap();
    let conf = root.file(".cotal/auth/server.conf");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), rendered.text);
    // The server's own syntax check prints the digest of what it parsed.
    let bin = std::env::var("COTAL_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let check = std::process::Command::new(bin)
        .args(["-t", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&check.stdout), text(&check.stderr));
    assert!(
        said.contains(&format!("({})", rendered.digest)),
        "nats-server -t: {said}\ncotal: {}",
        rendered.digest
    );
    // And the running server reports it in VARZ.
    root.cotal(&["up"]).assert().success();
    let creds = cotal::mint::system_user(&r, "test", cotal::space::permissions::control()).unwrap();
    let control =
        cotal::broker::control::Control::connect(&format!("nats://127.0.0.1:{port}"), &creds)
            .unwrap();
    assert_eq!(control.varz().unwrap().digest, rendered.digest);
    root.cotal(&["down"]).assert().success();
}

#[test]
fn a_stream_a_tenant_recreated_beyond_repair_never_fails_other_work() {
    let b = Broker::start(TWO);
    let release = b.connect(&b.owner("release")).unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(release.client.clone());
        js.delete_stream("CHAT_release").await.unwrap();
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "CHAT_release".into(),
            subjects: vec!["cotal.release.chat.>".into()],
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
    });
    b.desire(&format!("{TWO}\n[spaces.third]\n"));
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    let out = stdout(&out);
    assert!(out.contains("Apply complete: 1 added"), "{out}");
    assert!(
        out.contains("CHAT_release of \"release\" was recreated with another storage"),
        "the plan names it and the fix: {out}"
    );
    let release = b.space_status("release").unwrap();
    assert_eq!(release["servable"], false, "{release}");
    assert_eq!(b.space_status("third").unwrap()["servable"], true);
    // It stays a warning, not a change that fails every apply.
    let plan = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert!(stdout(&plan).contains("was recreated"), "{}", stdout(&plan));
}

#[test]
fn a_saved_plan_survives_traffic_but_not_a_broker_that_stopped() {
    let b = Broker::start(TWO);
    let plans = tempfile::tempdir().unwrap();
    let first = plans.path().join("first.json");
    b.desire(&format!("{TWO}\n[spaces.third]\n"));
    b.root
        .cotal(&["plan", "--out", first.to_str().unwrap()])
        .assert()
        .success();
    // Traffic moves the figures a plan shows, not its decisions.
    let design = b.client("design").unwrap();
    publish(&b, &design, "design", 5);
    let out = b
        .root
        .cotal(&["apply", first.to_str().unwrap(), "--auto-approve"])
        .assert()
        .success();
    assert!(
        stdout(&out).contains("Apply complete: 1 added"),
        "{}",
        stdout(&out)
    );
    // A plan made while the broker ran is stale once it stopped.
    let second = plans.path().join("second.json");
    b.desire(&format!("{TWO}\n[spaces.third]\n\n[spaces.fourth]\n"));
    b.root
        .cotal(&["plan", "--out", second.to_str().unwrap()])
        .assert()
        .success();
    b.root.cotal(&["down"]).assert().success();
    let out = b
        .root
        .cotal(&["apply", second.to_str().unwrap(), "--auto-approve"])
        .assert()
        .code(5);
    assert!(
        stderr(&out).contains("the broker stopped since the plan was made"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_plan_that_commits_more_storage_than_the_broker_has_is_refused_and_changes_nothing() {
    let root = TestRoot::init();
    let port = free_port();
    let file = |spaces: &str| {
        format!(
            "version = 1\n[broker]\nport = {port}\nmax_file_store = \"100MiB\"\n\n[defaults.limits]\nmax_storage = \"32MiB\"\n\n{spaces}"
        )
    };
    std::fs::write(root.file("cotal.toml"), file(TWO)).unwrap();
    root.apply().success();
    root.cotal(&["up"]).assert().success();
    let status = root
        .cotal(&["status", "--format", "json"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(status["jetstream"]["file"]["size"], 100 << 20, "{status}");
    assert_eq!(status["jetstream"]["file"]["source"], "configured");
    assert_eq!(status["jetstream"]["file"]["committed"], 64 << 20);
    // A third space of 48 MiB would commit 112 MiB of a 100 MiB store.
    std::fs::write(
        root.file("cotal.toml"),
        file(&format!(
            "{TWO}\n[spaces.big.limits]\nmax_storage = \"48MiB\"\n"
        )),
    )
    .unwrap();
    let before = root.snapshot();
    for args in [&["plan"][..], &["apply", "--auto-approve"][..]] {
        let out = root.cotal(args).assert().code(3);
        let err = stderr(&out);
        assert!(
            err.contains("add up to 112 MiB, more than the broker's JetStream file store of 100 MiB (set in cotal.toml)"),
            "{err}"
        );
        assert!(err.contains("\"big\" 48 MiB"), "{err}");
    }
    assert_eq!(root.snapshot(), before, "nothing changed");
    root.cotal(&["down"]).assert().success();
}

/// Another program took the broker's port while it was stopped: the operator moves this root's
/// port in cotal.toml, and plan and apply judge the port the next start binds (not the old one
/// in the promoted config), so the move is planned, applied and served; the refusal before the
/// move says the squatter is not this root's broker and never advises killing it.
#[test]
fn moving_the_port_away_from_a_squatter_is_planned_applied_and_served() {
    let b = Broker::start(TWO);
    b.root.cotal(&["down"]).assert().success();
    let old = b.port;
    let squatter = std::net::TcpListener::bind(("127.0.0.1", old)).unwrap();
    let e = stderr(&b.root.cotal(&["plan"]).assert().code(3));
    assert!(
        e.contains("it is not this root's broker") && !e.contains("kill"),
        "{e}"
    );
    let new = free_port();
    b.root.desire_on(new, TWO);
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    assert!(plan.contains(&format!("port: {new}")), "{plan}");
    b.root.apply().success();
    let up = stdout(&b.root.cotal(&["up"]).assert().success());
    assert!(up.contains(&format!("127.0.0.1:{new}")), "{up}");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    drop(squatter);
    b.root.cotal(&["down"]).assert().success();
}
