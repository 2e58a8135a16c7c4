//! The running broker over NATS: provisioning and teardown of a space's streams under ephemeral
//! users, the data-plane check after a reload, and live figures from the system account.
//!
//! Every call here is async inside a private current-thread runtime; callers stay synchronous.
//! Every user is minted in memory by the caller with a short expiry and never written to disk.

use crate::diagnostic::Diagnostic;
use crate::error::{BrokerError, Error, Result};
use crate::observed::drift_verdicts::{ApiCounters, Voucher, Vouching, names_digest};
use crate::space::channels;
use crate::space::streams::{self, Expected, Retention, Shape};
use async_nats::jetstream::{self, kv, stream};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Connect and request timeout.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The subject every server answers JSZ on (public for the benchmark's `examples/jsz_floor`).
pub const JSZ: &str = "$SYS.REQ.SERVER.PING.JSZ";

/// Up to how many accounts whose stream configs the cache does not vouch for are asked one by
/// one (more are asked for in one request for every account).
pub const CONFIGS_ASKED_ONE_BY_ONE: usize = 32;

/// A connection target with its own runtime.
pub struct Nats {
    rt: tokio::runtime::Runtime,
    url: String,
}

/// A connection to the broker that failed, named by who connects.
fn refused_connection(who: &str) -> impl FnOnce(String) -> Error + '_ {
    move |e| BrokerError::connect(who, e).into()
}

impl Nats {
    /// `host` `0.0.0.0` / `::` is reached on loopback.
    pub fn new(host: &str, port: u16) -> Result<Self> {
        let host = match host {
            "0.0.0.0" | "" => "127.0.0.1".to_string(),
            "::" => "[::1]".to_string(),
            // An IPv6 literal is bracketed in a URL.
            h if h.contains(':') => format!("[{h}]"),
            h => h.to_string(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BrokerError::local("tokio runtime", e))?;
        Ok(Nats {
            rt,
            url: format!("nats://{host}:{port}"),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether a user can connect (the data-plane check). `Err` carries the server's reason.
    pub fn try_connect(&self, creds: &str) -> Result<(), String> {
        self.rt.block_on(async {
            let client = connect(&self.url, creds).await?;
            client.flush().await.map_err(|e| e.to_string())?;
            Ok(())
        })
    }

    /// Create what is missing and update what drifted, then seed the registry's default delivery
    /// class if unset. Returns what it created or updated.
    /// `replicas`: of every stream and bucket, declared by a cluster (`None` for a single
    /// server, whose streams have the server's default).
    pub fn provision(
        &self,
        work: &super::Provisioning,
        replicas: Option<usize>,
    ) -> Result<super::Provisioned> {
        self.rt.block_on(provision_space(&self.url, work, replicas))
    }

    /// [`Nats::provision`] for many spaces at once, at most [`PROVISION_CONCURRENCY`] in
    /// flight: each result in the order given.
    pub fn provision_many(
        &self,
        work: &[super::Provisioning],
        replicas: Option<usize>,
    ) -> Vec<Result<super::Provisioned>> {
        use futures::StreamExt;
        self.rt.block_on(
            futures::stream::iter(work)
                .map(|w| provision_space(&self.url, w, replicas))
                .buffered(PROVISION_CONCURRENCY)
                .collect(),
        )
    }

    /// Each named stream's state and config, `None` for a stream that does not exist.
    pub fn stream_infos(
        &self,
        creds: &str,
        names: &[String],
    ) -> Result<Vec<(String, Option<StreamState>)>> {
        self.rt.block_on(async {
            let client = connect(&self.url, creds)
                .await
                .map_err(refused_connection("reader connect"))?;
            let js = jetstream::new(client);
            let mut out = Vec::new();
            for name in names {
                let state = match js.get_stream(name).await {
                    Ok(mut s) => {
                        let info = s
                            .info()
                            .await
                            .map_err(|e| Failed::of(&e).at(name.as_str()))?;
                        Some(StreamState {
                            messages: info.state.messages,
                            first_seq: info.state.first_sequence,
                            last_seq: info.state.last_sequence,
                            config: serde_json::to_value(&info.config)
                                .map_err(|e| BrokerError::reply(name.as_str(), e))?,
                        })
                    }
                    Err(e) if not_found(&e) => None,
                    Err(e) => {
                        return Err(Failed::of(&e).at(format!("reading stream {name}")));
                    }
                };
                out.push((name.clone(), state));
            }
            Ok(out)
        })
    }

    /// Every stream of the account `creds` is a user of (its buckets are streams too), in name
    /// order: what a purge would empty, and whether nats-server lets it.
    pub fn survey_streams(&self, creds: &str) -> Result<Vec<StreamSurvey>> {
        use futures::TryStreamExt;
        self.rt.block_on(async {
            let client = connect(&self.url, creds)
                .await
                .map_err(refused_connection("purger connect"))?;
            let js = jetstream::new(client);
            let mut names: Vec<String> = js
                .stream_names()
                .try_collect()
                .await
                .map_err(|e| Failed::of(&e).at("listing the streams"))?;
            names.sort();
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let info = match js.get_stream(&name).await {
                    Ok(mut stream) => stream
                        .info()
                        .await
                        .map_err(|e| Failed::of(&e).at(format!("reading stream {name}")))?
                        .clone(),
                    // Deleted by a user of the space since it was listed.
                    Err(e) if not_found(&e) => continue,
                    Err(e) => return Err(Failed::of(&e).at(format!("reading stream {name}"))),
                };
                out.push(StreamSurvey {
                    name,
                    messages: info.state.messages,
                    bytes: info.state.bytes,
                    last_seq: info.state.last_sequence,
                    locked: if info.config.sealed {
                        Some("sealed")
                    } else if info.config.deny_purge {
                        Some("deny_purge")
                    } else {
                        None
                    },
                });
            }
            Ok(out)
        })
    }

    /// Empty each stream of `upto` up to its sequence (messages after it, written since, are
    /// kept), as a user of the account (`creds`): each stream's name and the messages purged.
    /// Idempotent: a stream already emptied up to its bound purges nothing, one deleted since
    /// is skipped.
    pub fn purge_streams(
        &self,
        creds: &str,
        upto: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<(String, u64)>> {
        self.rt.block_on(async {
            let client = connect(&self.url, creds)
                .await
                .map_err(refused_connection("purger connect"))?;
            let js = jetstream::new(client);
            let mut out = Vec::with_capacity(upto.len());
            for (name, last) in upto {
                let purged = match js.get_stream(name).await {
                    Ok(_) if *last == 0 => 0,
                    Ok(stream) => {
                        stream
                            .purge()
                            .sequence(last + 1)
                            .await
                            .map_err(|e| Failed::of(&e).at(format!("purging stream {name}")))?
                            .purged
                    }
                    Err(e) if not_found(&e) => 0,
                    Err(e) => return Err(Failed::of(&e).at(format!("reading stream {name}"))),
                };
                out.push((name.clone(), purged));
            }
            Ok(out)
        })
    }

    /// Live figures for every account, through an ephemeral system-account user. Streams are
    /// gathered from `jsz_servers` servers (every running node of a cluster, unless each holds a
    /// replica of every stream), connections summed over `servers` (every running node).
    pub fn figures(&self, sys_creds: &str, jsz_servers: usize, servers: usize) -> Result<Figures> {
        self.figures_of(sys_creds, None, jsz_servers, servers, None)
    }

    /// [`Nats::figures`] of `only` these accounts (`None`: every account): one JSZ request per
    /// account named, one STATZ and one VARZ request for all of them, all three at once.
    ///
    /// Of a single server, with `vouch` (what says whether a cached verdict on an account's
    /// configs still holds, `store::caches::drift_cache`), every account's streams are asked for
    /// without their configs: those of the accounts `vouch` does not vouch for are asked again,
    /// one request per account, or in one request for every account when more than
    /// [`CONFIGS_ASKED_ONE_BY_ONE`] are. Of a single server, each account's figures carry what
    /// would vouch for a verdict on them.
    pub fn figures_of(
        &self,
        sys_creds: &str,
        only: Option<&[String]>,
        jsz_servers: usize,
        servers: usize,
        vouch: Option<&Vouching>,
    ) -> Result<Figures> {
        let single = jsz_servers == 1 && servers == 1;
        self.rt.block_on(async {
            let client = connect(&self.url, sys_creds)
                .await
                .map_err(refused_connection("system connect"))?;
            // The configs are left out only when the verdicts were judged on this very process
            // (else every one would be asked again).
            let lean = single
                && only.is_none()
                && vouch.is_some_and(|v| v.cache.server_id == client.server_info().server_id);
            let statz_body = match only {
                None => r#"{"include_unused":true}"#.to_string(),
                Some(accounts) => {
                    serde_json::json!({"accounts": accounts, "include_unused": true}).to_string()
                }
            };
            let jsz = async {
                match only {
                    None => {
                        let body = jsz_of_every_account(!lean);
                        request_all::<Reply<Jsz>>(&client, JSZ, &body, jsz_servers).await
                    }
                    Some(accounts) => jsz_of_accounts(&client, accounts, jsz_servers).await,
                }
            };
            // Every running node's VARZ: the first answers for the broker (version, store), each
            // says which config it has loaded. Asked first: the loaded config a verdict is filed
            // under is never one loaded after the counters that vouch for it were read.
            let varzs: Vec<Reply<Varz>> =
                request_all(&client, "$SYS.REQ.SERVER.PING.VARZ", "{}", servers).await?;
            let (jsz, statz) = tokio::join!(
                jsz,
                request_all::<Reply<AccStatz>>(
                    &client,
                    "$SYS.REQ.ACCOUNT.PING.STATZ",
                    &statz_body,
                    servers
                ),
            );
            let (jsz, statz) = (jsz?, statz?);
            let loaded: BTreeMap<String, String> = varzs
                .iter()
                .filter(|r| !r.data.config_digest.is_empty())
                .map(|r| (r.server.name.clone(), r.data.config_digest.clone()))
                .collect();
            let varz = varzs
                .into_iter()
                .next()
                .expect("request_all returns at least one reply");
            // Of a single server: the process that answered (its ID, fresh at every start).
            let server_id =
                single.then(|| jsz.first().map(|r| r.server.id.clone()).unwrap_or_default());
            // The server's count over every account (of the latest reply when there are several).
            let server_api = |replies: &[Reply<Jsz>]| {
                replies
                    .iter()
                    .map(|r| r.data.api.counters())
                    .fold(ApiCounters::default(), ApiCounters::max_by_total)
            };
            let mut counted = server_api(&jsz);
            let mut details: Vec<JszAccount> = jsz
                .into_iter()
                .flat_map(|r| r.data.account_details)
                .collect();
            let loaded_now = varz.data.config_digest.as_str();
            // Whether the cache may vouch for anything in this report (no counter went back).
            let intact = match (&server_id, vouch) {
                (Some(id), Some(v)) if lean => v.intact(
                    id,
                    loaded_now,
                    counted,
                    details.iter().map(|a| (a.id.as_str(), a.api.counters())),
                ),
                _ => false,
            };
            // Each account's voucher, and whether it vouched for the configs not asked for.
            let (mut vouchers, ask) = vouchers_and_asks(
                &details,
                server_id.as_deref(),
                intact.then_some(vouch).flatten(),
                loaded_now,
            );
            tracing::debug!(
                lean,
                vouched = vouchers.iter().flatten().filter(|(_, v)| *v).count(),
                asked = ask.len(),
                "stream configs vouched for by the drift cache, and to ask"
            );
            if ask.len() > CONFIGS_ASKED_ONE_BY_ONE {
                // Every account's again, configs and all.
                let again =
                    request_all::<Reply<Jsz>>(&client, JSZ, &jsz_of_every_account(true), 1).await?;
                counted = server_api(&again);
                details = again
                    .into_iter()
                    .flat_map(|r| r.data.account_details)
                    .collect();
                vouchers = details.iter().map(|a| Some((voucher(a), false))).collect();
            } else if !ask.is_empty() {
                let accounts: Vec<String> = ask.iter().map(|&i| details[i].id.clone()).collect();
                tracing::trace!(?accounts, "asked for their stream configs");
                let mut fresh = jsz_of_accounts(&client, &accounts, 1).await?;
                counted = counted.max_by_total(server_api(&fresh));
                for &i in &ask {
                    // As it is now (with no stream if it is gone since).
                    let id = details[i].id.clone();
                    let detail = fresh
                        .iter_mut()
                        .flat_map(|r| r.data.account_details.iter_mut())
                        .find(|a| a.id == id)
                        .map(std::mem::take)
                        .unwrap_or(JszAccount {
                            id,
                            ..JszAccount::default()
                        });
                    vouchers[i] = Some((voucher(&detail), false));
                    details[i] = detail;
                }
            }
            let mut accounts = account_figures(details, vouchers);
            for a in statz.into_iter().flat_map(|r| r.data.account_statz) {
                accounts.entry(a.acc).or_default().connections += a.conns;
            }
            let store = store_figures(&varz.data);
            Ok(Figures {
                version: varz.data.version,
                start: varz.data.start,
                now: varz.data.now,
                accounts,
                store,
                loaded,
                server_id,
                server_api: counted,
            })
        })
    }

    /// `$SYS.REQ.ACCOUNT.<pub>.CONNZ` with a space's membership-observer creds (replies on the
    /// space's own inbox prefix, the only one its template lets it subscribe to): its live
    /// connection count.
    pub fn connections(&self, observer_creds: &str, account: &str) -> Result<u64> {
        self.rt.block_on(async {
            let client = crate::broker::client_tls::apply(
                async_nats::ConnectOptions::with_credentials(observer_creds)
                    .map_err(|e| BrokerError::local("observer creds", e))?,
            )
            .connection_timeout(TIMEOUT)
            .request_timeout(Some(TIMEOUT))
            .max_reconnects(Some(0))
            .custom_inbox_prefix(crate::space::permissions::inbox_prefix(account))
            .name("cotal")
            .connect(&self.url)
            .await
            .map_err(|e| BrokerError::connect("observer connect", e))?;
            let connz: Reply<Connz> =
                request(&client, &format!("$SYS.REQ.ACCOUNT.{account}.CONNZ"), "{}").await?;
            Ok(connz.data.num_connections)
        })
    }
}

impl Nats {
    /// Each space's channel registry, read as a user of the space (`(space, token, creds)`),
    /// at most 32 spaces at a time. `Ok(None)`: the space has no registry bucket yet.
    pub fn registries(
        &self,
        spaces: Vec<(crate::model::SpaceName, String, String)>,
    ) -> BTreeMap<crate::model::SpaceName, std::result::Result<Option<channels::Registry>, String>>
    {
        self.buckets(
            spaces
                .into_iter()
                .map(|(name, token, creds)| (name, streams::registry_bucket(&token), creds))
                .collect(),
        )
    }

    /// Write a space's members' acl records as `creds` may (the acl bucket, and the members'
    /// consumers on the chat stream): each put a whole record (its `revision` one more than the
    /// record it replaces, `updatedAt` now), each deletion a purge; both compare-and-set on the
    /// revision the plan saw, so a record changed since is [`Error::conflict`], naming it, and
    /// the writes before it are kept. After each record, the member's consumer on the chat
    /// stream (a durable pull consumer named after its user, filtered to its read patterns) is
    /// made or updated, or deleted with the member (or when it reads nothing): the member pulls
    /// from it and never makes one (a consumer's config names where it delivers).
    pub fn write_acl(
        &self,
        creds: &str,
        space: &crate::model::SpaceName,
        writes: &[channels::Write],
    ) -> Result<()> {
        use crate::space::members::{AclRecord, Principal};
        let token = space.token();
        self.rt.block_on(async {
            let client = connect(&self.url, creds)
                .await
                .map_err(refused_connection("acl connect"))?;
            let js = jetstream::new(client);
            let bucket = format!("cotal_acl_{token}");
            let kv = js
                .get_key_value(&bucket)
                .await
                .map_err(|e| Failed::of(&e).at(format!("acl bucket {bucket}")))?;
            let chat = js
                .get_stream_no_info(format!("CHAT_{token}"))
                .await
                .map_err(|e| Failed::of(&e).at(format!("chat stream of {}", space.quoted())))?;
            for w in writes {
                let key = w.key.as_str();
                let current = kv
                    .entry(key)
                    .await
                    .map_err(|e| Failed::of(&e).at(format!("reading acl {key:?}")))?
                    .filter(|e| e.operation == kv::Operation::Put);
                let moved = match (&w.expect, &current) {
                    (channels::Expect::Any, _) | (channels::Expect::Absent, None) => false,
                    (channels::Expect::Revision(r), Some(e)) => e.revision != *r,
                    _ => true,
                };
                if moved {
                    return Err(Error::conflict(
                        Diagnostic::new(format!(
                            "the acl record {key:?} of space {} changed since the plan; nothing more was written to this space.",
                            space.quoted()
                        ))
                        .next("run `cotal plan` to see it, then apply again"),
                    ));
                }
                let held: Option<AclRecord> = current
                    .as_ref()
                    .and_then(|e| serde_json::from_slice(&e.value).ok());
                let read = match &w.value {
                    Some(planned) => {
                        let mut record: AclRecord = serde_json::from_str(planned)
                            .map_err(|e| Error::other(e.to_string()))?;
                        record.revision = held.as_ref().map_or(0, |h| h.revision) + 1;
                        record.updated_at = crate::clock::now() * 1000;
                        let bytes = serde_json::to_vec(&record)
                            .map_err(|e| Error::other(e.to_string()))?;
                        let written = match &current {
                            None => kv.create(key, bytes.into()).await.map(|_| ()).map_err(|e| e.to_string()),
                            Some(e) => kv
                                .update(key, bytes.into(), e.revision)
                                .await
                                .map(|_| ())
                                .map_err(|e| e.to_string()),
                        };
                        written.map_err(|why| {
                            Error::conflict(
                                Diagnostic::new(format!(
                                    "the acl record {key:?} of space {} could not be written ({why}); nothing more was written to this space.",
                                    space.quoted()
                                ))
                                .next("run `cotal plan` to see it, then apply again"),
                            )
                        })?;
                        record.allow_subscribe
                    }
                    None => {
                        if let Some(e) = &current {
                            kv.purge_expect_revision(key, Some(e.revision))
                                .await
                                .map_err(|e| Failed::of(&e).at(format!("deleting acl {key:?}")))?;
                        }
                        Vec::new()
                    }
                };
                let Ok(principal) = Principal::parse(key) else {
                    continue;
                };
                let user = principal.user_name();
                if read.is_empty() {
                    match chat.delete_consumer(&user).await {
                        Ok(_) => {}
                        Err(e) if e.to_string().contains("not found") => {}
                        Err(e) => {
                            return Err(Failed::of(&e).at(format!("deleting consumer {user}")));
                        }
                    }
                    continue;
                }
                let config = jetstream::consumer::pull::Config {
                    durable_name: Some(user.clone()),
                    filter_subjects: crate::space::members::consumer_filters(&token, &read),
                    ..Default::default()
                };
                if chat.create_consumer(config.clone()).await.is_err() {
                    // A config nats-server does not update in place: made again.
                    let _ = chat.delete_consumer(&user).await;
                    chat.create_consumer(config)
                        .await
                        .map_err(|e| Failed::of(&e).at(format!("consumer {user}")))?;
                }
            }
            Ok(())
        })
    }

    /// Each space's bucket (`(space, bucket, creds)`: the members' acl records), read as the
    /// registries are, at most 32 spaces at a time. `Ok(None)`: no such bucket yet.
    pub fn buckets(
        &self,
        spaces: Vec<(crate::model::SpaceName, String, String)>,
    ) -> BTreeMap<crate::model::SpaceName, std::result::Result<Option<channels::Registry>, String>>
    {
        use futures::StreamExt;
        let url = self.url.clone();
        self.rt.block_on(async {
            futures::stream::iter(spaces)
                .map(|(name, bucket, creds)| {
                    let url = url.clone();
                    async move { (name, read_bucket(&url, &bucket, &creds).await) }
                })
                .buffer_unordered(32)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect()
        })
    }

    /// Write a space's registry, in order, each write compare-and-set on the revision it was
    /// planned against. A key a tenant moved since is rebased on what it holds then
    /// ([`channels::rebase`]: the tenant's other fields kept, the declared ones set) and tried
    /// again, up to [`channels::CONFLICT_RETRIES`] times; then it is [`Error::conflict`],
    /// naming it, and the writes before it are kept (each is what the plan said). Returns each
    /// key with the value written and its revision.
    pub fn write_channels(
        &self,
        creds: &str,
        space: &crate::model::SpaceName,
        writes: &[channels::Write],
    ) -> Result<Vec<channels::Written>> {
        use channels::Rebased;
        self.rt.block_on(async {
            let client = connect(&self.url, creds)
                .await
                .map_err(refused_connection("registry connect"))?;
            let js = jetstream::new(client);
            let bucket = streams::registry_bucket(&space.token());
            let kv = js
                .get_key_value(&bucket)
                .await
                .map_err(|e| Failed::of(&e).at(format!("channel registry {bucket}")))?;
            let mut done = Vec::new();
            for planned in writes {
                let key = planned.key.as_str();
                let mut w = planned.clone();
                let mut attempts = 0;
                let revision = loop {
                    crate::fault::race_registry(space.as_str(), || async {
                        let _ = kv.put(key, format!("{{\"racer\":{attempts}}}").into()).await;
                    })
                    .await;
                    let why = match write_key(&js, &kv, &bucket, &w).await? {
                        Ok(revision) => break revision,
                        Err(why) => why,
                    };
                    let fresh = kv
                        .entry(key)
                        .await
                        .map_err(|e| Failed::of(&e).at(format!("reading channel {key:?}")))?;
                    let fresh = fresh
                        .as_ref()
                        .filter(|e| e.operation == kv::Operation::Put)
                        .map(|e| (e.value.as_ref(), e.revision));
                    match channels::rebase(&w, fresh) {
                        Rebased::Holds(revision) => break revision,
                        Rebased::Retry(again) if attempts < channels::CONFLICT_RETRIES => {
                            attempts += 1;
                            tracing::info!(space = %space, key, attempts, "channel moved since the plan: rebased");
                            w = again;
                        }
                        _ => {
                            return Err(Error::conflict(
                                Diagnostic::new(format!(
                                    "channel {key:?} of space {} kept changing in the registry while cotal wrote it ({why}; tried {} times); nothing more was written to this space.",
                                    space.quoted(),
                                    attempts + 1
                                ))
                                .next("stop the client that writes it, or run `cotal plan` to see it, then apply again"),
                            ));
                        }
                    }
                };
                done.push((key.to_string(), w.value.clone(), revision));
            }
            Ok(done)
        })
    }
}

/// One registry write: `Ok(Ok(revision))` when it took (`None`: deleted), `Ok(Err(why))` when
/// the key was not where the write expected it (a compare-and-set lost), `Err` on any other
/// failure.
async fn write_key(
    js: &jetstream::Context,
    kv: &kv::Store,
    bucket: &str,
    w: &channels::Write,
) -> Result<std::result::Result<Option<u64>, String>> {
    use channels::Expect;
    let key = w.key.as_str();
    let moved = |e: &dyn std::fmt::Display| e.to_string().contains("wrong last sequence");
    Ok(match (&w.value, w.expect) {
        (Some(v), Expect::Any) => {
            Ok(Some(kv.put(key, v.clone().into()).await.map_err(|e| {
                Failed::of(&e).at(format!("writing channel {key:?}"))
            })?))
        }
        (Some(v), Expect::Absent) => match kv.create(key, v.clone().into()).await {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                Err("it exists now".to_string())
            }
            Err(e) => return Err(Failed::of(&e).at(format!("writing channel {key:?}"))),
        },
        (Some(v), Expect::Revision(r)) => match kv.update(key, v.clone().into(), r).await {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision || moved(&e) => {
                Err(format!("it is no longer at revision {r}"))
            }
            Err(e) => return Err(Failed::of(&e).at(format!("writing channel {key:?}"))),
        },
        // A delete marker published on the key's subject, so any key a tenant wrote (one the
        // KV client would call invalid) can be pruned.
        (None, expect) => {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("KV-Operation", "DEL");
            if let Expect::Revision(r) = expect {
                headers.insert(
                    "Nats-Expected-Last-Subject-Sequence",
                    r.to_string().as_str(),
                );
            }
            let sent = js
                .publish_with_headers(format!("$KV.{bucket}.{key}"), headers, "".into())
                .await;
            let acked = match sent {
                Ok(ack) => ack.await.map(|_| None),
                Err(e) => Err(e),
            };
            match acked {
                Ok(r) => Ok(r),
                Err(e) if moved(&e) => Err("it is no longer at the revision read".to_string()),
                Err(e) => return Err(Failed::of(&e).at(format!("deleting channel {key:?}"))),
            }
        }
    })
}

/// How many spaces provisioning works on at once: each is a connection creating its streams and
/// buckets concurrently, and the server's own work (an fsync per create) overlaps across them.
pub const PROVISION_CONCURRENCY: usize = 16;

/// See [`Nats::provision`].
async fn provision_space(
    url: &str,
    work: &super::Provisioning,
    replicas: Option<usize>,
) -> Result<super::Provisioned> {
    let token = &work.space.token();
    let client = connect(url, &work.creds)
        .await
        .map_err(refused_connection("provisioner connect"))?;
    let js = jetstream::new(client);
    // The artifact store first, alone: its cap follows the quota, and after a quota was
    // lowered the account's reservations exceed it until the store shrinks (nats-server then
    // refuses every other create, even of a stream that exists). Then the streams, then the
    // buckets; each batch concurrently (every create is an fsync on the server, so in
    // parallel they cost about one).
    let artifacts = streams::artifact_stream(token);
    // Every reservation counts once per replica against the account's quota.
    let share = streams::per_replica(work.quota, replicas.map_or(1, |r| r as u8));
    let (first, rest): (Vec<Expected>, Vec<Expected>) = streams::expected(token, share)
        .into_iter()
        .partition(|e| e.stream_name() == artifacts);
    let (stream_batch, bucket_batch): (Vec<Expected>, Vec<Expected>) = rest
        .into_iter()
        .partition(|e| matches!(e, Expected::Stream { .. }));
    let mut done: Vec<String> = Vec::new();
    for w in &first {
        done.extend(ensure(&js, w, replicas).await?);
    }
    done.extend(
        futures::future::try_join_all(stream_batch.iter().map(|w| ensure(&js, w, replicas)))
            .await?
            .into_iter()
            .flatten(),
    );
    crate::fault::point(crate::fault::Point::MidProvision);
    done.extend(
        futures::future::try_join_all(bucket_batch.iter().map(|w| ensure(&js, w, replicas)))
            .await?
            .into_iter()
            .flatten(),
    );
    let registry = js
        .get_key_value(streams::registry_bucket(token))
        .await
        .map_err(|e| Failed::of(&e).at("channel registry"))?;
    let registry_seed = match registry
        .create(channels::DEFAULTS_KEY, channels::SEEDED_DEFAULTS.into())
        .await
    {
        Ok(revision) => {
            done.push("set the default delivery class to durable".into());
            Some(revision)
        }
        Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => None,
        Err(e) => return Err(Failed::of(&e).at("seeding the channel registry")),
    };
    Ok(super::Provisioned {
        work: done,
        registry_seed,
    })
}

/// One space's registry: the keys its stream holds (one stream-info request with a subject
/// filter lists them), then each key's latest message by a direct get (a deleted or purged key
/// is absent; a value that is not JSON is kept as a string).
/// Every key of a space's bucket (the channel registry, the acl records) with its value and
/// revision, bounded as a tenant may have filled it.
async fn read_bucket(
    url: &str,
    bucket: &str,
    creds: &str,
) -> std::result::Result<Option<channels::Registry>, String> {
    use futures::TryStreamExt;
    let client = connect(url, creds)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let js = jetstream::new(client);
    let stream = js
        .get_stream_no_info(format!("KV_{bucket}"))
        .await
        .map_err(|e| format!("registry {bucket}: {e}"))?;
    let prefix = format!("$KV.{bucket}.");
    let mut subjects = match stream.info_with_subjects(format!("{prefix}>")).await {
        Ok(s) => s,
        Err(e) if e.to_string().contains("not found") => return Ok(None),
        Err(e) => return Err(format!("registry {bucket}: {e}")),
    };
    let mut keys = Vec::new();
    while let Some((subject, _)) = subjects
        .try_next()
        .await
        .map_err(|e| format!("registry {bucket}: {e}"))?
    {
        if let Some(key) = subject.strip_prefix(&prefix) {
            keys.push(key.to_string());
        }
        if keys.len() > channels::REGISTRY_MAX_KEYS {
            return Err(format!(
                "registry {bucket} holds more than {} keys: cotal does not plan a registry that large (a tenant filled it?)",
                channels::REGISTRY_MAX_KEYS
            ));
        }
    }
    let mut out = channels::Registry::new();
    let mut copied = 0usize;
    for key in keys {
        let m = stream
            .direct_get_last_for_subject(format!("{prefix}{key}"))
            .await
            .map_err(|e| format!("registry {bucket} key {key:?}: {e}"))?;
        let deleted = m
            .headers
            .get("KV-Operation")
            .is_some_and(|op| op.as_str() == "DEL" || op.as_str() == "PURGE");
        if deleted {
            continue;
        }
        // A tenant's value is bounded before anything copies it (a plan, the state, output).
        let value = if m.payload.len() > channels::REGISTRY_VALUE_MAX {
            channels::oversized(&m.payload)
        } else {
            copied += m.payload.len();
            if copied > channels::REGISTRY_MAX_BYTES {
                return Err(format!(
                    "registry {bucket} holds more than {} bytes of values: cotal does not plan a registry that large (a tenant filled it?)",
                    channels::REGISTRY_MAX_BYTES
                ));
            }
            serde_json::from_slice(&m.payload).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&m.payload).into_owned())
            })
        };
        out.insert(
            key,
            channels::Entry {
                value,
                revision: m.sequence,
            },
        );
    }
    Ok(Some(out))
}

/// Create one stream or bucket when missing, update it when drifted. Returns what it did.
/// `declared`: the replicas a cluster declares (`None` on a single server: the server's
/// default, never compared).
async fn ensure(
    js: &jetstream::Context,
    want: &Expected,
    declared: Option<usize>,
) -> Result<Option<String>> {
    let name = want.stream_name();
    let replicas = declared.unwrap_or(0);
    // Provisioning mostly creates what is missing: a create comes first (one round trip).
    // JetStream answers the create of a stream that exists with this very config with success,
    // and that of one with another config with error 10058; only then is it read and compared.
    let created = match want {
        // What the broker answers is checked back: the original checks its object store's
        // subjects after creating it, and a stream that answers with another shape than the
        // one asked for is not provisioned (its drift is named).
        Expected::Stream { .. } => {
            match placed(|| js.create_stream(stream_config(&name, &want.shape(), replicas))).await {
                Ok(created) => {
                    let answered = shape_of(&created.cached_info().config);
                    let fields = streams::drift(&want.shape(), &answered);
                    if !fields.is_empty() {
                        return Err(BrokerError::Api {
                            what: format!("creating {name}"),
                            code: None,
                            why: format!("the broker answered with another {}", fields.join(", ")),
                        }
                        .into());
                    }
                    Ok(())
                }
                Err(f) => Err(f),
            }
        }
        Expected::Bucket { .. } => placed(|| js.create_key_value(kv_config(want, replicas)))
            .await
            .map(|_| ()),
    };
    match created {
        Ok(()) => return Ok(Some(format!("ensured {name}"))),
        Err(f) if f.code == Some(STREAM_NAME_IN_USE) => {}
        Err(f) => return Err(f.at(format!("creating {name}"))),
    }
    let existing = match js.get_stream(&name).await {
        Ok(mut s) => {
            let config = s
                .info()
                .await
                .map_err(|e| Failed::of(&e).at(name.as_str()))?
                .config
                .clone();
            let mut fields = streams::drift(&want.shape(), &shape_of(&config));
            if declared.is_some_and(|d| d != config.num_replicas) {
                fields.push("replicas");
            }
            Some(fields)
        }
        Err(e) if not_found(&e) => None,
        Err(e) => return Err(Failed::of(&e).at(format!("reading stream {name}"))),
    };
    let fail = |verb: &str, f: Failed| f.at(format!("{verb} {name}"));
    Ok(Some(match (want, existing) {
        (_, Some(fields)) if fields.is_empty() => return Ok(None),
        // Drift nats-server cannot update in place is left as it is; the plan names it.
        (_, Some(fields)) if !fields.iter().all(|f| streams::updatable(f)) => {
            return Ok(None);
        }
        (Expected::Stream { .. }, Some(_)) => {
            js.update_stream(stream_config(&name, &want.shape(), replicas))
                .await
                .map_err(|e| fail("updating", Failed::of(&e)))?;
            format!("updated {name}")
        }
        (Expected::Stream { .. }, None) => {
            placed(|| js.create_stream(stream_config(&name, &want.shape(), replicas)))
                .await
                .map_err(|e| fail("creating", e))?;
            format!("created {name}")
        }
        (Expected::Bucket { .. }, Some(_)) => {
            js.update_key_value(kv_config(want, replicas))
                .await
                .map_err(|e| fail("updating", Failed::of(&e)))?;
            format!("updated {name}")
        }
        (Expected::Bucket { .. }, None) => {
            placed(|| js.create_key_value(kv_config(want, replicas)))
                .await
                .map_err(|e| fail("creating", e))?;
            format!("created {name}")
        }
    }))
}

/// How long a create may wait for JetStream to place its replicas: a cluster node that just
/// started or rejoined is offline to placement until its first state reaches the meta leader.
const PLACEMENT_DEADLINE: Duration = Duration::from_secs(15);

/// JetStream's answer to the create of a stream that exists with another config.
const STREAM_NAME_IN_USE: u64 = 10058;
/// "No suitable peers for placement": a cluster node not yet known to the meta leader.
const NO_SUITABLE_PEERS: u64 = 10005;
/// "JetStream not enabled for account": a cluster node answers it for an account it loaded a
/// moment ago, before its JetStream enabled it (found by the crash matrix on a cluster).
const NOT_ENABLED_FOR_ACCOUNT: u64 = 10039;
/// "JetStream system temporarily unavailable".
const TEMPORARILY_UNAVAILABLE: u64 = 10008;
/// How long a create is retried while JetStream is busy (no responder to its API, or
/// "temporarily unavailable"): a tenant's huge stream create keeps a server busy for tens of
/// seconds, and a space added meanwhile waits it out rather than fail. A timeout is not
/// retried: a broker that died looks the same.
const BUSY_DEADLINE: Duration = Duration::from_secs(30);

/// A JetStream request that failed: the API error code the broker gave (its `err_code`), when
/// it gave one, whether JetStream was busy (its API gave no answer in time), and the words.
struct Failed {
    code: Option<u64>,
    busy: bool,
    why: String,
}

impl Failed {
    /// Read an async-nats error: the code is taken from the JetStream error anywhere in its
    /// chain of sources (a bucket's create wraps the create of its stream).
    fn of(e: &(dyn std::error::Error + 'static)) -> Failed {
        let mut next = Some(e);
        let mut code = None;
        let mut busy = false;
        while let Some(e) = next {
            // "JetStream unavailable" (no responders: JetStream did not answer) is a busy
            // JetStream; a timeout is not (a broker that died looks the same).
            if let Some(c) = e.downcast_ref::<jetstream::context::CreateStreamError>() {
                use jetstream::context::CreateStreamErrorKind as Kind;
                match c.kind() {
                    Kind::JetStream(j) => {
                        code = Some(j.error_code().0);
                        break;
                    }
                    Kind::JetStreamUnavailable => busy = true,
                    _ => {}
                }
            }
            // A bucket's create asks the account's JetStream first.
            if let Some(c) = e.downcast_ref::<jetstream::context::AccountError>() {
                use jetstream::context::AccountErrorKind as Kind;
                match c.kind() {
                    Kind::JetStream(j) => {
                        code = Some(j.error_code().0);
                        break;
                    }
                    Kind::JetStreamUnavailable => busy = true,
                    _ => {}
                }
            }
            if let Some(j) = e.downcast_ref::<jetstream::Error>() {
                code = Some(j.error_code().0);
                break;
            }
            next = e.source();
        }
        Failed {
            code,
            busy: busy || code == Some(TEMPORARILY_UNAVAILABLE),
            why: e.to_string(),
        }
    }

    /// As the broker's API error of `what`.
    fn at(self, what: impl Into<String>) -> Error {
        BrokerError::Api {
            what: what.into(),
            code: self.code,
            why: self.why,
        }
        .into()
    }
}

/// Run `create` until JetStream places it, or it fails for another reason, or its deadline
/// passes. Retried until [`PLACEMENT_DEADLINE`]: [`NO_SUITABLE_PEERS`] and
/// [`NOT_ENABLED_FOR_ACCOUNT`], both transient on a cluster whose node just started, rejoined or
/// loaded the account; until [`BUSY_DEADLINE`]: a busy JetStream (creating again with the same
/// config is a no-op if the first create landed).
async fn placed<
    T,
    E: std::error::Error + 'static,
    F: std::future::Future<Output = std::result::Result<T, E>>,
>(
    create: impl Fn() -> F,
) -> std::result::Result<T, Failed> {
    let started = tokio::time::Instant::now();
    loop {
        match create().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let failed = Failed::of(&e);
                let deadline = if failed.busy {
                    started + BUSY_DEADLINE
                } else if matches!(
                    failed.code,
                    Some(NO_SUITABLE_PEERS | NOT_ENABLED_FOR_ACCOUNT)
                ) {
                    started + PLACEMENT_DEADLINE
                } else {
                    return Err(failed);
                };
                if tokio::time::Instant::now() >= deadline {
                    return Err(failed);
                }
                tracing::info!(why = %failed.why, "waiting for JetStream (placing replicas, or busy)");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Whether a get-stream error says the stream does not exist.
fn not_found(e: &jetstream::context::GetStreamError) -> bool {
    matches!(
        e.kind(),
        jetstream::context::GetStreamErrorKind::JetStream(ref j)
            if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
    )
}

async fn connect(url: &str, creds: &str) -> std::result::Result<async_nats::Client, String> {
    let options = crate::broker::client_tls::apply(
        async_nats::ConnectOptions::with_credentials(creds)
            .map_err(|e| format!("bad creds: {e}"))?,
    )
    .connection_timeout(TIMEOUT)
    .request_timeout(Some(TIMEOUT))
    .max_reconnects(Some(0))
    .name("cotal");
    options.connect(url).await.map_err(|e| e.to_string())
}

/// JSZ's request for every account's streams, with their configs or not. JSZ lists 1024
/// accounts unless told otherwise, and pages only in a sorted order its first page does not
/// use: one reply holds every account. (Public for the benchmark's `examples/jsz_floor`, which
/// times the broker's answer to exactly this request.)
pub fn jsz_of_every_account(config: bool) -> String {
    format!(r#"{{"accounts":true,"streams":true,"config":{config},"limit":1000000000}}"#)
}

/// JSZ's request for one account's streams, configs and all (public for the same example).
pub fn jsz_of_account(account: &str) -> String {
    serde_json::json!({"account": account, "streams": true, "config": true}).to_string()
}

/// The JSZ of each of `accounts`, configs and all, asked at once, each of `servers` servers.
async fn jsz_of_accounts(
    client: &async_nats::Client,
    accounts: &[String],
    servers: usize,
) -> Result<Vec<Reply<Jsz>>> {
    let bodies: Vec<String> = accounts.iter().map(|a| jsz_of_account(a)).collect();
    let replies = futures::future::try_join_all(
        bodies
            .iter()
            .map(|body| request_all::<Reply<Jsz>>(client, JSZ, body, servers)),
    )
    .await?;
    Ok(replies.into_iter().flatten().collect())
}

/// One request answered by `n` servers: every reply within the deadline, at most `n` (fewer when
/// a server does not answer in time; at least one, or an error).
async fn request_all<T: for<'de> Deserialize<'de>>(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    n: usize,
) -> Result<Vec<T>> {
    if n <= 1 {
        return Ok(vec![request(client, subject, body).await?]);
    }
    let out =
        crate::broker::gather::gather(client, subject, body, TIMEOUT, |got: &[T]| got.len() >= n)
            .await?;
    if out.is_empty() {
        return Err(BrokerError::request(subject, format!("no reply within {TIMEOUT:?}")).into());
    }
    Ok(out)
}

async fn request<T: for<'de> Deserialize<'de>>(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
) -> Result<T> {
    let reply = client
        .request(subject.to_string(), body.to_string().into())
        .await
        .map_err(|e| BrokerError::request(subject, e))?;
    serde_json::from_slice(&reply.payload)
        .map_err(|e| BrokerError::reply(subject, format!("unexpected reply: {e}")).into())
}

/// The shape of a config async-nats read whole (a created stream's, one read after error
/// 10058): the same fields, mapped to a shape by the one mapping, [`JszConfig::shape`].
fn shape_of(c: &stream::Config) -> Shape {
    JszConfig {
        subjects: c.subjects.clone(),
        retention: c.retention,
        max_messages_per_subject: c.max_messages_per_subject,
        discard: c.discard,
        allow_direct: c.allow_direct,
        max_age: u64::try_from(c.max_age.as_nanos()).unwrap_or(u64::MAX),
        max_bytes: c.max_bytes,
        storage: c.storage,
        sealed: c.sealed,
        deny_delete: c.deny_delete,
        deny_purge: c.deny_purge,
        allow_rollup: c.allow_rollup,
        num_replicas: c.num_replicas,
        republish: c.republish.as_ref().map(|r| JszRepublish {
            source: r.source.clone(),
            destination: r.destination.clone(),
            headers_only: r.headers_only,
        }),
    }
    .shape()
}

/// The config cotal creates the stream `name` with (`replicas` 0: the server's default).
pub fn stream_config(name: &str, shape: &Shape, replicas: usize) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        subjects: shape.subjects.clone(),
        retention: match shape.retention {
            Retention::Limits => stream::RetentionPolicy::Limits,
            Retention::WorkQueue => stream::RetentionPolicy::WorkQueue,
        },
        max_messages_per_subject: shape.max_msgs_per_subject,
        discard: if shape.discard_new {
            stream::DiscardPolicy::New
        } else {
            stream::DiscardPolicy::Old
        },
        allow_direct: shape.allow_direct,
        max_age: shape.max_age,
        max_bytes: shape.max_bytes,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        allow_rollup: shape.allow_rollup,
        republish: shape
            .republish
            .as_ref()
            .map(|(source, destination)| stream::Republish {
                source: source.clone(),
                destination: destination.clone(),
                headers_only: false,
            }),
        ..Default::default()
    }
}

/// The config cotal creates a bucket with (`replicas` 0: the server's default).
pub fn kv_config(want: &Expected, replicas: usize) -> kv::Config {
    match want {
        Expected::Bucket {
            bucket,
            history,
            ttl,
            max_bytes,
            ..
        } => kv::Config {
            bucket: bucket.clone(),
            history: *history,
            max_age: *ttl,
            max_bytes: *max_bytes,
            storage: stream::StorageType::File,
            num_replicas: replicas,
            ..Default::default()
        },
        Expected::Stream { name, .. } => unreachable!("{name} is a stream, not a bucket"),
    }
}

/// A stream as a purge sees it before its commit point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSurvey {
    pub name: String,
    pub messages: u64,
    pub bytes: u64,
    /// The purge empties up to here.
    pub last_seq: u64,
    /// Why nats-server lets no one purge it (`sealed`, `deny_purge`), if so.
    pub locked: Option<&'static str>,
}

/// A stream's state and config as the broker reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamState {
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub config: serde_json::Value,
}

/// Live figures of the whole broker.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub version: String,
    pub start: String,
    pub now: String,
    pub accounts: BTreeMap<String, AccountFigures>,
    /// JetStream's file and memory stores as the broker runs them, and what it stores now.
    pub store: Option<StoreFigures>,
    /// Each node that answered, by its server name: the digest of the config it has loaded
    /// (VARZ `config_digest`).
    pub loaded: BTreeMap<String, String>,
    /// Of a single server: the ID of the process that answered (fresh at every start).
    pub server_id: Option<String>,
    /// The JetStream API requests the server answered over every account (JSZ `api`).
    pub server_api: ApiCounters,
}

/// The broker's JetStream stores: their size and their use.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreFigures {
    pub max_file: u64,
    pub max_memory: u64,
    pub file_used: u64,
    pub memory_used: u64,
}

#[derive(Debug, Clone, Default)]
pub struct AccountFigures {
    pub streams: Vec<StreamFigures>,
    pub connections: u64,
    /// Of a single server: what would vouch for a verdict on these streams' configs.
    pub voucher: Option<Voucher>,
    /// Whether the configs were not asked for, the cached verdict vouched for (the streams
    /// then have no shape).
    pub configs_vouched: bool,
}

#[derive(Debug, Clone)]
pub struct StreamFigures {
    pub name: String,
    pub messages: u64,
    pub bytes: u64,
    pub shape: Option<Shape>,
    /// On a cluster: how many replicas the stream has and whether every follower is current.
    pub replication: Option<(usize, bool)>,
    /// The replicas its config declares.
    pub num_replicas: Option<usize>,
    /// Its creation time and sequence range, as of this report.
    pub fingerprint: crate::observed::RegistryFingerprint,
}

#[derive(Deserialize)]
struct Reply<T> {
    data: T,
    #[serde(default)]
    server: ReplyServer,
}

/// Who answered a `$SYS` request.
#[derive(Deserialize, Default)]
struct ReplyServer {
    #[serde(default)]
    name: String,
    /// The server process's ID (fresh at every start).
    #[serde(default)]
    id: String,
}

#[derive(Deserialize)]
struct Jsz {
    #[serde(default)]
    account_details: Vec<JszAccount>,
    /// The server's count over every account.
    #[serde(default)]
    api: JszApi,
}

/// One account of a JSZ reply: its streams (also what [`super::control`] waits on) and its
/// JetStream API counters.
#[derive(Deserialize, Default)]
pub(super) struct JszAccount {
    pub(super) id: String,
    #[serde(default)]
    pub(super) stream_detail: Vec<JszStream>,
    #[serde(default)]
    api: JszApi,
}

/// An account's JetStream API requests answered (JSZ `api`).
#[derive(Deserialize, Default)]
struct JszApi {
    #[serde(default)]
    total: u64,
    #[serde(default)]
    errors: u64,
}

impl JszApi {
    fn counters(&self) -> ApiCounters {
        ApiCounters {
            total: self.total,
            errors: self.errors,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct JszStream {
    #[serde(default)]
    cluster: Option<JszCluster>,
    pub(super) name: String,
    #[serde(default)]
    config: Option<JszConfig>,
    state: JszState,
    #[serde(default)]
    created: String,
}

/// The part of a stream's config a plan reads: [`Shape`]'s fields and the replica count,
/// under the names and in the encodings async-nats's `stream::Config` reads them with (its
/// enums; of these fields, what it requires, this requires). At 1,000 spaces JSZ's reply is
/// 12 MB of 15,000 streams' configs, and reading every field of each was most of its parse.
/// The fields it does not read are not checked either: a stream whose config async-nats could
/// not read whole (a newer nats-server's value in a field cotal does not check) no longer
/// fails the whole reply, which left every space's live figures unknown.
#[derive(Deserialize)]
struct JszConfig {
    #[serde(default)]
    subjects: Vec<String>,
    retention: stream::RetentionPolicy,
    #[serde(default, rename = "max_msgs_per_subject")]
    max_messages_per_subject: i64,
    discard: stream::DiscardPolicy,
    #[serde(default)]
    allow_direct: bool,
    /// Nanoseconds.
    #[serde(default)]
    max_age: u64,
    #[serde(default)]
    max_bytes: i64,
    storage: stream::StorageType,
    #[serde(default)]
    sealed: bool,
    #[serde(default)]
    deny_delete: bool,
    #[serde(default)]
    deny_purge: bool,
    #[serde(default, rename = "allow_rollup_hdrs")]
    allow_rollup: bool,
    num_replicas: usize,
    #[serde(default)]
    republish: Option<JszRepublish>,
}

/// A stream's republish, as nats-server reports it.
#[derive(Deserialize)]
struct JszRepublish {
    #[serde(rename = "src")]
    source: String,
    #[serde(rename = "dest")]
    destination: String,
    #[serde(default)]
    headers_only: bool,
}

impl JszConfig {
    /// The shape these fields make: the one mapping of a stream's config to a [`Shape`].
    fn shape(&self) -> Shape {
        Shape {
            subjects: self.subjects.clone(),
            retention: match self.retention {
                stream::RetentionPolicy::WorkQueue => Retention::WorkQueue,
                _ => Retention::Limits,
            },
            max_msgs_per_subject: self.max_messages_per_subject,
            discard_new: self.discard == stream::DiscardPolicy::New,
            allow_direct: self.allow_direct,
            max_age: std::time::Duration::from_nanos(self.max_age),
            max_bytes: self.max_bytes,
            in_memory: self.storage == stream::StorageType::Memory,
            sealed: self.sealed,
            deny_delete: self.deny_delete,
            deny_purge: self.deny_purge,
            allow_rollup: self.allow_rollup,
            // A republish of headers only is not the copy members read: drift.
            republish: self
                .republish
                .as_ref()
                .filter(|r| !r.headers_only)
                .map(|r| (r.source.clone(), r.destination.clone())),
        }
    }
}

#[derive(Deserialize)]
struct JszCluster {
    #[serde(default)]
    leader: String,
    #[serde(default)]
    replicas: Vec<JszReplica>,
}

#[derive(Deserialize)]
struct JszReplica {
    #[serde(default)]
    current: bool,
}

#[derive(Deserialize)]
struct JszState {
    messages: u64,
    bytes: u64,
    #[serde(default)]
    first_seq: u64,
    #[serde(default)]
    last_seq: u64,
}

#[derive(Deserialize)]
struct AccStatz {
    #[serde(default)]
    account_statz: Vec<AccStat>,
}

#[derive(Deserialize)]
struct AccStat {
    acc: String,
    #[serde(default)]
    conns: u64,
}

#[derive(Deserialize)]
struct Varz {
    #[serde(default)]
    version: String,
    /// The digest of the config the server has loaded (empty from a server too old to say).
    #[serde(default)]
    config_digest: String,
    #[serde(default)]
    start: String,
    #[serde(default)]
    now: String,
    #[serde(default)]
    jetstream: Option<VarzJetStream>,
}

#[derive(Deserialize, Default)]
struct VarzJetStream {
    #[serde(default)]
    config: Option<VarzJsConfig>,
    #[serde(default)]
    stats: Option<VarzJsStats>,
}

#[derive(Deserialize, Default)]
struct VarzJsConfig {
    #[serde(default)]
    max_storage: i64,
    #[serde(default)]
    max_memory: i64,
}

#[derive(Deserialize, Default)]
struct VarzJsStats {
    #[serde(default)]
    storage: u64,
    #[serde(default)]
    memory: u64,
}

#[derive(Deserialize)]
struct Connz {
    #[serde(default)]
    num_connections: u64,
}

/// What vouches for each account's figures (of a single server, `server_id`), and whether the
/// drift cache `vouch` (when the report is intact) vouched for the configs left out; the
/// accounts whose configs must be asked for again, by index.
fn vouchers_and_asks(
    details: &[JszAccount],
    server_id: Option<&str>,
    vouch: Option<&Vouching>,
    loaded_now: &str,
) -> (Vec<Option<(Voucher, bool)>>, Vec<usize>) {
    let mut vouchers: Vec<Option<(Voucher, bool)>> = Vec::with_capacity(details.len());
    let mut ask: Vec<usize> = Vec::new();
    for (i, a) in details.iter().enumerate() {
        let Some(id) = server_id else {
            vouchers.push(None);
            continue;
        };
        let v = voucher(a);
        let lacking = a.stream_detail.iter().any(|s| s.config.is_none());
        let vouched = lacking && vouch.is_some_and(|f| f.holds(id, loaded_now, &a.id, &v));
        if lacking && !vouched {
            ask.push(i);
        }
        vouchers.push(Some((v, vouched)));
    }
    (vouchers, ask)
}

/// What vouches for an account's report: its API counters and its streams' names.
fn voucher(a: &JszAccount) -> Voucher {
    Voucher {
        api: a.api.counters(),
        streams: names_digest(a.stream_detail.iter().map(|s| s.name.as_str())),
    }
}

/// What each account's JSZ report says of its streams, with its voucher (of a single server):
/// a stream reported by several nodes (its replicas) is one, current when its leader says every
/// follower is.
fn account_figures(
    details: Vec<JszAccount>,
    vouchers: Vec<Option<(Voucher, bool)>>,
) -> BTreeMap<String, AccountFigures> {
    let mut accounts: BTreeMap<String, AccountFigures> = BTreeMap::new();
    for (a, voucher) in details.into_iter().zip(vouchers) {
        let entry = accounts.entry(a.id.clone()).or_default();
        if let Some((voucher, vouched)) = voucher {
            entry.voucher = Some(voucher);
            entry.configs_vouched = vouched;
        }
        for s in a.stream_detail {
            // The count is the config's (a rescale's peers leave the group a moment
            // later); the currency is the group's.
            let replication = s.cluster.as_ref().map(|c| {
                (
                    s.config
                        .as_ref()
                        .map(|c| c.num_replicas)
                        .filter(|n| *n > 0)
                        .unwrap_or(1 + c.replicas.len()),
                    !c.leader.is_empty() && c.replicas.iter().all(|r| r.current),
                )
            });
            // Every node with a replica reports the stream; the leader's report is the
            // one that knows whether every follower is current.
            if let Some(known) = entry.streams.iter_mut().find(|k| k.name == s.name) {
                if let (Some((n, a)), Some((_, b))) = (known.replication, replication) {
                    known.replication = Some((n, a || b));
                }
                continue;
            }
            entry.streams.push(StreamFigures {
                name: s.name.clone(),
                messages: s.state.messages,
                bytes: s.state.bytes,
                shape: s.config.as_ref().map(JszConfig::shape),
                replication,
                num_replicas: s.config.as_ref().map(|c| c.num_replicas),
                fingerprint: crate::observed::RegistryFingerprint {
                    created: s.created.clone(),
                    first_seq: s.state.first_seq,
                    last_seq: s.state.last_seq,
                    messages: s.state.messages,
                },
            });
        }
        entry.streams.sort_by(|x, y| x.name.cmp(&y.name));
    }
    accounts
}

/// The JetStream store a node's VARZ reports: its limits and what is used.
fn store_figures(varz: &Varz) -> Option<StoreFigures> {
    varz.jetstream.as_ref().and_then(|js| {
        let config = js.config.as_ref()?;
        let stats = js.stats.as_ref();
        Some(StoreFigures {
            max_file: u64::try_from(config.max_storage).ok()?,
            max_memory: u64::try_from(config.max_memory).ok()?,
            file_used: stats.map(|s| s.storage).unwrap_or(0),
            memory_used: stats.map(|s| s.memory).unwrap_or(0),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BrokerError;

    fn api_error(err_code: u64) -> jetstream::Error {
        serde_json::from_value(serde_json::json!({
            "code": 400, "err_code": err_code, "description": "stream name already in use"
        }))
        .expect("a JetStream API error")
    }

    /// The lean config JSZ is read with reads what async-nats's full one does, for every
    /// field a shape holds, each set and unset, beside fields it does not read.
    #[test]
    fn jsz_configs_read_as_async_nats_reads_them() {
        // A stream cotal provisions, then each field changed from it.
        let base = streams::expected("s", None)
            .into_iter()
            .find_map(|e| match e {
                Expected::Stream { shape, .. } => Some(shape),
                _ => None,
            })
            .expect("a space has streams");
        let mut configs = vec![stream_config("S", &base, 0)];
        let varied: [fn(&mut stream::Config); 13] = [
            |c| c.subjects.clear(),
            |c| c.retention = stream::RetentionPolicy::WorkQueue,
            |c| c.retention = stream::RetentionPolicy::Interest,
            |c| c.max_messages_per_subject = 1,
            |c| c.discard = stream::DiscardPolicy::New,
            |c| c.allow_direct = true,
            |c| c.max_age = Duration::from_secs(86_400 * 30) + Duration::from_nanos(7),
            |c| c.max_bytes = 32 << 20,
            |c| c.storage = stream::StorageType::Memory,
            |c| c.sealed = true,
            |c| c.deny_delete = true,
            |c| c.deny_purge = true,
            |c| c.allow_rollup = true,
        ];
        for vary in varied {
            let mut c = stream_config("S", &base, 3);
            vary(&mut c);
            configs.push(c);
        }
        for config in configs {
            let mut json = serde_json::to_value(&config).unwrap();
            // What nats-server also sends, which neither reads into a shape.
            json["compression"] = "s2".into();
            json["metadata"] = serde_json::json!({"_nats.ver": "2.15.1"});
            json["consumer_limits"] = serde_json::json!({});
            let full: stream::Config = serde_json::from_value(json.clone()).unwrap();
            let lean: JszConfig = serde_json::from_value(json).unwrap();
            assert_eq!(lean.shape(), shape_of(&full), "{config:?}");
            assert_eq!(lean.num_replicas, full.num_replicas);
        }
        // What the full config requires, the lean one does too.
        let bare = serde_json::json!({"name": "S", "subjects": ["a"]});
        assert!(serde_json::from_value::<stream::Config>(bare.clone()).is_err());
        assert!(serde_json::from_value::<JszConfig>(bare).is_err());
    }

    #[test]
    fn a_busy_jetstream_is_waited_out_and_any_other_error_is_not() {
        use jetstream::context::{CreateStreamError, CreateStreamErrorKind};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        for busy in [
            CreateStreamErrorKind::JetStreamUnavailable,
            CreateStreamErrorKind::JetStream(api_error(TEMPORARILY_UNAVAILABLE)),
        ] {
            let calls = std::cell::Cell::new(0);
            let created = rt.block_on(placed(|| {
                calls.set(calls.get() + 1);
                let n = calls.get();
                let kind = busy.clone();
                async move {
                    if n < 3 {
                        Err(CreateStreamError::new(kind))
                    } else {
                        Ok(n)
                    }
                }
            }));
            assert_eq!(created.ok(), Some(3), "retried until it answered");
        }
        let calls = std::cell::Cell::new(0);
        let refused = rt.block_on(placed(|| {
            calls.set(calls.get() + 1);
            async {
                Err::<(), _>(CreateStreamError::new(CreateStreamErrorKind::JetStream(
                    api_error(STREAM_NAME_IN_USE),
                )))
            }
        }));
        assert_eq!(refused.err().and_then(|f| f.code), Some(STREAM_NAME_IN_USE));
        assert_eq!(calls.get(), 1, "not retried");
        // A timeout is not busy: a broker that died times out too.
        let calls = std::cell::Cell::new(0);
        let timed_out = rt.block_on(placed(|| {
            calls.set(calls.get() + 1);
            async { Err::<(), _>(CreateStreamError::new(CreateStreamErrorKind::TimedOut)) }
        }));
        assert!(timed_out.is_err());
        assert_eq!(calls.get(), 1, "a timeout is not retried");
        // A bucket's create that met no responder asking the account is busy too.
        let account = jetstream::context::AccountError::new(
            jetstream::context::AccountErrorKind::JetStreamUnavailable,
        );
        assert!(Failed::of(&account).busy);
    }

    #[test]
    fn a_failed_create_keeps_jetstream_s_code_even_wrapped_in_a_bucket_create() {
        let stream = jetstream::context::CreateStreamError::new(
            jetstream::context::CreateStreamErrorKind::JetStream(api_error(STREAM_NAME_IN_USE)),
        );
        assert_eq!(Failed::of(&stream).code, Some(STREAM_NAME_IN_USE));
        let bucket = jetstream::context::CreateKeyValueError::with_source(
            jetstream::context::CreateKeyValueErrorKind::BucketCreate,
            stream,
        );
        let failed = Failed::of(&bucket);
        assert_eq!(failed.code, Some(STREAM_NAME_IN_USE));
        assert!(matches!(
            failed.at("creating KV_x"),
            Error::Broker(BrokerError::Api {
                code: Some(STREAM_NAME_IN_USE),
                ..
            })
        ));
        let timed_out = jetstream::context::CreateStreamError::new(
            jetstream::context::CreateStreamErrorKind::TimedOut,
        );
        assert_eq!(Failed::of(&timed_out).code, None);
    }
}
