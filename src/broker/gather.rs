//! One request many servers answer, gathered: the reply of every server to a request sent to
//! all of them (a `PING` of the system account), as the control plane and the live figures both
//! ask. Its own module so that neither depends on the other for it.
//!
//! Invariant: every wait has a deadline; a server that does not answer in time is left out,
//! never waited for.

use crate::error::{BrokerError, Result};
use serde::Deserialize;
use std::time::Duration;

/// One request many servers answer (a `PING` of the system account): every reply that parses as
/// a `T`, collected until `enough` says so or `deadline` passes (then what arrived; a server
/// that does not answer in time is left out, and the caller decides what that means).
pub(crate) async fn gather<T: for<'de> Deserialize<'de>>(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    deadline: Duration,
    mut enough: impl FnMut(&[T]) -> bool,
) -> Result<Vec<T>> {
    use futures::StreamExt as _;
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| BrokerError::request(subject, e))?;
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .map_err(|e| BrokerError::request(subject, e))?;
    let until = tokio::time::Instant::now() + deadline;
    let mut out = Vec::new();
    while !enough(&out) {
        match tokio::time::timeout_at(until, sub.next()).await {
            Ok(Some(m)) => {
                if let Ok(v) = serde_json::from_slice(&m.payload) {
                    out.push(v);
                }
            }
            _ => break,
        }
    }
    Ok(out)
}
