//! `cotal-pubsub`: a minimal NATS client for the quick start and the demo, to try the creds
//! `cotal creds SPACE --member OWNER.ACTOR` hands a declared member: it connects with them (on
//! the member's own inbox prefix, `_INBOX_<OWNER>_<ACTOR>`), listens to a channel live, posts
//! to it as the member, and shows the post arriving live and read back from the channel's
//! history (the stream's last message on the post's subject), as the original Cotal's clients
//! read.
//!
//! `cotal-pubsub [--ca CA_PEM] URL CREDS SPACE_TOKEN OWNER.ACTOR CHANNEL [MESSAGE]`
//!
//! `--ca` names the PEM of the authority that signed a TLS broker's certificate (`[broker.tls]
//! ca`, or the one `cotal tls` printed), for a `tls://` URL: the client then requires TLS and
//! trusts that authority alone besides the system's roots.
//!
//! A binary of the package and not an example: it is built by `cargo install --path .` with the
//! same dependencies and features as `cotal`, so the demo runs it without compiling anything
//! again (an example would pull in the dev-dependencies, whose features change async-nats and
//! tokio, and rebuild cotal).

use futures::StreamExt;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let ca = match args.first().map(String::as_str) {
        Some("--ca") if args.len() > 1 => {
            let ca = args.remove(1);
            args.remove(0);
            Some(ca)
        }
        _ => None,
    };
    let [url, creds, token, member, channel, rest @ ..] = args.as_slice() else {
        eprintln!(
            "usage: cotal-pubsub [--ca CA_PEM] URL CREDS SPACE_TOKEN OWNER.ACTOR CHANNEL [MESSAGE]"
        );
        std::process::exit(2);
    };
    let Some((owner, actor)) = member.split_once('.') else {
        eprintln!("cotal-pubsub: the member is OWNER.ACTOR, not {member:?}");
        std::process::exit(2);
    };
    let message = rest
        .first()
        .cloned()
        .unwrap_or_else(|| "hello from cotal".into());
    let mut options = async_nats::ConnectOptions::with_credentials_file(creds)
        .await?
        .custom_inbox_prefix(format!("_INBOX_{owner}_{actor}"));
    if let Some(ca) = ca {
        options = options.require_tls(true).add_root_certificates(ca.into());
    }
    let client = options.connect(url).await?;
    // The channel live: every member's posts to it, as the wire carries them.
    let mut live = client
        .subscribe(format!("cotal.{token}.chat.*.*.{channel}"))
        .await?;
    let js = async_nats::jetstream::new(client);
    // A round trip first, so the broker holds the subscription before the post.
    js.query_account().await?;
    let subject = format!("cotal.{token}.chat.{owner}.{actor}.{channel}");
    let ack = js
        .publish(subject.clone(), message.clone().into())
        .await?
        .await?;
    println!(
        "posted to {subject}: stream {} sequence {}",
        ack.stream, ack.sequence
    );
    let heard = tokio::time::timeout(Duration::from_secs(10), live.next())
        .await
        .map_err(|_| "the post did not arrive live within 10 s")?
        .ok_or("the live subscription ended")?;
    println!(
        "live on {}: {:?}",
        heard.subject,
        String::from_utf8_lossy(&heard.payload)
    );
    // Its history: the channel's last message on the post's subject, by a direct get (a
    // member may not read the stream's info, so the stream is named, not looked up).
    let stream = js.get_stream_no_info(format!("CHAT_{token}")).await?;
    let m = stream.direct_get_last_for_subject(subject).await?;
    println!("read back: {:?}", String::from_utf8_lossy(&m.payload));
    Ok(())
}
