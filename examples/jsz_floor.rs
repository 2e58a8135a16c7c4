//! The broker's own part of a hot apply, which `scripts/bench.sh` sets beside the add and its
//! reload: how long the running broker takes to answer the two JSZ requests an add of one
//! space makes, on cotal's subject with the very bodies cotal sends, by a system user minted as
//! cotal mints its monitoring user (alone on one connection, where cotal asks the first beside
//! STATZ).
//! - The JSZ of every account's streams without their configs: what a plan asks when the drift
//!   cache vouches for the configs (the steady add's case).
//! - The JSZ of one account with its configs: what the state after an apply asks for the space
//!   the apply added (asked here of `SPACE`, an existing space of the same size).
//!
//! `cargo run --release --example jsz_floor -- ROOT URL SPACE` asks each five times, one after
//! the other, and prints the median seconds of each, in that order (the reply's transfer
//! included, its parse not: cotal's own parse is cotal's work).

use cotal::broker::live::{JSZ, jsz_of_account, jsz_of_every_account};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// How many times each request is asked.
const ROUNDS: usize = 5;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, url, space] = args.as_slice() else {
        eprintln!("usage: jsz_floor ROOT URL SPACE");
        std::process::exit(2);
    };
    let root = cotal::store::Root::at(root)?;
    let space = cotal::model::SpaceName::parse(space)?;
    let account = cotal::store::account_record::load(&root, &space)?
        .account
        .public;
    let creds =
        cotal::mint::system_users(&root, "cotal-monitor", cotal::space::permissions::monitor())?
            .into_iter()
            .next()
            .ok_or("no system user")?;
    let client = async_nats::ConnectOptions::with_credentials(&creds)?
        .connect(url.as_str())
        .await?;
    let every = median_seconds(&client, &jsz_of_every_account(false)).await?;
    let one = median_seconds(&client, &jsz_of_account(&account)).await?;
    println!("{every:.4} {one:.4}");
    Ok(())
}

/// The median of [`ROUNDS`] JSZ requests with `body`, each timed from the request to its reply.
async fn median_seconds(client: &async_nats::Client, body: &str) -> Result<f64, Failure> {
    let mut took = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = std::time::Instant::now();
        let reply = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            client.request(JSZ, body.to_string().into()),
        )
        .await??;
        took.push(started.elapsed().as_secs_f64());
        if reply.payload.is_empty() {
            return Err("an empty JSZ reply".into());
        }
    }
    took.sort_by(f64::total_cmp);
    Ok(took[ROUNDS / 2])
}
