//! `cotal-pubsub`: a minimal NATS client for the quick start and the demo, to try creds `cotal
//! creds` handed out: it connects with a creds file, publishes a message to a space's chat
//! stream and reads it back through JetStream (as a `member`, whose replies come on its own
//! inbox prefix `_INBOX_<user>`).
//!
//! `cotal-pubsub URL CREDS SPACE_TOKEN USER [MESSAGE]`
//!
//! A binary of the package and not an example: it is built by `cargo install --path .` with the
//! same dependencies and features as `cotal`, so the demo runs it without compiling anything
//! again (an example would pull in the dev-dependencies, whose features change async-nats and
//! tokio, and rebuild cotal).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, creds, token, user, rest @ ..] = args.as_slice() else {
        eprintln!("usage: cotal-pubsub URL CREDS SPACE_TOKEN USER [MESSAGE]");
        std::process::exit(2);
    };
    let message = rest
        .first()
        .cloned()
        .unwrap_or_else(|| "hello from cotal".into());
    let client = async_nats::ConnectOptions::with_credentials_file(creds)
        .await?
        .custom_inbox_prefix(format!("_INBOX_{user}"))
        .connect(url)
        .await?;
    let js = async_nats::jetstream::new(client);
    let subject = format!("cotal.{token}.chat.general");
    let ack = js
        .publish(subject.clone(), message.clone().into())
        .await?
        .await?;
    println!(
        "published to {subject}: stream {} sequence {}",
        ack.stream, ack.sequence
    );
    // Read it back by its sequence: a `member` reads with the stream's message get (creating,
    // changing or deleting a consumer it does not own is not its right).
    let stream = js.get_stream(format!("CHAT_{token}")).await?;
    let m = stream.get_raw_message(ack.sequence).await?;
    println!("read back: {:?}", String::from_utf8_lossy(&m.payload));
    Ok(())
}
