//! An isolated broker for reading or checking a preserved store: loopback, a free port, only the
//! trust it needs (the operator, `SYS` and the one space), no other listener; stopped on drop,
//! whatever happens.

use crate::broker::identity::Listener;
use crate::broker::process::Started;
use crate::broker::{live, preflight, process};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::BrokerTrust;
use crate::render::{self, Node, Preload, Token};
use crate::store::{Root, atomic};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Isolated {
    child: Child,
    conf: PathBuf,
    pub nats: live::Nats,
}

impl Isolated {
    /// Start nats-server on `store_dir` with only `space`'s account (and `SYS`) preloaded.
    pub fn start(
        root: &Root,
        trust: &BrokerTrust,
        space: &SpaceName,
        account: &str,
        jwt: &str,
        store_dir: &Path,
    ) -> Result<Self> {
        let bin = preflight::binary()
            .ok_or_else(|| Error::process("no nats-server found (COTAL_NATS_SERVER or PATH)"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| Error::process(format!("no free loopback port: {e}")))?;
        let node = Node {
            cluster: None,
            name: "isolated".into(),
            host: "127.0.0.1".into(),
            port,
            store_dir: store_dir.to_path_buf(),
            max_file_store: None,
            max_memory_store: None,
            tls: None,
            monitoring: None,
            websocket: None,
            include: None,
            log_rotation: true,
        };
        let text = render::server_conf(
            trust,
            &[Preload {
                space,
                account,
                token: Token::Signed(jwt),
                side: None,
            }],
            &node,
        )
        .map_err(Error::process)?;
        atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
        let conf = root.isolated_conf();
        atomic::write(&conf, text.as_bytes(), atomic::SECRET)?;
        let log = root.isolated_log();
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf)
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::process(format!("cannot start the isolated broker: {e}")))?;
        // This server is plaintext on loopback, whatever TLS the root's broker serves.
        crate::broker::client_tls::plaintext();
        let mut isolated = Isolated {
            child,
            conf,
            nats: live::Nats::new("127.0.0.1", port)?,
        };
        let listener = Listener {
            host: "127.0.0.1".into(),
            port,
        };
        match process::wait_listening(&mut isolated.child, &listener, Duration::from_secs(20))? {
            Started::Listening => Ok(isolated),
            Started::Exited(status) => Err(Error::process(format!(
                "the isolated broker exited at start ({status}); see {}",
                log.display()
            ))),
            Started::TimedOut => Err(Error::process(format!(
                "the isolated broker did not listen on {listener} within 20s"
            ))),
        }
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_file(&self.conf);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.conf);
    }
}
