//! The sibling `scripts/bench.sh` watches while it applies a change to a running broker: a
//! tenant of another space publishing to its chat stream through JetStream, one message in
//! flight, every [`PACE`], each timed from the publish to the stream's acknowledgement.
//!
//! `cargo run --release --example sibling_publish -- ROOT URL SPACE`
//!
//! It connects as an `admin` of SPACE (creds minted from the root's account record), publishes
//! [`WARM_UP`] messages untimed, then [`BASELINE`] timed ones and prints
//! `baseline COUNT MAX_MS P99_MS FAILED`. From then on it publishes until its standard input
//! closes, and prints the same for that phase, named `during`. A publish that fails (a timeout,
//! a refusal) counts in FAILED and not in the latencies. The benchmark starts it, reads the
//! baseline line, runs the apply, closes the pipe and reads the second line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The interval between the starts of two publishes (one is in flight at a time).
const PACE: Duration = Duration::from_millis(2);
/// Publishes before the baseline, untimed: the connection's and the stream's first costs.
const WARM_UP: usize = 100;
/// Timed publishes of the baseline: two seconds at [`PACE`].
const BASELINE: usize = 1000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, url, space] = args.as_slice() else {
        eprintln!("usage: sibling_publish ROOT URL SPACE");
        std::process::exit(2);
    };
    let root = cotal::store::Root::at(root)?;
    let space = cotal::model::SpaceName::parse(space)?;
    let record = cotal::store::account_record::load(&root, &space)?;
    let token = space.token();
    let user = "bench_sibling";
    let creds = cotal::mint::user(
        &record.account.public,
        &record.account.signing_seed,
        user,
        cotal::space::permissions::admin(&token),
        None,
        None,
    )?
    .creds;
    let client = async_nats::ConnectOptions::with_credentials(&creds)?
        .custom_inbox_prefix(cotal::space::permissions::member_inbox(user))
        .connect(url.as_str())
        .await?;
    let js = async_nats::jetstream::new(client);
    let subject = format!("cotal.{token}.chat.bench");

    let mut publisher = Publisher::new(js, subject);
    for _ in 0..WARM_UP {
        publisher.publish().await;
    }
    publisher.take();
    for _ in 0..BASELINE {
        publisher.publish().await;
    }
    println!("baseline {}", publisher.take());

    // Standard input is read on a thread of its own: its end (EOF) ends the phase.
    let closed = Arc::new(AtomicBool::new(false));
    let flag = closed.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        flag.store(true, Ordering::SeqCst);
    });
    while !closed.load(Ordering::SeqCst) {
        publisher.publish().await;
    }
    println!("during {}", publisher.take());
    Ok(())
}

/// One message in flight at a time, paced, with the latencies of the current phase.
struct Publisher {
    js: async_nats::jetstream::Context,
    subject: String,
    pace: tokio::time::Interval,
    latencies: Vec<Duration>,
    failed: usize,
}

impl Publisher {
    fn new(js: async_nats::jetstream::Context, subject: String) -> Self {
        let mut pace = tokio::time::interval(PACE);
        // A publish slower than the pace delays the next one; none is sent in a burst after.
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            js,
            subject,
            pace,
            latencies: Vec::new(),
            failed: 0,
        }
    }

    /// Waits for the next tick, publishes one message, and records how long its
    /// acknowledgement took (or that it failed).
    async fn publish(&mut self) {
        self.pace.tick().await;
        let started = Instant::now();
        let acked = match self.js.publish(self.subject.clone(), "x".into()).await {
            Ok(ack) => ack.await.is_ok(),
            Err(_) => false,
        };
        if acked {
            self.latencies.push(started.elapsed());
        } else {
            self.failed += 1;
        }
    }

    /// The phase so far as `COUNT MAX_MS P99_MS FAILED`, and a new phase begun.
    fn take(&mut self) -> String {
        let mut l = std::mem::take(&mut self.latencies);
        let failed = std::mem::take(&mut self.failed);
        l.sort();
        let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        let p99 = l.get((l.len() * 99).div_ceil(100).saturating_sub(1));
        format!("{} {:.2} {:.2} {}", l.len(), ms(l.last()), ms(p99), failed)
    }
}
