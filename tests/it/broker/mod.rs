//! Real-broker tests: every test starts nats-server through `cotal up` in a temp root on a free
//! loopback port, talks to it with a NATS client, and always stops it.
//!
//! Waits are bounded waits for an event (a disconnect, a message), never sleeps.

mod adopt;
mod archive;
mod channels;
mod claims;
#[cfg(feature = "fault-injection")]
mod clock;
mod cluster;
#[cfg(feature = "fault-injection")]
mod crash;
mod include_reader;
mod members;
mod purge;
mod reply_paths;
mod root_backup;
mod store;
mod system_creds;
mod tenancy;
mod tls;
mod trust;

use crate::support::{TestRoot, stdout};
use futures::StreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running broker in a temp root (one server, or a 3-node loopback cluster); stopped on
/// drop, whatever happened.
struct Broker {
    root: TestRoot,
    port: u16,
    /// A cluster's nodes (client port, route port); empty for one server.
    nodes: Vec<(u16, u16)>,
    /// A cluster's node 3 run "on another machine" (`local = false`, its config in
    /// `remote/n3.conf`): the test starts it itself, and stops it on drop.
    remote: Option<std::process::Child>,
    rt: tokio::runtime::Runtime,
}

impl Broker {
    fn start(spaces: &str) -> Broker {
        Broker::start_on(free_port(), spaces)
    }

    /// Three nodes on loopback, replicas 3, every node started by `cotal up`.
    fn start_cluster(spaces: &str) -> Broker {
        Broker::start_cluster_with(spaces, false)
    }

    /// [`Broker::start_cluster`]; with `remote`, node 3 is declared `local = false` with its
    /// config in `remote/n3.conf`, and this test starts its nats-server itself, as the other
    /// machine would, before `cotal up` starts nodes 1 and 2.
    fn start_cluster_with(spaces: &str, remote: bool) -> Broker {
        Broker::start_cluster_prepared(spaces, remote, &|_| {})
    }

    /// [`Broker::start_cluster_with`], with `prepare` run on the root before the first apply
    /// (files `cotal.toml` names, such as TLS material).
    fn start_cluster_prepared(spaces: &str, remote: bool, prepare: &dyn Fn(&TestRoot)) -> Broker {
        // Six distinct free ports: every listener is held until all are chosen.
        let held: Vec<std::net::TcpListener> = (0..6)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        drop(held);
        let nodes = vec![
            (ports[0], ports[1]),
            (ports[2], ports[3]),
            (ports[4], ports[5]),
        ];
        let mut b = Broker {
            root: TestRoot::init(),
            port: nodes[0].0,
            nodes,
            remote: None,
            rt: runtime(),
        };
        if remote {
            std::fs::create_dir_all(b.root.file("remote")).unwrap();
            // Marks node 3 as remote in every cotal.toml `desire` writes.
            std::fs::write(b.root.file("remote/.declared"), "").unwrap();
        }
        prepare(&b.root);
        b.desire(spaces);
        b.root.apply().success();
        if remote {
            let bin = cotal::broker::preflight::binary().expect("nats-server");
            b.remote = Some(
                std::process::Command::new(bin)
                    .arg("-c")
                    .arg(b.root.file("remote/n3.conf"))
                    .arg("-l")
                    .arg(b.root.file("remote/n3.log"))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        let up = b.root.cotal(&["up"]).assert().success();
        assert!(stdout(&up).contains("meta leader"), "{}", stdout(&up));
        b
    }

    /// Each node's store folder (the single server's `.cotal/nats`).
    fn stores(&self) -> Vec<std::path::PathBuf> {
        if self.nodes.is_empty() {
            return vec![self.root.file(".cotal/nats")];
        }
        (1..=self.nodes.len())
            .map(|i| self.root.file(&format!(".cotal/node.n{i}/nats")))
            .collect()
    }

    /// The URL of node `i` (0-based; the single server's for one server).
    fn url_of(&self, i: usize) -> String {
        match self.nodes.get(i) {
            Some((port, _)) => format!("nats://127.0.0.1:{port}"),
            None => self.url(),
        }
    }

    fn start_on(port: u16, spaces: &str) -> Broker {
        let root = TestRoot::init();
        root.desire_on(port, spaces);
        root.apply().success();
        let up = root.cotal(&["up"]).assert().success();
        assert!(
            stdout(&up).contains("nats-server started"),
            "{}",
            stdout(&up)
        );
        Broker::running(root, port)
    }

    /// A single server the test started itself on `port` (its own way: a lowered limit, TLS
    /// files written first), driven as any other from then on.
    fn running(root: TestRoot, port: u16) -> Broker {
        Broker {
            root,
            port,
            nodes: Vec::new(),
            remote: None,
            rt: runtime(),
        }
    }

    /// `cotal ARGS` shown as `support::run` shows it, with this broker's ports redacted too.
    fn run(&self, args: &[&str]) -> String {
        self.redact_ports(crate::support::run(&self.root, args))
    }

    /// A command that already ran, shown as [`Broker::run`] shows one.
    fn shown(&self, label: &str, out: &assert_cmd::assert::Assert) -> String {
        self.redact_ports(crate::support::shown(&self.root, label, out))
    }

    fn redact_ports(&self, text: String) -> String {
        let ports = std::iter::once(self.port).chain(self.nodes.iter().flat_map(|(a, b)| [*a, *b]));
        ports.fold(text, |text, p| text.replace(&format!(":{p}"), ":[PORT]"))
    }

    fn desire(&self, spaces: &str) {
        if self.nodes.is_empty() {
            self.root.desire_on(self.port, spaces);
            return;
        }
        self.desire_replicas(3, spaces);
    }

    /// A cluster's cotal.toml with `replicas`.
    fn desire_replicas(&self, replicas: u8, spaces: &str) {
        let mut text =
            format!("version = 1\n\n[cluster]\nname = \"test\"\nreplicas = {replicas}\n");
        let remote = self.root.file("remote/.declared").exists();
        for (i, (port, route)) in self.nodes.iter().enumerate() {
            text.push_str(&format!(
                "\n[[cluster.nodes]]\nname = \"n{}\"\nport = {port}\ncluster_port = {route}\n",
                i + 1
            ));
            if remote && i == 2 {
                text.push_str("local = false\nconfig = \"remote/n3.conf\"\n");
            }
        }
        text.push('\n');
        text.push_str(spaces);
        std::fs::write(self.root.file("cotal.toml"), text).unwrap();
    }

    /// An admin of `space` (the tests that seed and inspect data need every right).
    fn creds(&self, space: &str) -> String {
        self.mint(space, &["--user", "test-client", "--profile", "admin"])
    }

    /// A user of `space`'s own account with every right, minted with the library (cotal hands
    /// out no such user: its own lifecycle users hold these rights one step at a time). The
    /// tests that break a space on purpose (delete a stream cotal provisions, which an
    /// `admin` is denied) play its owner going around cotal with it.
    fn owner(&self, space: &str) -> String {
        let root = cotal::store::Root::at(self.root.path()).unwrap();
        let record = cotal::store::account_record::load(
            &root,
            &cotal::model::SpaceName::parse(space).unwrap(),
        )
        .unwrap();
        cotal::mint::user(
            &record.account.public,
            &record.account.signing_seed,
            "owner",
            cotal::trust::jwt::Permissions::default(),
            Some(Duration::from_secs(3600)),
            None,
        )
        .unwrap()
        .creds
    }

    /// A monitoring user (`cotal creds --system monitor`): the creds file text.
    fn mint_monitor(&self) -> String {
        let out = self
            .root
            .cotal(&["creds", "--system", "monitor", "--expires", "1d"])
            .assert()
            .success();
        stdout(&out)
    }

    /// `cotal creds SPACE ARGS`: the creds file text.
    fn mint(&self, space: &str, args: &[&str]) -> String {
        let mut all = vec!["creds", space];
        all.extend_from_slice(args);
        let out = self.root.cotal(&all).assert().success();
        stdout(&out)
    }

    fn pid(&self) -> u32 {
        std::fs::read_to_string(self.root.file(".cotal/nats.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Connect a client of `space`, recording its connection events.
    fn client(&self, space: &str) -> Result<Client, String> {
        self.connect(&self.creds(space))
    }

    /// Connect with `creds`, recording the connection events and the server's errors; no
    /// reconnection.
    fn connect(&self, creds: &str) -> Result<Client, String> {
        self.connect_with_inbox(creds, None)
    }

    /// [`Broker::connect`] with the client's inbox prefix set (the $SYS users' own).
    fn connect_with_inbox(&self, creds: &str, inbox: Option<String>) -> Result<Client, String> {
        self.connect_to(&self.url(), creds, inbox)
    }

    /// Connect to `url` (a node of a cluster) with `creds`, recording the connection events.
    fn connect_to(&self, url: &str, creds: &str, inbox: Option<String>) -> Result<Client, String> {
        let events = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let log = events.clone();
        let options = async_nats::ConnectOptions::with_credentials(creds)
            .unwrap()
            .max_reconnects(Some(0))
            .connection_timeout(Duration::from_secs(5))
            .event_callback(move |event| {
                let log = log.clone();
                let tx = tx.clone();
                async move {
                    let text = event.to_string();
                    log.lock().unwrap().push(text.clone());
                    let _ = tx.send(text);
                }
            });
        let options = match inbox {
            Some(prefix) => options.custom_inbox_prefix(prefix),
            None => options,
        };
        let client = self
            .rt
            .block_on(options.connect(url))
            .map_err(|e| e.to_string())?;
        Ok(Client { client, events, rx })
    }

    fn status(&self) -> serde_json::Value {
        let out = self
            .root
            .cotal(&["status", "--format", "json"])
            .assert()
            .success();
        let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        // Every status a broker test reads (one server, clusters, every lifecycle state) is
        // checked against its schema.
        crate::support::assert_valid_for("schemas/status.schema.json", &status);
        status
    }

    fn space_status(&self, space: &str) -> Option<serde_json::Value> {
        self.status()["spaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == space)
            .cloned()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.remote.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let out = self.root.cotal(&["down"]).output();
        if out.map(|o| !o.status.success()).unwrap_or(true) {
            let mut pidfiles = vec![self.root.file(".cotal/nats.pid")];
            for i in 1..=self.nodes.len() {
                pidfiles.push(self.root.file(&format!(".cotal/node.n{i}/nats.pid")));
            }
            for file in pidfiles {
                if let Ok(pid) = std::fs::read_to_string(file)
                    && let Ok(pid) = pid.trim().parse::<i32>()
                {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

struct Client {
    client: async_nats::Client,
    events: Arc<Mutex<Vec<String>>>,
    rx: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Client {
    fn disconnects(&self) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.contains("disconnected"))
            .count()
    }
}

/// Makes a file immutable for as long as it lives (the obstacle a removal meets).
struct Immutable(std::path::PathBuf);

impl Immutable {
    fn set(path: &std::path::Path) -> Immutable {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "this test needs `chattr +i` (root, CAP_LINUX_IMMUTABLE, a filesystem with attributes)"
        );
        Immutable(path.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// The runtime a test's NATS clients run on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const TWO: &str = "[spaces.design]\n\n[spaces.release]\n";

#[test]
fn rendered_configs_pass_nats_servers_own_check() {
    let bin = cotal::broker::preflight::binary()
        .expect("the real-broker tier needs nats-server (COTAL_NATS_SERVER or PATH)");
    // The new user's two spaces (limits, protection) and every odd name.
    let walkthrough = "version = 1\n[spaces.design]\nprotect = true\n[spaces.design.limits]\nmax_connections = 200\nmax_storage = \"10GiB\"\n\n[spaces.release]\n".to_string();
    for text in [
        walkthrough,
        crate::support::declaring(&crate::support::odd_names()),
    ] {
        let root = TestRoot::init();
        std::fs::write(root.file("cotal.toml"), &text).unwrap();
        root.apply().success();
        let checked = std::process::Command::new(&bin)
            .args(["-t", "-c"])
            .arg(root.file(".cotal/auth/server.conf"))
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "{text}: {}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

#[test]
fn a_space_added_hot_is_provisioned_while_a_sibling_stays_connected() {
    let b = Broker::start("[spaces.design]\n");
    let pid = b.pid();
    let design = b.client("design").unwrap();
    assert!(
        b.space_status("design").unwrap()["servable"]
            .as_bool()
            .unwrap(),
        "up provisions"
    );

    b.desire(TWO);
    let out = b.root.apply().success();
    assert!(
        stdout(&out).contains("Reload confirmed"),
        "{}",
        stdout(&out)
    );
    assert_eq!(b.pid(), pid, "no restart");

    let release = b.space_status("release").unwrap();
    assert_eq!(release["state"], "active");
    assert_eq!(release["servable"], true);
    assert_eq!(release["streams"], 15);
    b.client("release")
        .expect("the new space accepts connections");

    // The sibling never noticed: still connected, still publishing.
    b.rt.block_on(async {
        design
            .client
            .publish("cotal.design.chat.general", "still here".into())
            .await
            .unwrap();
        design.client.flush().await.unwrap();
    });
    assert_eq!(
        design.disconnects(),
        0,
        "{:?}",
        design.events.lock().unwrap()
    );

    // Provisioning is idempotent: the plan is empty and nothing is created twice.
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn the_artifact_store_holds_objects_as_the_originals_clients_write_them_and_its_cap_follows_the_quota()
 {
    let quota = |q: &str| format!("[spaces.keep.limits]\nmax_storage = \"{q}\"\n");
    let b = Broker::start(&quota("64MiB"));
    let keep = b.client("keep").unwrap();
    let js =
        b.rt.block_on(async { async_nats::jetstream::new(keep.client.clone()) });
    let config = |js: &async_nats::jetstream::Context| {
        b.rt.block_on(async {
            let mut s = js.get_stream("OBJ_cotal_artifacts_keep").await.unwrap();
            s.info().await.unwrap().config.clone()
        })
    };
    let c = config(&js);
    assert_eq!(
        c.subjects,
        vec![
            "$O.cotal_artifacts_keep.C.>".to_string(),
            "$O.cotal_artifacts_keep.M.>".to_string()
        ]
    );
    assert_eq!(
        c.max_bytes,
        cotal::space::streams::artifact_cap(Some(64 << 20)) as i64
    );
    assert_eq!(c.discard, async_nats::jetstream::stream::DiscardPolicy::New);
    assert!(c.allow_rollup && c.allow_direct);
    // The two index buckets, as the original's clients create them.
    for bucket in ["cotal_artpossess_keep", "cotal_artattach_keep"] {
        let status = b.rt.block_on(async {
            js.get_key_value(bucket)
                .await
                .unwrap()
                .status()
                .await
                .unwrap()
        });
        assert_eq!(status.history(), 1, "{bucket}");
        assert_eq!(status.max_age(), Duration::ZERO, "{bucket}");
    }

    // A client puts an artifact through the object store layer and reads it back.
    let artifact: Vec<u8> = (0..20u32 << 20).map(|i| (i % 251) as u8).collect();
    let read = b.rt.block_on(async {
        use tokio::io::AsyncReadExt;
        let store = js.get_object_store("cotal_artifacts_keep").await.unwrap();
        store
            .put("design.pdf", &mut artifact.as_slice())
            .await
            .unwrap();
        let mut object = store.get("design.pdf").await.unwrap();
        let mut read = Vec::new();
        object.read_to_end(&mut read).await.unwrap();
        read
    });
    assert!(read == artifact, "the artifact read back is the one put");

    // A quota that would cap the store below the 20 MiB it holds is refused, nothing changed
    // (nats-server would drop the oldest chunks to fit).
    let generation = b.root.generation();
    b.desire(&quota("32MiB"));
    let refused = b.root.cotal(&["apply", "--auto-approve"]).assert().code(3);
    let text = crate::support::stderr(&refused);
    assert!(
        text.contains(
            "caps its artifact store (OBJ_cotal_artifacts_keep) at 15.5 MiB, below the 20"
        ) && text.contains("at least"),
        "{text}"
    );
    assert_eq!(b.root.generation(), generation);
    assert_eq!(config(&js).max_bytes, c.max_bytes);

    // A larger quota grows the cap with the reload, and the plan after it is empty.
    b.desire(&quota("128MiB"));
    let out = b.root.apply().success();
    assert!(
        stdout(&out).contains("update OBJ_cotal_artifacts_keep"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        config(&js).max_bytes,
        cotal::space::streams::artifact_cap(Some(128 << 20)) as i64
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn spaces_are_isolated_from_each_other() {
    let b = Broker::start(TWO);
    let mut design = b.client("design").unwrap();
    let release = b.client("release").unwrap();
    b.rt.block_on(async {
        let mut everything = design.client.subscribe(">").await.unwrap();
        design.client.flush().await.unwrap();
        for subject in [
            "cotal.release.chat.general",
            "cotal.design.chat.general",
            "secret",
        ] {
            release
                .client
                .publish(subject, "from release".into())
                .await
                .unwrap();
        }
        release.client.flush().await.unwrap();
        design
            .client
            .publish("sentinel", "from design".into())
            .await
            .unwrap();
        design.client.flush().await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(5), everything.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            first.subject.as_str(),
            "sentinel",
            "a message from another space leaked in"
        );
    });
    let _ = &mut design.rx;
}

#[test]
fn removal_evicts_the_space_and_refuses_it_while_the_sibling_keeps_publishing() {
    let b = Broker::start(TWO);
    let release_pub = b.root.account_pub("release");
    let design = b.client("design").unwrap();
    let mut release = b.client("release").unwrap();
    let release_creds = b.creds("release");
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(release.client.clone());
        js.publish("cotal.release.chat.general", "hello".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let store = b.root.file(&format!(
        ".cotal/nats/jetstream/{release_pub}/streams/CHAT_release"
    ));
    assert!(store.exists(), "the stream is in the store");

    b.desire("[spaces.design]\n");
    let plan = b.root.cotal(&["plan"]).assert().success();
    let text = stdout(&plan);
    assert!(text.contains("destroys 15 streams, 2 messages"), "{text}");
    assert!(text.contains("evicts 1 live connection"), "{text}");

    b.root.apply().success();
    b.rt.block_on(async {
        let evicted = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(e) = release.rx.recv().await {
                if e.contains("disconnected") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(evicted, Ok(true), "the removed space's client was evicted");
        design
            .client
            .publish("cotal.design.chat.general", "after".into())
            .await
            .unwrap();
        design.client.flush().await.unwrap();
    });
    assert_eq!(design.disconnects(), 0);
    // Creds minted before the removal are still well-signed, but the account is gone.
    let refused = b.rt.block_on(async {
        async_nats::ConnectOptions::with_credentials(&release_creds)
            .unwrap()
            .connect(b.url())
            .await
    });
    assert!(refused.is_err(), "a removed space refuses new connections");
    assert!(!store.exists(), "the stream folder is gone");
    assert!(
        !b.root
            .file(&format!(".cotal/nats/jetstream/{release_pub}"))
            .exists()
    );
    assert!(b.space_status("release").is_none());
    assert!(
        !b.root
            .file(&format!(".cotal/space.{}", hex::encode("release")))
            .exists()
    );
    b.root
        .cotal(&["creds", "release", "--user", "x", "--profile", "admin"])
        .assert()
        .code(1);
}

#[test]
fn a_removed_name_can_be_added_again_without_a_restart() {
    let b = Broker::start(TWO);
    let pid = b.pid();
    let old = b.root.account_pub("release");
    b.desire("[spaces.design]\n");
    b.root.apply().success();
    b.desire(TWO);
    b.root.apply().success();
    assert_ne!(b.root.account_pub("release"), old, "a new account");
    assert_eq!(b.pid(), pid);
    let release = b.client("release").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(release.client.clone());
        let ack = js
            .publish("cotal.release.chat.general", "again".into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(ack.stream, "CHAT_release");
        assert_eq!(ack.sequence, 1, "a fresh stream");
    });
    assert_eq!(b.space_status("release").unwrap()["servable"], true);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_reload_the_broker_refuses_is_rolled_back() {
    let b = Broker::start("[spaces.design]\n");
    let design = b.client("design").unwrap();
    let generation = b.root.generation();
    let conf_before = std::fs::read_to_string(b.root.file(".cotal/auth/server.conf")).unwrap();
    b.desire(TWO);
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .env("COTAL_FAULT", "break-config")
        .assert()
        .code(7);
    let err = crate::support::stderr(&out);
    // The verdict is the server's own reply to the reload request, quoted.
    assert!(err.contains("nats-server refused the reload"), "{err}");
    assert!(
        err.contains("server.conf:"),
        "the server's reason, naming the line: {err}"
    );
    assert!(
        err.contains("restored and the broker confirmed it"),
        "{err}"
    );
    assert!(
        !b.root.account_record("release").exists(),
        "the record of the refused add was put back: {err}"
    );
    assert_eq!(
        b.root.generation(),
        generation,
        "the generation is unchanged"
    );
    assert_eq!(
        std::fs::read_to_string(b.root.file(".cotal/auth/server.conf")).unwrap(),
        conf_before
    );
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    b.rt.block_on(async { design.client.flush().await.unwrap() });
    assert_eq!(design.disconnects(), 0);
    // The plan shows the refused add again; the next apply makes it.
    let plan = b.root.cotal(&["plan"]).assert().success();
    assert!(
        crate::support::stdout(&plan).contains("+ \"release\""),
        "{}",
        crate::support::stdout(&plan)
    );
    b.root.apply().success();
    assert_eq!(b.root.generation(), generation + 1);
    b.client("release").expect("added on the second try");
}

/// `n` messages on the space's general chat channel, each acknowledged by JetStream.
fn publish(b: &Broker, c: &Client, space: &str, n: usize) {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(c.client.clone());
        // A message id of its own: a publish the client retries (a cluster's leader moved
        // under load) is stored once.
        let batch = nkeys::KeyPair::new_user().public_key();
        for i in 0..n {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("{batch}-{i}").as_str());
            js.publish_with_headers(
                format!("cotal.{space}.chat.general"),
                headers,
                format!("m{i}").into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        }
    });
}

/// Messages and a KV value in a space, to prove suspension keeps data.
fn seed_data(b: &Broker, client: &Client, space: &str) {
    publish(b, client, space, 3);
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let kv = js
            .get_key_value(format!("cotal_channels_{space}"))
            .await
            .unwrap();
        kv.put("general", "topic".into()).await.unwrap();
    });
}

fn wait_for(b: &Broker, client: &mut Client, what: &str) -> bool {
    b.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(e) = client.rx.recv().await {
                if e.contains(what) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    })
}

#[test]
fn suspension_closes_and_refuses_connections_keeps_data_and_resume_restores_service() {
    let b = Broker::start(TWO);
    let design = b.client("design").unwrap();
    let release_creds = b.creds("release");
    // A client that reconnects by itself.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let release =
        b.rt.block_on(
            async_nats::ConnectOptions::with_credentials(&release_creds)
                .unwrap()
                .reconnect_delay_callback(|_| Duration::from_millis(100))
                .event_callback(move |e| {
                    let (tx, log) = (tx.clone(), log.clone());
                    async move {
                        log.lock().unwrap().push(e.to_string());
                        let _ = tx.send(e.to_string());
                    }
                })
                .connect(b.url()),
        )
        .unwrap();
    let mut release = Client {
        client: release,
        events,
        rx,
    };
    seed_data(&b, &release, "release");
    // Seed 000 §4: tenant verbs never write the file holding the operator's trust.
    let trust = std::fs::read(b.root.file(".cotal/auth/broker.json")).unwrap();

    let plan = b
        .root
        .cotal(&["space", "suspend", "release", "--auto-approve"])
        .assert()
        .success();
    let text = stdout(&plan);
    assert!(text.contains("state: active -> suspended"), "{text}");
    assert!(
        text.contains("evicts 1 live connection; data kept"),
        "{text}"
    );
    assert!(
        wait_for(&b, &mut release, "disconnected"),
        "the suspended space's client was closed"
    );
    let refused = b.rt.block_on(async {
        async_nats::ConnectOptions::with_credentials(&release_creds)
            .unwrap()
            .connect(b.url())
            .await
    });
    assert!(
        refused.is_err(),
        "a suspended space refuses new connections"
    );
    b.rt.block_on(async {
        design
            .client
            .publish("cotal.design.chat.general", "sibling".into())
            .await
            .unwrap();
        design.client.flush().await.unwrap();
    });
    assert_eq!(design.disconnects(), 0);
    let status = b.space_status("release").unwrap();
    assert_eq!(status["state"], "suspended");
    assert_eq!(status["servable"], false);

    b.root
        .cotal(&["space", "resume", "release", "--auto-approve"])
        .assert()
        .success();
    assert!(
        wait_for(&b, &mut release, "connected"),
        "the client reconnected by itself: {:?}",
        release.events.lock().unwrap()
    );
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(release.client.clone());
        let mut chat = js.get_stream("CHAT_release").await.unwrap();
        assert_eq!(
            chat.info().await.unwrap().state.messages,
            3,
            "every message kept"
        );
        let kv = js.get_key_value("cotal_channels_release").await.unwrap();
        assert_eq!(
            kv.get("general").await.unwrap().unwrap(),
            "topic".as_bytes()
        );
        assert!(kv.get("=defaults").await.unwrap().is_some());
    });
    assert_eq!(b.space_status("release").unwrap()["servable"], true);
    let audit = b
        .root
        .cotal(&["audit", "--space", "release", "--format", "json"])
        .assert()
        .success();
    let events: Vec<serde_json::Value> = stdout(&audit)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The space's lifecycle (the creds minted for its clients are audited too, as creds.*).
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .filter(|e| e.starts_with("space."))
        .collect();
    assert_eq!(
        kinds,
        [
            "space.provisioning",
            "space.added",
            "space.suspended",
            "space.resumed"
        ]
    );
    let suspended = events
        .iter()
        .find(|e| e["event"] == "space.suspended")
        .unwrap();
    assert_eq!(suspended["counts"]["connections"], 1);
    b.root
        .cotal(&["space", "add", "ops", "--auto-approve"])
        .assert()
        .success();
    b.root
        .cotal(&[
            "space",
            "rm",
            "release",
            "--auto-approve",
            "--allow-destroy",
        ])
        .assert()
        .success();
    assert_eq!(
        std::fs::read(b.root.file(".cotal/auth/broker.json")).unwrap(),
        trust,
        "suspend, resume, add and rm on a running broker leave broker.json as it was"
    );
}

#[test]
fn a_limit_change_takes_effect_without_a_restart() {
    let b = Broker::start(TWO);
    let pid = b.pid();
    b.desire("[spaces.design.limits]\nmax_connections = 1\n\n[spaces.release]\n");
    let plan = b.root.cotal(&["plan"]).assert().success();
    assert!(stdout(&plan).contains("max_connections: unlimited -> 1"));
    b.root.apply().success();
    let _first = b.client("design").expect("one connection is allowed");
    match b.client("design") {
        Ok(_) => panic!("the second connection must be refused"),
        Err(e) => assert!(
            e.contains("maximum account active connections exceeded"),
            "{e}"
        ),
    }
    assert_eq!(b.pid(), pid);
    let audit = b
        .root
        .cotal(&["audit", "--space", "design", "--format", "json"])
        .assert()
        .success();
    assert!(stdout(&audit).contains("\"space.limits_changed\""));
}

#[test]
fn provisioning_three_times_leaves_one_account_and_one_set_of_streams() {
    let b = Broker::start("[spaces.design]\n");
    let account = b.root.account_pub("design");
    for _ in 0..2 {
        b.root
            .apply()
            .success()
            .stdout(predicates::str::contains("No changes."));
        b.root
            .cotal(&["space", "add", "design", "--auto-approve"])
            .assert()
            .success();
    }
    assert_eq!(b.root.account_pub("design"), account);
    let status = b.space_status("design").unwrap();
    assert_eq!(status["streams"], 15);
    assert_eq!(
        status["messages"], 1,
        "the default delivery class, set once"
    );
    let records = std::fs::read_dir(b.root.file(".cotal/auth"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("account.")
        })
        .count();
    assert_eq!(records, 1);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_failure_at_any_provisioning_step_never_yields_active_and_a_rerun_completes_it() {
    for point in [
        "after-record-written",
        "after-config-promoted",
        "before-reload",
        "after-reload",
        "mid-provision",
    ] {
        let b = Broker::start("[spaces.design]\n");
        b.desire(TWO);
        let crashed = b
            .root
            .cotal(&["apply", "--auto-approve"])
            .env("COTAL_CRASH_AT", point)
            .output()
            .unwrap();
        assert!(!crashed.status.success(), "{point}: the apply crashed");
        if let Some(release) = b.space_status("release") {
            assert_ne!(release["state"], "active", "{point}: {release}");
            assert_eq!(release["servable"], false, "{point}");
        }
        b.root
            .cotal(&["apply", "--auto-approve"])
            .assert()
            .success();
        let release = b.space_status("release").unwrap();
        assert_eq!(release["state"], "active", "{point}");
        assert_eq!(release["servable"], true, "{point}");
        assert_eq!(release["streams"], 15, "{point}");
        b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(0);
        assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    }
}

impl Broker {
    /// Start a broker on a root prepared by the caller.
    fn up(root: TestRoot, port: u16) -> Broker {
        root.cotal(&["up"]).assert().success();
        Broker::running(root, port)
    }
}

/// One stored message: (stream, sequence, subject, headers, payload).
type Stored = (String, u64, String, Vec<(String, String)>, Vec<u8>);

/// Every message of every backed-up stream of `space`.
fn dump(b: &Broker, space: &str) -> Vec<Stored> {
    let client = b.client(space).unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut out = Vec::new();
        for name in cotal::backup::backed_up(space) {
            let mut stream = js.get_stream(&name).await.unwrap();
            let state = stream.info().await.unwrap().state.clone();
            for seq in state.first_sequence..=state.last_sequence {
                if seq == 0 {
                    continue;
                }
                let Ok(m) = stream.get_raw_message(seq).await else {
                    continue;
                };
                let mut headers: Vec<(String, String)> = m
                    .headers
                    .iter()
                    .flat_map(|(k, vs)| vs.iter().map(move |v| (k.to_string(), v.to_string())))
                    .collect();
                headers.sort();
                out.push((
                    name.clone(),
                    m.sequence,
                    m.subject.to_string(),
                    headers,
                    m.payload.to_vec(),
                ));
            }
        }
        out
    })
}

fn store_tree(root: &TestRoot) -> crate::support::Tree {
    crate::support::Tree::of(&root.file(".cotal/nats"))
}

#[test]
fn a_space_is_backed_up_restored_on_another_broker_and_moved_exactly() {
    // Root A: design with data of every kind, beside a sibling.
    let a = Broker::start(TWO);
    let design = a.client("design").unwrap();
    let sibling = a.client("release").unwrap();
    a.rt.block_on(async {
        let js = async_nats::jetstream::new(design.client.clone());
        for (i, subject) in [
            "cotal.design.chat.general",
            "cotal.design.chat.team.backend",
            "cotal.design.inst.alice",
            "cotal.design.dinbox.bob",
        ]
        .iter()
        .enumerate()
        {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Cotal-Envelope", format!("v1-{i}").as_str());
            js.publish_with_headers(subject.to_string(), headers, format!("payload {i}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        for i in 0..3 {
            js.publish("cotal.design.svc.build", format!("job {i}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        for bucket in ["channels", "members", "acl"] {
            let kv = js
                .get_key_value(format!("cotal_{bucket}_design"))
                .await
                .unwrap();
            kv.put("general", format!("{bucket} value").into())
                .await
                .unwrap();
        }
        let sjs = async_nats::jetstream::new(sibling.client.clone());
        sjs.publish("cotal.release.chat.general", "sibling data".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let before = dump(&a, "design");
    assert!(before.len() >= 11, "{before:?}");
    drop(sibling);

    // The fence: suspended before the cut, the space accepts no write on A from then on (its
    // client is closed and refused), so nothing written after the backup can be lost.
    let mut design = design;
    a.root
        .cotal(&["space", "suspend", "design", "--auto-approve"])
        .assert()
        .success();
    assert!(wait_for(&a, &mut design, "disconnected"));
    assert!(
        a.client("design").is_err(),
        "the fenced space refuses writers"
    );

    let artifact = tempfile::tempdir().unwrap();
    let dir = artifact.path().join("design.backup");
    let dir_s = dir.to_str().unwrap();
    let out = a
        .root
        .cotal(&["space", "backup", "design", dir_s])
        .assert()
        .code(3);
    assert!(crate::support::stderr(&out).contains("needs a cut"));
    a.root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let exported = a
        .root
        .cotal(&["space", "backup", "design", dir_s])
        .assert()
        .success();
    assert!(
        stdout(&exported).contains("this export is a move (recorded, phase exported"),
        "{}",
        stdout(&exported)
    );
    // The export of the fenced space is a recorded move, with the artifact's digest.
    let moving = a
        .root
        .cotal(&["space", "relocation", "design", "--format", "json"])
        .assert()
        .success();
    let moving: serde_json::Value = serde_json::from_str(&stdout(&moving)).unwrap();
    crate::support::assert_valid_for("schemas/space-relocation.schema.json", &moving);
    assert_eq!(moving["relocation"]["phase"], "exported", "{moving}");
    let digest = moving["relocation"]["artifact_digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        digest,
        cotal::trust::digest::sha256(&std::fs::read(dir.join("manifest.json")).unwrap())
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["space"], "design");
    assert_eq!(manifest["account"], a.root.account_pub("design"));
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(
        !text.contains("release"),
        "the sibling never appears in the artifact"
    );
    assert!(!text.contains("eyJ"), "no JWT in the artifact");
    assert!(!text.contains("\"seed"), "no seed in the artifact");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("manifest.json")), 0o600);
    let task = manifest["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "TASK_design")
        .unwrap();
    assert_eq!(task["messages"], 3, "the work-queue backlog");
    a.root.cotal(&["up"]).assert().success();
    assert!(
        a.client("design").is_err(),
        "A serves again, the moved space still fenced"
    );

    // Root B, another broker: the space is added while B is stopped, then restored, then served.
    let b_root = TestRoot::init();
    let b_port = free_port();
    b_root.desire_on(b_port, "[spaces.design]\n");
    b_root.apply().success();
    b_root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let out = b_root
        .cotal(&["space", "restore", "design", dir_s])
        .assert()
        .code(3);
    assert!(crate::support::stderr(&out).contains("--relocate"));
    let receipt = artifact.path().join("receipt.json");
    let restored = b_root
        .cotal(&[
            "space",
            "restore",
            "design",
            dir_s,
            "--relocate",
            "--receipt",
            receipt.to_str().unwrap(),
        ])
        .assert()
        .success();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    assert_eq!(written["artifact_digest"], digest.as_str());
    assert_eq!(written["source_account"], a.root.account_pub("design"));
    assert!(
        stdout(&restored)
            .contains("TASK_design                         3 messages  sequences 1..3  ok"),
        "{}",
        stdout(&restored)
    );
    let b = Broker::up(b_root, b_port);
    assert_eq!(b.space_status("design").unwrap()["servable"], true);
    // The restored registry (its channels bucket) and B's file agree: the plan is empty, and
    // names the channel the file does not declare.
    let plan = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert!(
        stdout(&plan).contains(r#"kept: "general""#),
        "{}",
        stdout(&plan)
    );
    let after = dump(&b, "design");
    assert_eq!(
        after, before,
        "same subjects, payloads, headers and sequence numbers"
    );
    let client = b.client("design").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        for bucket in ["channels", "members", "acl"] {
            let kv = js
                .get_key_value(format!("cotal_{bucket}_design"))
                .await
                .unwrap();
            assert_eq!(
                kv.get("general").await.unwrap().unwrap(),
                format!("{bucket} value").as_bytes()
            );
        }
        let ack = js
            .publish("cotal.design.chat.general", "new".into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(
            ack.sequence > 1,
            "sequences continue after the restored ones"
        );
    });

    // Only now, with B verified, the space leaves A: its removal needs B's receipt, and only
    // one of the artifact A exported, counting what A exported.
    let rm = |extra: &[&str]| {
        let mut args = vec!["space", "rm", "design", "--auto-approve", "--allow-destroy"];
        args.extend_from_slice(extra);
        a.root.cotal(&args).assert()
    };
    let refused = rm(&[]).code(3);
    let why = crate::support::stderr(&refused);
    assert!(
        why.contains("is being moved")
            && why.contains("phase exported")
            && why.contains("--relocated"),
        "{why}"
    );
    let forged = artifact.path().join("forged.json");
    let mut other = written.clone();
    other["artifact_digest"] = serde_json::json!(format!("sha256:{}", "0".repeat(64)));
    std::fs::write(&forged, serde_json::to_vec(&other).unwrap()).unwrap();
    let refused = rm(&["--relocated", forged.to_str().unwrap()]).code(3);
    assert!(
        crate::support::stderr(&refused).contains("does not prove it"),
        "{}",
        crate::support::stderr(&refused)
    );
    let mut short = written.clone();
    short["streams"][0]["messages"] = serde_json::json!(0);
    std::fs::write(&forged, serde_json::to_vec(&short).unwrap()).unwrap();
    rm(&["--relocated", forged.to_str().unwrap()]).code(3);
    assert!(a.space_status("design").is_some(), "nothing was removed");
    // `plan` takes the receipt as `apply` does: with the file edited, the removal is planned.
    let declared = std::fs::read_to_string(a.root.file("cotal.toml")).unwrap();
    a.root.desire_on(a.port, "[spaces.release]\n");
    a.root
        .cotal(&["plan", "--relocated", receipt.to_str().unwrap()])
        .assert()
        .success();
    a.root.cotal(&["plan"]).assert().code(3);
    std::fs::write(a.root.file("cotal.toml"), declared).unwrap();
    rm(&["--relocated", receipt.to_str().unwrap()]).success();
    assert!(a.space_status("design").is_none());
    assert_eq!(a.space_status("release").unwrap()["servable"], true);
    let audit = a
        .root
        .cotal(&["audit", "--space", "design", "--format", "json"])
        .assert()
        .success();
    let moves: Vec<String> = stdout(&audit)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|e| e["event"].as_str().map(str::to_string))
        .filter(|e| e.starts_with("relocation."))
        .collect();
    assert_eq!(
        moves,
        [
            "relocation.started",
            "relocation.fenced",
            "relocation.exported",
            "relocation.verified",
            "relocation.completed"
        ]
    );
    // The privileged operations of the move are audited on each side.
    let a_audit = std::fs::read_to_string(a.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(a_audit.contains("\"broker.cut\"") && a_audit.contains("\"space.backed_up\""));
    let b_audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(b_audit.contains("\"space.restored\""));
}

#[test]
fn backup_and_restore_refuse_bad_input_and_change_nothing() {
    let a = Broker::start(TWO);
    a.root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let artifacts = tempfile::tempdir().unwrap();
    let good = artifacts.path().join("good");
    a.root
        .cotal(&["space", "backup", "design", good.to_str().unwrap()])
        .assert()
        .success();

    // Backup into an existing folder.
    let out = a
        .root
        .cotal(&["space", "backup", "design", good.to_str().unwrap()])
        .assert()
        .code(3);
    assert!(crate::support::stderr(&out).contains("already exists"));

    // A stream that belongs to no tenant.
    let stray = a
        .root
        .file(".cotal/nats/jetstream/AXSTRAY/streams/CHAT_ghost");
    std::fs::create_dir_all(&stray).unwrap();
    let out = a
        .root
        .cotal(&[
            "space",
            "backup",
            "design",
            artifacts.path().join("x").to_str().unwrap(),
        ])
        .assert()
        .code(3);
    assert!(
        crate::support::stderr(&out).contains("belong to no tenant"),
        "{}",
        crate::support::stderr(&out)
    );
    assert!(!artifacts.path().join("x").exists());
    std::fs::remove_dir_all(a.root.file(".cotal/nats/jetstream/AXSTRAY")).unwrap();
    // A stream in the space's own folder that is not in its stream list: the artifact would
    // leave it out without a word, so the backup refuses, naming it.
    let mine = a.root.file(&format!(
        ".cotal/nats/jetstream/{}/streams/MINE",
        a.root.account_pub("design")
    ));
    std::fs::create_dir_all(&mine).unwrap();
    let out = a
        .root
        .cotal(&[
            "space",
            "backup",
            "design",
            artifacts.path().join("y").to_str().unwrap(),
        ])
        .assert()
        .code(3);
    assert!(
        crate::support::stderr(&out).contains("outside its stream list: MINE"),
        "{}",
        crate::support::stderr(&out)
    );
    assert!(!artifacts.path().join("y").exists());
    std::fs::remove_dir_all(&mine).unwrap();

    let copy = |name: &str| {
        let to = artifacts.path().join(name);
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(&good)
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success());
        to
    };
    let tampered = copy("tampered");
    let meta = tampered.join("streams/CHAT_design/meta.inf");
    let mut bytes = std::fs::read(&meta).unwrap();
    bytes[0] ^= 0x20;
    std::fs::write(&meta, bytes).unwrap();
    let truncated = copy("truncated");
    std::fs::remove_file(truncated.join("manifest.json")).unwrap();
    // A manifest that is a link to an endless file: refused by what it is, never read.
    let endless = copy("endless");
    std::fs::remove_file(endless.join("manifest.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", endless.join("manifest.json")).unwrap();
    // A manifest grown sparse past what cotal reads of one: refused by its size, unread.
    let huge = copy("huge");
    std::fs::OpenOptions::new()
        .write(true)
        .open(huge.join("manifest.json"))
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let missing = copy("missing");
    std::fs::remove_dir_all(missing.join("streams/DM_design")).unwrap();
    let extra = copy("extra");
    std::fs::write(extra.join("streams/CHAT_design/smuggled"), b"x").unwrap();
    // A stream folder the manifest does not list.
    let extra_stream = copy("extra-stream");
    std::fs::create_dir_all(extra_stream.join("streams/SMUGGLED_design")).unwrap();
    std::fs::write(extra_stream.join("streams/SMUGGLED_design/meta.inf"), b"{}").unwrap();
    // A manifest rewritten (a count raised) after the source signed it.
    let rewritten = copy("rewritten");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rewritten.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], 2, "{manifest}");
    assert_eq!(
        manifest["operator"].as_str().map(|o| o.starts_with('O')),
        Some(true),
        "{manifest}"
    );
    let n = manifest["streams"][0]["messages"].as_u64().unwrap();
    manifest["streams"][0]["messages"] = (n + 1).into();
    std::fs::write(
        rewritten.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    // The same, its commitment stripped and its format set back to 1 (unsigned).
    let stripped = copy("stripped");
    manifest["format"] = 1.into();
    manifest.as_object_mut().unwrap().remove("commitment");
    std::fs::write(
        stripped.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    // A stream folder that is a link to an intact copy elsewhere: refused, never followed.
    let linked = copy("linked");
    let elsewhere = artifacts.path().join("elsewhere");
    std::fs::rename(linked.join("streams/DM_design"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, linked.join("streams/DM_design")).unwrap();
    // A file grown sparse to 2 GiB: refused by its size, unread.
    let sparse = copy("sparse");
    std::fs::OpenOptions::new()
        .write(true)
        .open(sparse.join("streams/CHAT_design/meta.inf"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    // A backup to a dangling link: refused, nothing left behind.
    let dangling = artifacts.path().join("dangling");
    std::os::unix::fs::symlink(artifacts.path().join("nowhere"), &dangling).unwrap();
    let out = a
        .root
        .cotal(&["space", "backup", "design", dangling.to_str().unwrap()])
        .assert()
        .code(3);
    assert!(
        crate::support::stderr(&out).contains("is a link"),
        "{}",
        crate::support::stderr(&out)
    );
    assert!(!artifacts.path().join(".dangling.cotal-partial").exists());
    assert!(!artifacts.path().join("nowhere").exists());

    // Restoring needs an empty namespace: design's streams exist, so free it first by restoring
    // into a root whose design has no streams yet.
    let b = TestRoot::init();
    b.desire_on(free_port(), "[spaces.design]\n\n[spaces.release]\n");
    b.apply().success();
    b.cotal(&["down", "--preserve-state"]).assert().success();
    let store_before = store_tree(&b);
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "tampered",
            vec![
                "space",
                "restore",
                "design",
                tampered.to_str().unwrap(),
                "--relocate",
            ],
            "does not match its checksum",
        ),
        (
            "truncated",
            vec![
                "space",
                "restore",
                "design",
                truncated.to_str().unwrap(),
                "--relocate",
            ],
            "manifest.json is missing",
        ),
        (
            "manifest linked to /dev/zero",
            vec![
                "space",
                "restore",
                "design",
                endless.to_str().unwrap(),
                "--relocate",
            ],
            "manifest.json is a symbolic link, not a regular file",
        ),
        (
            "huge manifest",
            vec![
                "space",
                "restore",
                "design",
                huge.to_str().unwrap(),
                "--relocate",
            ],
            "manifest.json is larger than 16777216 bytes",
        ),
        (
            "missing stream",
            vec![
                "space",
                "restore",
                "design",
                missing.to_str().unwrap(),
                "--relocate",
            ],
            "DM_design is missing",
        ),
        (
            "extra file",
            vec![
                "space",
                "restore",
                "design",
                extra.to_str().unwrap(),
                "--relocate",
            ],
            "does not list",
        ),
        (
            "extra stream folder",
            vec![
                "space",
                "restore",
                "design",
                extra_stream.to_str().unwrap(),
                "--relocate",
            ],
            "streams/ holds SMUGGLED_design, which the manifest does not list",
        ),
        (
            "rewritten manifest",
            vec![
                "space",
                "restore",
                "design",
                rewritten.to_str().unwrap(),
                "--relocate",
            ],
            "does not match its chain commitment",
        ),
        (
            "commitment stripped, format 1",
            vec![
                "space",
                "restore",
                "design",
                stripped.to_str().unwrap(),
                "--relocate",
            ],
            "format 1 carries no chain commitment",
        ),
        (
            "linked stream folder",
            vec![
                "space",
                "restore",
                "design",
                linked.to_str().unwrap(),
                "--relocate",
            ],
            "or is a link",
        ),
        (
            "sparse file",
            vec![
                "space",
                "restore",
                "design",
                sparse.to_str().unwrap(),
                "--relocate",
            ],
            "is 2147483648 bytes, the manifest says",
        ),
        (
            "another space",
            vec![
                "space",
                "restore",
                "release",
                good.to_str().unwrap(),
                "--relocate",
            ],
            "is a backup of space \"design\"",
        ),
        (
            "other account",
            vec!["space", "restore", "design", good.to_str().unwrap()],
            "pass --relocate",
        ),
    ];
    for (what, args, expected) in cases {
        let out = b.cotal(&args).assert().code(3);
        assert!(
            crate::support::stderr(&out).contains(expected),
            "{what}: {}",
            crate::support::stderr(&out)
        );
        assert_eq!(
            store_tree(&b),
            store_before,
            "{what}: the store is unchanged"
        );
    }
    // Into a namespace that already has streams: A's own design.
    let store_a = store_tree(&a.root);
    let out = a
        .root
        .cotal(&["space", "restore", "design", good.to_str().unwrap()])
        .assert()
        .code(3);
    assert!(
        crate::support::stderr(&out).contains("already has"),
        "{}",
        crate::support::stderr(&out)
    );
    assert_eq!(store_tree(&a.root), store_a);
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every nkey seed held by a root's files.
fn all_seeds(root: &TestRoot) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.file(".cotal")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                if !p.ends_with("nats") {
                    stack.push(p);
                }
                continue;
            }
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
            for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
                if nkeys::KeyPair::from_seed(word).is_ok() {
                    out.push(word.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn secrets_never_leave_their_files_and_every_secret_file_has_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let b = Broker::start(TWO);
    let creds_file = b.root.file("alice.creds");
    let mut printed = String::new();
    let mut run = |args: &[&str]| {
        let out = b.root.cotal(args).output().unwrap();
        printed.push_str(&String::from_utf8_lossy(&out.stdout));
        printed.push_str(&String::from_utf8_lossy(&out.stderr));
    };
    b.desire("[spaces.design]\nstate = \"suspended\"\n\n[spaces.ops]\n");
    for args in [
        &["plan"][..],
        &["plan", "--format", "json"][..],
        &["plan", "--format", "markdown"][..],
        &["-vvv", "plan"][..],
        &["-vvv", "apply", "--auto-approve", "--allow-destroy"][..],
        &["-vvv", "status"][..],
        &["status", "--format", "json"][..],
        &["space", "list", "--format", "json"][..],
        &["-vvv", "space", "resume", "design", "--auto-approve"][..],
        &[
            "creds",
            "ops",
            "--user",
            "alice",
            "--profile",
            "admin",
            "--out",
            creds_file.to_str().unwrap(),
        ][..],
        &["audit"][..],
        &["audit", "--format", "json"][..],
        &["init"][..],
        &["space", "add", "bad", "--limit", "max_storage=lots"][..],
        &["-vvv", "down", "--preserve-state"][..],
        &[
            "-vvv",
            "space",
            "backup",
            "ops",
            b.root.file("ops.backup").to_str().unwrap(),
        ][..],
        &["-vvv", "up"][..],
    ] {
        run(args);
    }
    let seeds = all_seeds(&b.root);
    assert!(
        seeds.len() >= 10,
        "operator, system, accounts, signing keys, $SYS users: {}",
        seeds.len()
    );
    for word in printed.split(|c: char| !c.is_ascii_alphanumeric()) {
        assert!(
            nkeys::KeyPair::from_seed(word).is_err(),
            "a seed was printed"
        );
    }
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    let manifest = std::fs::read_to_string(b.root.file("ops.backup/manifest.json")).unwrap();
    for seed in &seeds {
        assert!(!audit.contains(seed.as_str()), "a seed reached the audit");
        assert!(
            !manifest.contains(seed.as_str()),
            "a seed reached a backup manifest"
        );
    }

    // Modes of docs/design/architecture.md, "The .cotal folder".
    let mode =
        |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&creds_file), 0o600);
    for dir in [".cotal", ".cotal/auth", ".cotal/maintenance"] {
        assert_eq!(mode(&b.root.file(dir)), 0o700, "{dir}");
    }
    for entry in std::fs::read_dir(b.root.file(".cotal/auth"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let want = if name == "broker-config.json" {
            0o644
        } else {
            0o600
        };
        assert_eq!(mode(&entry.path()), want, "{name}");
    }
    for entry in std::fs::read_dir(b.root.file(".cotal")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("space.") {
            assert_eq!(mode(&entry.path()), 0o700, "{name}");
            for f in std::fs::read_dir(entry.path()).unwrap().flatten() {
                assert_eq!(
                    mode(&f.path()),
                    0o600,
                    "{name}/{}",
                    f.file_name().to_string_lossy()
                );
            }
        }
    }
    for file in [
        ".cotal/audit.jsonl",
        ".cotal/nats.pid",
        ".cotal/maintenance/lock",
    ] {
        assert_eq!(mode(&b.root.file(file)), 0o600, "{file}");
    }
}

#[test]
fn up_renders_from_the_inventory_when_the_config_drifted_and_leaves_pending_edits_alone() {
    let root = TestRoot::init();
    let port = free_port();
    root.desire_on(port, "[spaces.design]\n");
    root.apply().success();
    let conf = root.file(".cotal/auth/server.conf");
    let rendered = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, format!("{rendered}# edited by hand\n")).unwrap();
    root.desire_on(port, "[spaces.design]\n\n[spaces.pending]\n");
    let b = Broker::up(root, port);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        rendered,
        "up promoted the inventory's rendering"
    );
    assert_eq!(b.root.generation(), 2);
    assert!(
        b.space_status("pending").is_none(),
        "up does not apply cotal.toml"
    );
    let plan = b.root.cotal(&["plan"]).assert().success();
    let text = stdout(&plan);
    assert!(
        text.contains("+ \"pending\" add") && !text.contains("differs"),
        "{text}"
    );
}

#[test]
fn a_stream_whose_config_drifted_is_a_change_and_apply_repairs_it() {
    let b = Broker::start("[spaces.design]\n");
    let client = b.client("design").unwrap();
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut chat = js.get_stream("CHAT_design").await.unwrap();
        let mut config = chat.info().await.unwrap().config.clone();
        config.max_messages_per_subject = 10;
        js.update_stream(config).await.unwrap();
    });
    let plan = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(2);
    let text = stdout(&plan);
    assert!(text.contains("~ \"design\" change"), "{text}");
    assert!(
        text.contains("update CHAT_design (drifted: max_msgs_per_subject)"),
        "{text}"
    );
    assert_eq!(
        b.space_status("design").unwrap()["servable"],
        false,
        "a drifted space is not servable"
    );
    b.root.apply().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert_eq!(b.space_status("design").unwrap()["servable"], true);
}

/// The configs-left-out figures of a plan's debug log: (whether JSZ left the configs out, the
/// accounts the drift cache vouched for, the accounts asked for their configs again).
fn configs_vouched(root: &TestRoot) -> (bool, usize, usize) {
    let out = root
        .cotal(&["plan"])
        .env("RUST_LOG", "cotal=debug")
        .assert()
        .success();
    let log = crate::support::stderr(&out);
    let line = log
        .lines()
        .find(|l| l.contains("stream configs vouched for by the drift cache"))
        .unwrap_or_else(|| panic!("the plan asked for the live figures: {log}"));
    let field = |name: &str| -> String {
        line.split(&format!("{name}="))
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_alphanumeric()).next())
            .unwrap_or_else(|| panic!("{name} in {line}"))
            .to_string()
    };
    (
        field("lean") == "true",
        field("vouched").parse().unwrap(),
        field("asked").parse().unwrap(),
    )
}

/// The drift cache (`.cotal/maintenance/drift.json`) spares a plan every config the broker's
/// API counters vouch for; one API request of a tenant voids its account's verdict, and only its,
/// so its drift is found; an apply judges again what it touched and carries the rest; a verdict
/// judged on another server process vouches for nothing.
#[test]
fn the_drift_cache_spares_unchanged_configs_and_a_tenants_update_is_still_found() {
    let b = Broker::start("[spaces.design]\n[spaces.release]\n");
    // `up`'s refresh judged both accounts (their registries known from `up`'s own seed).
    assert!(b.root.file(".cotal/maintenance/drift.json").exists());
    assert_eq!(
        configs_vouched(&b.root),
        (true, 2, 0),
        "no config is asked for: the cache vouches for both accounts"
    );
    // The tenant reads its stream's config (requests counted), then the broker starts again
    // with no registry cached: `up`'s refresh reads both registries (API requests of their
    // own) and judges both accounts again after the reads, on the new process.
    let client = b.client("design").unwrap();
    let mut config = b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut chat = js.get_stream("CHAT_design").await.unwrap();
        chat.info().await.unwrap().config.clone()
    });
    b.root.cotal(&["down"]).assert().success();
    std::fs::remove_file(b.root.file(".cotal/maintenance/registries.json")).unwrap();
    let up = b
        .root
        .cotal(&["up"])
        .env("RUST_LOG", "cotal=debug")
        .assert()
        .success();
    assert!(
        crate::support::stderr(&up)
            .lines()
            .any(|l| l.contains("channel registries known") && l.contains("read=2")),
        "the refresh read both registries"
    );
    assert_eq!(configs_vouched(&b.root), (true, 2, 0));
    // One API request: the update.
    config.max_messages_per_subject = 10;
    let client = b.client("design").unwrap();
    let answer = b.rt.block_on(async {
        client
            .client
            .request(
                "$JS.API.STREAM.UPDATE.CHAT_design",
                serde_json::to_vec(&config).unwrap().into(),
            )
            .await
            .unwrap()
    });
    assert!(
        !String::from_utf8_lossy(&answer.payload).contains("\"error\""),
        "{:?}",
        answer.payload
    );
    assert_eq!(
        configs_vouched(&b.root),
        (true, 1, 1),
        "one API request voids its account's verdict, and only its"
    );
    let plan = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(2);
    assert!(
        stdout(&plan).contains("update CHAT_design (drifted: max_msgs_per_subject)"),
        "{}",
        stdout(&plan)
    );
    b.root.apply().success();
    assert_eq!(
        configs_vouched(&b.root),
        (true, 2, 0),
        "the apply judged the account it repaired again and carried the other's verdict"
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // Another server process: the verdicts judged on the one before vouch for nothing.
    let judged_before = std::fs::read(b.root.file(".cotal/maintenance/drift.json")).unwrap();
    b.root.cotal(&["down"]).assert().success();
    b.root.cotal(&["up"]).assert().success();
    std::fs::write(b.root.file(".cotal/maintenance/drift.json"), judged_before).unwrap();
    assert_eq!(
        configs_vouched(&b.root),
        (false, 0, 0),
        "JSZ is asked for every config at once"
    );
}

#[test]
fn a_thousand_spaces_with_the_starter_defaults_boot_on_a_machine_of_this_size() {
    // `cotal init` writes the starter file, whose [defaults.limits] every space takes.
    let root = TestRoot::init();
    let port = free_port();
    let starter = std::fs::read_to_string(root.file("cotal.toml")).unwrap();
    let mut text = starter.replace("port = 4222", &format!("port = {port}"));
    for i in 1..=1000 {
        text.push_str(&format!("[spaces.s{i:04}]\n"));
    }
    std::fs::write(root.file("cotal.toml"), text).unwrap();
    root.apply().success();
    let up = root.cotal(&["up"]).assert().success();
    assert!(
        stdout(&up).contains("1000 spaces served"),
        "{}",
        stdout(&up)
    );
    let status = root
        .cotal(&["status", "--format", "json"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    let servable = status["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["servable"] == true)
        .count();
    assert_eq!(servable, 1000, "every space has its streams and buckets");
    // `up`'s refresh knew every registry from its own seed: the next plan asks for no config.
    assert_eq!(configs_vouched(&root), (true, 1000, 0));
    // Started again with no registry cached, the refresh reads every registry, so every
    // account's counters move: past 32, they are judged again from one report of every config
    // after the reads, and the next plan still asks for none.
    root.cotal(&["down"]).assert().success();
    std::fs::remove_file(root.file(".cotal/maintenance/registries.json")).unwrap();
    root.cotal(&["up"]).assert().success();
    assert_eq!(configs_vouched(&root), (true, 1000, 0));
    for store in ["file", "memory"] {
        let s = &status["jetstream"][store];
        assert!(
            s["committed"].as_u64().unwrap() <= s["size"].as_u64().unwrap(),
            "{store}: {s}"
        );
    }
    root.cotal(&["down"]).assert().success();
}

#[test]
fn up_gives_the_broker_the_hosts_open_file_limit_and_status_shows_what_it_holds() {
    // `up` runs with its soft limit lowered below the hard one: the broker gets the hard one.
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    assert!(hard > 256, "the host allows more than 256 open files");
    let port = free_port();
    let root = TestRoot::init();
    root.desire_on(port, "[spaces.design]\n");
    root.apply().success();
    let up = crate::support::limited(&root, "-Sn 256", &["up"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let b = Broker::running(root, port);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", b.pid())).unwrap();
    assert_eq!(
        cotal::broker::process::soft_open_files(&limits),
        Some(hard),
        "the broker runs with the soft limit raised to the hard one: {limits}"
    );
    let status = b.status();
    assert_eq!(status["open_files"]["limit"], hard, "{status}");
    assert_eq!(status["open_files"]["source"], "broker", "{status}");
    assert_eq!(
        status["open_files"]["needed"],
        cotal::plan::capacity::OPEN_FILES_RESERVED + cotal::plan::capacity::open_files_per_space()
    );
}

/// `GET path` on `127.0.0.1:port`: the status line and the body.
fn http_get(port: u16, path: &str) -> Result<(String, String), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or("no body")?;
    Ok((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

#[test]
fn the_monitoring_listener_is_declared_served_and_only_moved_with_a_restart() {
    let monitor = free_port();
    let b = Broker::start(&format!(
        "[broker.monitoring]\nhttp = \"127.0.0.1:{monitor}\"\n\n[spaces.design]\n"
    ));
    let (status, body) = http_get(monitor, "/varz").unwrap();
    assert!(status.contains("200"), "{status}");
    let varz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(varz["port"], b.port, "{varz}");
    // Moving it cannot be reloaded: refused while the broker runs, naming the restart.
    let moved = free_port();
    let before = b.root.snapshot();
    b.desire(&format!(
        "[broker.monitoring]\nhttp = \"127.0.0.1:{moved}\"\n\n[spaces.design]\n"
    ));
    let out = b.root.cotal(&["apply", "--auto-approve"]).assert().code(3);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("the monitoring or websocket listener changes"),
        "{err}"
    );
    assert!(
        err.contains("`cotal down`, `cotal apply`, then `cotal up`"),
        "{err}"
    );
    assert_eq!(
        b.root.snapshot().without("cotal.toml"),
        before.without("cotal.toml")
    );
    assert!(
        http_get(monitor, "/varz").is_ok(),
        "still served where it was"
    );
    // The metrics a textfile collector reads.
    let metrics = stdout(
        &b.root
            .cotal(&["status", "--format", "prometheus"])
            .assert()
            .success(),
    );
    assert!(metrics.contains("cotal_broker_up 1"), "{metrics}");
    assert!(
        metrics.contains("cotal_space_servable{space=\"design\"} 1"),
        "{metrics}"
    );
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
}

#[test]
fn a_browser_client_connects_over_the_websocket_listener_with_its_spaces_creds() {
    let ws = free_port();
    let b = Broker::start(&format!(
        "[broker.websocket]\nport = {ws}\nno_tls = true\n\n[spaces.design]\n"
    ));
    let creds = b.creds("design");
    b.rt.block_on(async {
        let client = async_nats::ConnectOptions::with_credentials(&creds)
            .unwrap()
            .connect(format!("ws://127.0.0.1:{ws}"))
            .await
            .expect("a websocket client connects with the space's creds");
        let mut sub = client.subscribe("cotal.ws.probe").await.unwrap();
        client
            .publish("cotal.ws.probe", "over websocket".into())
            .await
            .unwrap();
        client.flush().await.unwrap();
        let got = futures::StreamExt::next(&mut sub).await.unwrap();
        assert_eq!(&got.payload[..], b"over websocket");
    });
    // Closing it needs a restart: refused while the broker runs.
    b.desire("[spaces.design]\n");
    let err = crate::support::stderr(&b.root.cotal(&["plan"]).assert().code(3));
    assert!(err.contains("websocket"), "{err}");
}

#[test]
fn an_include_sets_what_cotal_does_not_model_hot_and_what_it_owns_is_refused() {
    let monitor = free_port();
    let port = free_port();
    let root = TestRoot::init();
    std::fs::write(
        root.file("extra.conf"),
        "# tuning\nmax_connections: 1000\nwrite_deadline: \"3s\"\nlame_duck_duration: \"45s\"\n",
    )
    .unwrap();
    let spaces = format!(
        "include = \"extra.conf\"\n\n[broker.monitoring]\nhttp = \"127.0.0.1:{monitor}\"\n\n[spaces.design]\n"
    );
    // `include` is a key of [broker]: it goes before the [broker.monitoring] table.
    root.desire_on(port, &spaces);
    root.apply().success();
    root.cotal(&["up"]).assert().success();
    let b = Broker::running(root, port);
    let varz = |_: &Broker| -> serde_json::Value {
        serde_json::from_str(&http_get(monitor, "/varz").unwrap().1).unwrap()
    };
    let v = varz(&b);
    assert_eq!(v["max_connections"], 1000, "{v}");
    assert_eq!(v["write_deadline"], 3_000_000_000u64, "{v}");

    // A change of the include is planned with its diff and applied hot; the reload is confirmed
    // by the digest nats-server computes over the included values.
    std::fs::write(
        b.root.file("extra.conf"),
        "# tuning\nmax_connections: 2000\nwrite_deadline: \"3s\"\nlame_duck_duration: \"45s\"\n",
    )
    .unwrap();
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    assert!(
        plan.contains("-max_connections: 1000") && plan.contains("+max_connections: 2000"),
        "{plan}"
    );
    // A plan saved before the include changes again is stale: its content was what was reviewed.
    let saved = b.root.file("plan.json");
    b.root
        .cotal(&["plan", "--out", saved.to_str().unwrap()])
        .assert()
        .success();
    std::fs::write(
        b.root.file("extra.conf"),
        "# tuning\nmax_connections: 2000\nwrite_deadline: \"4s\"\nlame_duck_duration: \"45s\"\n",
    )
    .unwrap();
    let stale = crate::support::stderr(
        &b.root
            .cotal(&["apply", "--auto-approve", saved.to_str().unwrap()])
            .assert()
            .code(5),
    );
    assert!(
        stale.contains("the config it renders changed since the plan"),
        "{stale}"
    );
    let applied = stdout(&b.root.apply().success());
    assert!(applied.contains("Reload confirmed"), "{applied}");
    assert_eq!(varz(&b)["max_connections"], 2000);
    assert_eq!(varz(&b)["write_deadline"], 4_000_000_000u64);

    // What cotal owns is refused at its line of the include, with nothing changed.
    let before = b.root.snapshot();
    for (text, line) in [
        ("max_connections: 5\nport: 1\n", 2),
        ("accounts {\n  A: {}\n}\n", 1),
    ] {
        std::fs::write(b.root.file("extra.conf"), text).unwrap();
        let err =
            crate::support::stderr(&b.root.cotal(&["apply", "--auto-approve"]).assert().code(3));
        assert!(err.contains(&format!("extra.conf:{line}: `")), "{err}");
        assert!(err.contains("is not a setting an include may set"), "{err}");
    }
    assert_eq!(
        b.root.snapshot().without("extra.conf"),
        before.without("extra.conf")
    );
    assert_eq!(varz(&b)["max_connections"], 2000, "nothing reloaded");
}

#[test]
fn a_running_broker_at_its_open_file_limit_refuses_adds_before_any_change() {
    // The broker is started under a hard limit of 400 files: room for 22 spaces of 15 streams
    // and buckets beside the 64 of its own. With quotas, so that the store holds every one's
    // artifact store whatever the test machine's disk.
    let port = free_port();
    let root = TestRoot::init();
    let spaces = |n: usize| -> String {
        let tables: String = (0..n).map(|i| format!("[spaces.s{i}]\n")).collect();
        format!("[defaults.limits]\nmax_storage = \"4MiB\"\n{tables}")
    };
    root.desire_on(port, &spaces(20));
    root.apply().success();
    assert!(
        crate::support::limited(&root, "-n 400", &["up"])
            .status
            .success()
    );
    let b = Broker::running(root, port);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", b.pid())).unwrap();
    assert_eq!(cotal::broker::process::soft_open_files(&limits), Some(400));
    // Ten more would need 514 files: refused by a plain apply (the limit is the broker's own),
    // nothing changed, the broker still serving.
    b.root.desire_on(port, &spaces(30));
    let before = b.root.snapshot().without("cotal.toml");
    let out = b.root.cotal(&["apply", "--auto-approve"]).assert().code(3);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("hold 514 files open")
            && err.contains("open-file limit of 400 (the running broker's limit)"),
        "{err}"
    );
    assert_eq!(b.root.snapshot().without("cotal.toml"), before);
    // Two more fit.
    b.root.desire_on(port, &spaces(22));
    b.root.apply().success();
    assert_eq!(b.status()["open_files"]["spaces_within"], 22);
}

/// Wait (bounded by `limit`) for `attempt` to succeed: NATS's own convergence (a stream leader
/// elected, a rejoined node caught up, followers current), asked again each time; never a sleep.
fn eventually<T>(
    what: &str,
    limit: std::time::Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match attempt() {
            Ok(v) => return v,
            Err(e) => assert!(std::time::Instant::now() < deadline, "{what}: {e}"),
        }
    }
}

/// `.cotal/state.json`, the file the review loop plans against, follows `up` and `down`: the
/// broker running or not is what a plan from it says.
#[test]
fn up_and_down_bring_the_state_file_up_to_date() {
    let running = |root: &TestRoot| -> bool {
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.file(".cotal/state.json")).unwrap())
                .unwrap();
        state["broker"]["running"].as_bool().unwrap()
    };
    let b = Broker::start("[spaces.design]\n");
    assert!(running(&b.root), "up wrote that the broker runs");
    b.root.cotal(&["down"]).assert().success();
    assert!(!running(&b.root), "down wrote that it does not");
    b.root.cotal(&["up"]).assert().success();
    assert!(running(&b.root));
}

/// Stopping never needs a write that can fail (a full disk is when an operator needs it most):
/// with `lock.json` impossible to write, `down` still stops the broker under the kernel's lock,
/// while `--preserve-state`, which records a cut, refuses with nothing stopped.
#[test]
fn down_stops_the_broker_when_its_lock_note_cannot_be_written() {
    let b = Broker::start("[spaces.design]\n");
    let pid = b.pid();
    // A directory where the note goes: every write of it fails, as on a full disk.
    let note = b.root.file(".cotal/maintenance/lock.json");
    std::fs::create_dir_all(note.join("in-the-way")).unwrap();
    let out = b
        .root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .failure();
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok(),
        "a cut needs its records: nothing was stopped: {}",
        crate::support::stderr(&out)
    );
    let out = b.root.cotal(&["down"]).assert().success();
    assert!(
        stdout(&out).contains(&format!("nats-server stopped (pid {pid})")),
        "{}",
        stdout(&out)
    );
    assert_eq!(b.status()["broker"]["state"], "stopped");
    std::fs::remove_dir_all(&note).unwrap();
}
