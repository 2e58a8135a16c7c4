//! The floor `scripts/bench.sh` compares `cotal up` with: a tight concurrent client that creates
//! every space's streams and buckets (the very configs cotal provisions, and the registry's
//! seeded default) on a running server, as fast as it can: creds minted before the clock
//! starts, 64 spaces in flight, each on its own connection with all its creates at once.
//!
//! `cargo run --release --example provision_floor -- ROOT URL` prints the seconds it took.

use cotal::broker::live::{kv_config, stream_config};
use cotal::streams::{self, Expected};
use futures::StreamExt;

type Failure = Box<dyn std::error::Error + Send + Sync>;

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
            cotal::permissions::provisioner(),
            None,
        )?
        .creds;
        work.push((creds, name.token()));
    }
    let started = std::time::Instant::now();
    let results: Vec<Result<(), Failure>> = futures::stream::iter(&work)
        .map(|(creds, token)| provision(url, creds, token))
        .buffer_unordered(64)
        .collect()
        .await;
    let took = started.elapsed();
    for r in results {
        r?;
    }
    println!("{:.3}", took.as_secs_f64());
    Ok(())
}

async fn provision(url: &str, creds: &str, token: &str) -> Result<(), Failure> {
    let client = async_nats::ConnectOptions::with_credentials(creds)?
        .connect(url)
        .await?;
    let js = async_nats::jetstream::new(client);
    let creates = streams::expected(token).into_iter().map(|want| {
        let js = js.clone();
        async move {
            match &want {
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
            }
        }
    });
    futures::future::try_join_all(creates).await?;
    let registry = js.get_key_value(streams::registry_bucket(token)).await?;
    registry
        .create(
            cotal::channels::DEFAULTS_KEY,
            cotal::channels::SEEDED_DEFAULTS.into(),
        )
        .await?;
    Ok(())
}
