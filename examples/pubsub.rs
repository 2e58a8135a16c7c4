//! A minimal NATS client for the README and the demo: connects with a creds file, publishes a
//! message to a space's chat stream and reads it back through JetStream.
//!
//! `cargo run --example pubsub -- URL CREDS SPACE_TOKEN [MESSAGE]`

use futures::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, creds, token, rest @ ..] = args.as_slice() else {
        eprintln!("usage: pubsub URL CREDS SPACE_TOKEN [MESSAGE]");
        std::process::exit(2);
    };
    let message = rest
        .first()
        .cloned()
        .unwrap_or_else(|| "hello from cotal".into());
    let client = async_nats::ConnectOptions::with_credentials_file(creds)
        .await?
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
    let stream = js.get_stream(format!("CHAT_{token}")).await?;
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: ack.sequence,
            },
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.fetch().max_messages(1).messages().await?;
    if let Some(m) = messages.next().await {
        let m = m?;
        println!("read back: {:?}", String::from_utf8_lossy(&m.payload));
        m.ack().await?;
    }
    Ok(())
}
