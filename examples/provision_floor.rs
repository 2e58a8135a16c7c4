//! The floor `scripts/bench.sh` compares `cotal up` with: a tight concurrent client that creates
//! every space's streams and buckets (the very configs cotal provisions, and the registry's
//! seeded default) on a running server, as fast as it can: creds minted and every account
//! seen JetStream-enabled before the clock starts, 16 spaces in flight, each on its own
//! connection with all its creates at once.
//!
//! `cargo run --release --example provision_floor -- ROOT URL` prints the seconds the
//! provisioning took, then the seconds the wait for every account's JetStream took before it.

use cotal::broker::live::{kv_config, stream_config};
use cotal::space::streams::{self, Expected};
use futures::StreamExt;

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Creates answered 10039 and asked again (reported on stderr).
static RETRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Spaces in flight (`FLOOR_IN_FLIGHT` overrides): more than the server's JetStream API works
/// through at once only queues, and at 64 a 2-core server answers some creates with 10039.
fn in_flight() -> usize {
    std::env::var("FLOOR_IN_FLIGHT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, url] = args.as_slice() else {
        eprintln!("usage: provision_floor ROOT URL");
        std::process::exit(2);
    };
    let root = cotal::store::Root::at(root)?;
    let (desired, _) = cotal::observe::desired(&root)?;
    let mut work = Vec::new();
    for name in desired.spaces.keys() {
        let record = cotal::store::account_record::load(&root, name)?;
        let creds = cotal::mint::user(
            &record.account.public,
            &record.account.signing_seed,
            "floor",
            cotal::space::permissions::provisioner(),
            None,
            None,
        )?
        .creds;
        work.push((creds, name.token()));
    }
    // A server that has just started enables JetStream account by account: wait (before the
    // clock starts) until every account answers with JetStream enabled.
    let waited = std::time::Instant::now();
    futures::stream::iter(&work)
        .map(|(creds, _)| ready(url, creds))
        .buffer_unordered(64)
        .collect::<Vec<Result<(), Failure>>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>, Failure>>()?;
    let readiness = waited.elapsed();
    let started = std::time::Instant::now();
    let results: Vec<Result<(), Failure>> = futures::stream::iter(&work)
        .map(|(creds, token)| provision(url, creds, token))
        .buffer_unordered(in_flight())
        .collect()
        .await;
    let took = started.elapsed();
    for r in results {
        r?;
    }
    let retries = RETRIES.load(std::sync::atomic::Ordering::Relaxed);
    if retries > 0 {
        eprintln!("provision_floor: {retries} creates were answered 10039 and asked again");
    }
    println!("{:.3} {:.3}", took.as_secs_f64(), readiness.as_secs_f64());
    Ok(())
}

async fn ready(url: &str, creds: &str) -> Result<(), Failure> {
    let client = async_nats::ConnectOptions::with_credentials(creds)?
        .connect(url)
        .await?;
    let js = async_nats::jetstream::new(client);
    for _ in 0..500 {
        if js.query_account().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err("JetStream was not enabled for an account within 5 s".into())
}

async fn provision(url: &str, creds: &str, token: &str) -> Result<(), Failure> {
    let client = async_nats::ConnectOptions::with_credentials(creds)?
        .connect(url)
        .await?;
    let js = async_nats::jetstream::new(client);
    // The benchmark's spaces have the starter's quota (32 MiB), which caps their artifact store.
    let creates = streams::expected(token, Some(32 << 20))
        .into_iter()
        .map(|want| {
            let js = js.clone();
            async move {
                // A server that has just started may still answer "JetStream not enabled for
                // account" (10039) for an account it has not finished loading: asked again.
                for _ in 0..500 {
                    let created = match &want {
                        Expected::Stream { .. } => js
                            .create_stream(stream_config(&want.stream_name(), &want.shape(), 0))
                            .await
                            .map(|_| ())
                            .map_err(Failure::from),
                        Expected::Bucket { .. } => js
                            .create_key_value(kv_config(&want, 0))
                            .await
                            .map(|_| ())
                            .map_err(Failure::from),
                    };
                    match created {
                        Err(e) if e.to_string().contains("10039") => {
                            RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        }
                        other => return other,
                    }
                }
                Err(Failure::from("JetStream stayed disabled for an account"))
            }
        });
    futures::future::try_join_all(creates).await?;
    let registry = js.get_key_value(streams::registry_bucket(token)).await?;
    registry
        .create(
            cotal::space::channels::DEFAULTS_KEY,
            cotal::space::channels::SEEDED_DEFAULTS.into(),
        )
        .await?;
    Ok(())
}
