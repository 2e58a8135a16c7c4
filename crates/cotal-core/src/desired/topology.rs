//! The broker's topology: the nodes one desired state drives. A single server is a cluster of
//! one node (`local`, at the paths a single server always had); `[cluster]` of `cotal.toml`
//! lists several. Pure: parsing and validation of `[cluster]`, the node specs, and the names of
//! each node's files.
//!
//! Invariants: a topology has at least one node; a cluster has at least two, with distinct
//! names (each is its nats-server's `server_name`), distinct client and route listeners,
//! distinct stores and config files; three replicas need at least three nodes. Only what really
//! differs asks which it is ([`Topology::is_cluster`], [`Topology::replicas`]): the cluster block
//! of a rendered config, replicas, quorum, and the verbs a cluster refuses.

use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;

/// The node name of a single server (a cluster of one).
pub const LONE_NODE: &str = "local";

/// The cluster name when `[cluster] name` is not set.
pub const DEFAULT_NAME: &str = "cotal";
/// The replica counts a space's streams may have.
pub const REPLICAS: [u8; 2] = [1, 3];

/// The nodes of the broker, never empty.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Topology {
    /// The cluster's name; `None` for a single server (its config has no `cluster {}` block).
    pub cluster: Option<String>,
    /// Replicas of every stream and bucket cotal provisions (1 or 3; 1 for a single server).
    pub replicas: u8,
    /// In the file's order; the first is the node cotal reaches first. At least one.
    pub nodes: Vec<NodeSpec>,
    /// `[cluster.tls]`: mutual TLS on the routes (`None` for a single server, or a cluster
    /// that writes `allow_plaintext_routes = true`).
    pub route_tls: Option<crate::desired::tls_config::TlsSettings>,
}

impl Topology {
    /// One server at `host:port` with its store at `store_dir` (as written, relative to the
    /// root): the node `local`, whose files are a single server's.
    pub fn lone(host: String, port: u16, store_dir: String) -> Self {
        Topology {
            cluster: None,
            replicas: 1,
            nodes: vec![NodeSpec {
                name: LONE_NODE.into(),
                host,
                port,
                cluster_port: None,
                store_dir,
                config: None,
                local: true,
            }],
            route_tls: None,
        }
    }

    /// Whether this is a cluster of several nodes (a `[cluster]` in `cotal.toml`).
    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The node cotal reaches first.
    pub fn first(&self) -> &NodeSpec {
        &self.nodes[0]
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// "node NAME: " before what is said of one node of a cluster; nothing for a single server,
    /// whose messages read as they always did.
    pub fn on(&self, node: &str) -> String {
        node_prefix(self.is_cluster(), node)
    }
}

/// "node NAME: " when `clustered`, else nothing: the one place a message names its node.
pub fn node_prefix(clustered: bool, node: &str) -> String {
    if clustered {
        format!("node {node}: ")
    } else {
        String::new()
    }
}

/// One node, validated. Paths are as written (relative ones are relative to the root).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeSpec {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// The route listener's port; `None` for a single server, which has no routes.
    pub cluster_port: Option<u16>,
    pub store_dir: String,
    /// Where the node reads its config; `None`: its default place (a single server's
    /// `.cotal/auth/server.conf`, a cluster node's `.cotal/node.<name>/server.conf`).
    pub config: Option<String>,
    /// Whether cotal runs the node on this machine (`local = false`: another machine runs it,
    /// reading its config where `config` says; cotal never starts, stops or probes its
    /// process, and knows it runs only when it answers through the cluster's system account).
    pub local: bool,
}

impl NodeSpec {
    /// The URL the other nodes route to (`None` for a single server).
    pub fn route(&self) -> Option<String> {
        let port = self.cluster_port?;
        Some(if self.host.contains(':') {
            format!("nats-route://[{}]:{port}", self.host)
        } else {
            format!("nats-route://{}:{port}", self.host)
        })
    }

    /// The route listener, `host:port` (`None` for a single server).
    pub fn route_listen(&self) -> Option<crate::model::Listener> {
        Some(crate::model::Listener {
            host: self.host.clone(),
            port: self.cluster_port?,
        })
    }

    /// Where the node reads its config, as written or by default, relative to the root.
    fn config_path(&self) -> String {
        self.config
            .clone()
            .unwrap_or_else(|| format!(".cotal/node.{}/server.conf", self.name))
    }
}

/// The files of one broker node: its config with the candidate and previous ones of a
/// promotion (all three in one folder, so the promotion is a rename), its pidfile and log.
/// A single server's are `.cotal/auth/server.conf`, `.cotal/nats.pid` and `.cotal/nats.log`; a
/// cluster node's live in `.cotal/node.<name>/` (its config where `config` says, if it does).
/// Made by `store::Root::nodes`; plain paths here so that observations can carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFiles {
    pub name: String,
    /// The folder of the config file.
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub conf_next: PathBuf,
    pub conf_prev: PathBuf,
    pub pid: PathBuf,
    pub log: PathBuf,
}

impl NodeFiles {
    /// The config's file name (`server.conf`, or the last part of a node's `config`).
    pub fn conf_file_name(&self) -> String {
        self.conf
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "server.conf".into())
    }

    /// The route credential's include file, beside the config ([`crate::trust::route_auth`]).
    pub fn routes_include(&self) -> PathBuf {
        self.conf
            .with_file_name(crate::trust::route_auth::include_name(
                &self.conf_file_name(),
            ))
    }
}

/// `[cluster]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    name: Option<Spanned<String>>,
    replicas: Option<Spanned<i64>>,
    nodes: Spanned<Vec<RawNode>>,
    tls: Option<Spanned<crate::desired::tls_config::RawRouteTls>>,
    allow_plaintext_routes: Option<Spanned<bool>>,
}

/// One `[[cluster.nodes]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    host: Option<Spanned<String>>,
    port: Spanned<i64>,
    cluster_port: Spanned<i64>,
    store_dir: Option<Spanned<String>>,
    config: Option<Spanned<String>>,
    local: Option<Spanned<bool>>,
}

/// Validate `[cluster]` into its topology. `at(offset, message)` locates an error in the file.
pub fn cluster(
    raw: Spanned<RawCluster>,
    at: &dyn Fn(usize, String) -> String,
) -> Result<Topology, String> {
    let raw = raw.into_inner();
    let name = match raw.name {
        None => DEFAULT_NAME.to_string(),
        Some(n) => check_name("cluster name", n.get_ref()).map_err(|e| at(n.span().start, e))?,
    };
    let nodes_at = raw.nodes.span().start;
    let mut nodes: Vec<NodeSpec> = Vec::new();
    for node in raw.nodes.into_inner() {
        let name_at = node.name.span().start;
        let name = check_name("node name", node.name.get_ref()).map_err(|e| at(name_at, e))?;
        let host = match node.host {
            None => "127.0.0.1".to_string(),
            Some(h) => check_host(h.get_ref()).map_err(|e| at(h.span().start, e))?,
        };
        let port_at = node.port.span().start;
        let cluster_port_at = node.cluster_port.span().start;
        let store_at = node.store_dir.as_ref().map(|d| d.span().start);
        let config_at = node.config.as_ref().map(|c| c.span().start);
        let port =
            check_port("port", *node.port.get_ref()).map_err(|e| at(node.port.span().start, e))?;
        let cluster_port = check_port("cluster_port", *node.cluster_port.get_ref())
            .map_err(|e| at(node.cluster_port.span().start, e))?;
        if port == cluster_port {
            return Err(at(
                node.cluster_port.span().start,
                format!("node {name:?}: cluster_port {cluster_port} is its client port too"),
            ));
        }
        let store_dir = match node.store_dir {
            None => format!(".cotal/node.{name}/nats"),
            Some(d) => check_path("store_dir", d.get_ref()).map_err(|e| at(d.span().start, e))?,
        };
        let config = match node.config {
            None => None,
            Some(c) => Some(
                check_path("config", c.get_ref())
                    .and_then(|p| check_config_path(&name, p))
                    .map_err(|e| at(c.span().start, e))?,
            ),
        };
        let local = match node.local {
            None => true,
            Some(l) if !*l.get_ref() && config.is_none() => {
                return Err(at(
                    l.span().start,
                    format!(
                        "node {name:?} runs on another machine (local = false), so it needs `config`: the path of a folder that machine reads its config from (a mounted or synced folder)"
                    ),
                ));
            }
            Some(l) => *l.get_ref(),
        };
        let this = NodeSpec {
            name,
            host,
            port,
            cluster_port: Some(cluster_port),
            store_dir,
            config,
            local,
        };
        if let Some((field, clash)) = nodes.iter().find_map(|other| clash(other, &this)) {
            let offset = match field {
                Field::Port => port_at,
                Field::ClusterPort => cluster_port_at,
                Field::StoreDir => store_at.unwrap_or(name_at),
                Field::Config => config_at.unwrap_or(name_at),
                Field::Name => name_at,
            };
            return Err(at(offset, clash));
        }
        nodes.push(this);
    }
    if nodes.len() < 2 {
        return Err(at(
            nodes_at,
            format!(
                "a cluster needs at least two [[cluster.nodes]] (this one lists {}); for one server leave [cluster] out and set [broker] host and port",
                nodes.len()
            ),
        ));
    }
    if nodes.iter().all(|n| !n.local) {
        return Err(at(
            nodes_at,
            "every node is local = false: cotal reaches a cluster through a node it runs on this machine".into(),
        ));
    }
    let replicas = match raw.replicas {
        None if nodes.len() >= 3 => 3,
        None => 1,
        Some(r) => {
            let n = *r.get_ref();
            let ok = u8::try_from(n).ok().filter(|n| REPLICAS.contains(n));
            match ok {
                None => {
                    return Err(at(
                        r.span().start,
                        format!("replicas = {n}: a space's streams have 1 or 3 replicas"),
                    ));
                }
                Some(3) if nodes.len() < 3 => {
                    return Err(at(
                        r.span().start,
                        format!(
                            "replicas = 3 needs at least three nodes; this cluster lists {}",
                            nodes.len()
                        ),
                    ));
                }
                Some(n) => n,
            }
        }
    };
    let route_tls = raw
        .tls
        .map(|t| crate::desired::tls_config::routes(t, at))
        .transpose()?;
    match (&route_tls, raw.allow_plaintext_routes) {
        (Some(_), Some(allow)) if *allow.get_ref() => {
            return Err(at(
                allow.span().start,
                "allow_plaintext_routes = true contradicts [cluster.tls]: with it every route is TLS; drop one of them".into(),
            ));
        }
        (None, allow) if !allow.as_ref().is_some_and(|a| *a.get_ref()) => {
            if let Some(n) = nodes.iter().find(|n| !loopback(&n.host)) {
                return Err(at(
                    nodes_at,
                    format!(
                        "node {:?} routes on {}, which is not a loopback address, and routes carry every tenant's messages in the clear: declare [cluster.tls] (cert, key, ca: mutual TLS on every route), or write allow_plaintext_routes = true in [cluster] for a private network you trust",
                        n.name, n.host
                    ),
                ));
            }
        }
        _ => {}
    }
    Ok(Topology {
        cluster: Some(name),
        replicas,
        nodes,
        route_tls,
    })
}

/// Whether `host` is a loopback address (or `localhost`): a listener only this machine reaches.
pub(crate) fn loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A listener host as nats-server binds it: a hostname or an IP address (IPv6 unbracketed).
pub(crate) fn check_host(v: &str) -> Result<String, String> {
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_graphic() && c != '"') {
        return Err(format!(
            "host {v:?} must be a non-empty hostname or IP address"
        ));
    }
    // nats-server binds `host` as written: an IPv6 address goes unbracketed, and the port has
    // its own key.
    if v.contains(':') && v.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(format!(
            "host {v:?} is neither a hostname nor an IP address (write an IPv6 address without brackets, and the port as `port = N`)"
        ));
    }
    Ok(v.to_string())
}

/// A TCP port, 1 to 65535.
pub(crate) fn check_port(field: &str, v: i64) -> Result<u16, String> {
    u16::try_from(v)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{field} {v} must be between 1 and 65535"))
}

/// `path` with `.` and `..` resolved lexically (no link is read).
pub fn normalize(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `configured` (a `store_dir` of `cotal.toml`) against the root folder `root`, as the root
/// resolves it on its host: pure (a state's root is another host's path).
pub fn resolve(root: &std::path::Path, configured: &str) -> std::path::PathBuf {
    normalize(&root.join(configured))
}

/// A path written into a rendered config: no quote, backslash or control character.
pub(crate) fn check_path(field: &str, v: &str) -> Result<String, String> {
    if v.is_empty() || v.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
        return Err(format!(
            "{field} {v:?} must be a non-empty path without quotes, backslashes or control characters"
        ));
    }
    Ok(v.to_string())
}

/// Why two nodes cannot both be in a cluster, if they cannot.
/// The field of a node a clash is located at.
enum Field {
    Name,
    Port,
    ClusterPort,
    StoreDir,
    Config,
}

fn clash(a: &NodeSpec, b: &NodeSpec) -> Option<(Field, String)> {
    if a.name == b.name {
        return Some((
            Field::Name,
            format!("node name {:?} is listed twice", b.name),
        ));
    }
    let theirs = [
        (Some(a.port), "client port"),
        (a.cluster_port, "route port (cluster_port)"),
    ];
    for (mine, field) in [
        (Some(b.port), Field::Port),
        (b.cluster_port, Field::ClusterPort),
    ] {
        if a.host == b.host
            && mine.is_some()
            && let Some((_, what)) = theirs.iter().find(|(p, _)| *p == mine)
        {
            return Some((
                field,
                format!(
                    "node {:?} listens on {}:{}, which is node {:?}'s {what}",
                    b.name,
                    b.host,
                    mine.unwrap_or_default(),
                    a.name
                ),
            ));
        }
    }
    if same_path(&a.store_dir, &b.store_dir) {
        return Some((
            Field::StoreDir,
            format!(
                "node {:?} has the store_dir of node {:?} ({}): every node needs its own",
                b.name, a.name, b.store_dir
            ),
        ));
    }
    if same_path(&a.config_path(), &b.config_path()) {
        return Some((
            Field::Config,
            format!(
                "node {:?} reads the config file of node {:?}: every node needs its own",
                b.name, a.name
            ),
        ));
    }
    None
}

/// A node's `config` as written may not name `cotal.toml`, anything in `.cotal/` but the node's
/// own folder, or climb out with `..`: cotal replaces that file with the node's config (and a
/// plan shows what it holds). Absolute paths are checked against the root when it is known
/// (`cotal::store::Root::check_node_config`).
pub(crate) fn check_config_path(node: &str, path: String) -> Result<String, String> {
    use std::path::Component;
    let parts: Vec<Component> = std::path::Path::new(&path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let word = |c: &Component| c.as_os_str().to_string_lossy().into_owned();
    let own = format!("node.{node}");
    let refused = if parts.iter().any(|c| matches!(c, Component::ParentDir)) {
        Some("climbs out of its folder with `..`")
    } else if parts.len() == 1 && word(&parts[0]) == "cotal.toml" {
        Some("is cotal.toml")
    } else if parts.first().is_some_and(|c| word(c) == ".cotal")
        && !(parts.len() == 3 && word(&parts[1]) == own)
    {
        Some(
            "lies in .cotal/, which holds the root's records and seeds (only .cotal/node.NAME/ is a node's)",
        )
    } else {
        None
    };
    match refused {
        Some(why) => Err(format!(
            "config {path:?} of node {node:?} {why}: cotal replaces a node's config file, so it must be a file of its own (for example nodes/{node}/server.conf)"
        )),
        None => Ok(path),
    }
}

/// Whether two paths as written (relative to the root) name the same place: `./a/b/`, `a//b`
/// and `a/b` do (links are not followed: the paths do not exist yet when the file is parsed).
fn same_path(a: &str, b: &str) -> bool {
    let norm = |p: &str| -> Vec<String> {
        std::path::Path::new(p)
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    };
    norm(a) == norm(b)
}

/// A cluster or node name: 1 to 32 of `[A-Za-z0-9_-]` (it becomes a `server_name`, a folder
/// name and a word of `$SYS` subjects).
fn check_name(what: &str, v: &str) -> Result<String, String> {
    if v.is_empty()
        || v.len() > 32
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{what} {v:?} must be 1 to 32 letters, digits, '_' or '-'"
        ));
    }
    Ok(v.to_string())
}

#[cfg(test)]
mod tests {
    fn parse(cluster: &str) -> Result<super::Topology, String> {
        let text = format!("version = 1\n{cluster}");
        crate::desired::parse(&text, "cotal.toml").map(|d| {
            assert!(d.topology.is_cluster(), "a cluster");
            d.topology
        })
    }

    const THREE: &str = r#"
[cluster]
name = "c1"
[[cluster.nodes]]
name = "n1"
port = 4222
cluster_port = 6222
[[cluster.nodes]]
name = "n2"
port = 4223
cluster_port = 6223
[[cluster.nodes]]
name = "n3"
port = 4224
cluster_port = 6224
"#;

    #[test]
    fn three_nodes_default_to_three_replicas_and_their_own_folders() {
        let c = parse(THREE).unwrap();
        assert_eq!(c.cluster.as_deref(), Some("c1"));
        assert_eq!(c.replicas, 3);
        assert_eq!(c.nodes.len(), 3);
        assert_eq!(c.nodes[1].store_dir, ".cotal/node.n2/nats");
        assert_eq!(c.nodes[2].route().unwrap(), "nats-route://127.0.0.1:6224");
    }

    #[test]
    fn clashing_nodes_are_refused_at_their_line() {
        let e = parse(&THREE.replace("port = 4223", "port = 4222")).unwrap_err();
        assert!(e.starts_with("cotal.toml:11:"), "at the port's line: {e}");
        assert!(e.contains("node \"n1\"'s client port"), "{e}");
        assert!(e.contains("127.0.0.1:4222"), "{e}");
        let e = parse(&THREE.replace("name = \"n3\"", "name = \"n1\"")).unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        let e = parse(&THREE.replace("cluster_port = 6224", "cluster_port = 6222")).unwrap_err();
        assert!(e.contains("6222"), "{e}");
        let e = parse(
            &THREE
                .replace("port = 4223\n", "port = 4223\nconfig = \"nodes/x.conf\"\n")
                .replace(
                    "port = 4224\n",
                    "port = 4224\nconfig = \"./nodes//x.conf\"\n",
                ),
        )
        .unwrap_err();
        assert!(e.contains("reads the config file of node"), "{e}");
        for bad in [
            ".cotal/auth/broker.json",
            "cotal.toml",
            "./cotal.toml",
            "../elsewhere/n3.conf",
            ".cotal/node.n1/server.conf",
        ] {
            let e = parse(&THREE.replace(
                "port = 4224\n",
                &format!("port = 4224\nconfig = \"{bad}\"\n"),
            ))
            .unwrap_err();
            assert!(
                e.contains("cotal replaces a node's config file"),
                "{bad}: {e}"
            );
        }
        parse(&THREE.replace(
            "port = 4224\n",
            "port = 4224\nconfig = \".cotal/node.n3/other.conf\"\n",
        ))
        .unwrap();
    }

    #[test]
    fn replicas_are_one_or_three_and_three_needs_three_nodes() {
        let two = &THREE[..THREE.find("[[cluster.nodes]]\nname = \"n3\"").unwrap()];
        assert_eq!(parse(two).unwrap().replicas, 1);
        let e = parse(&two.replace("name = \"c1\"", "name = \"c1\"\nreplicas = 3")).unwrap_err();
        assert!(e.contains("at least three nodes"), "{e}");
        let e = parse(&THREE.replace("name = \"c1\"", "name = \"c1\"\nreplicas = 2")).unwrap_err();
        assert!(e.contains("1 or 3"), "{e}");
    }

    #[test]
    fn a_cluster_takes_no_broker_listener_and_needs_two_nodes() {
        let e = crate::desired::parse(
            &format!("version = 1\n[broker]\nport = 4222\n{THREE}"),
            "cotal.toml",
        )
        .unwrap_err();
        assert!(
            e.contains("[broker] port is not used with a [cluster]"),
            "{e}"
        );
        let one = &THREE[..THREE.find("[[cluster.nodes]]\nname = \"n2\"").unwrap()];
        assert!(parse(one).unwrap_err().contains("at least two"));
        let e = parse(&THREE.replace("name = \"n2\"", "name = \"n 2\"")).unwrap_err();
        assert!(e.contains("letters, digits"), "{e}");
    }

    #[test]
    fn routes_off_loopback_need_tls_or_an_explicit_plaintext_opt_in() {
        let remote = THREE.replace("name = \"n3\"\n", "name = \"n3\"\nhost = \"10.0.0.3\"\n");
        let e = parse(&remote).unwrap_err();
        assert!(e.starts_with("cotal.toml:"), "located: {e}");
        assert!(
            e.contains("node \"n3\" routes on 10.0.0.3")
                && e.contains("declare [cluster.tls]")
                && e.contains("allow_plaintext_routes = true"),
            "{e}"
        );
        let allowed = remote.replace(
            "name = \"c1\"",
            "name = \"c1\"\nallow_plaintext_routes = true",
        );
        assert!(parse(&allowed).unwrap().route_tls.is_none());

        let tls = format!(
            "{remote}[cluster.tls]\ncert = \"tls/route.pem\"\nkey = \"tls/route.key\"\nca = \"tls/ca.pem\"\ntimeout = 3\n"
        );
        let t = parse(&tls).unwrap().route_tls.expect("route TLS");
        assert!(t.verify, "mutual TLS on routes, always");
        assert_eq!(t.timeout_ms, Some(3000));
        assert_eq!(t.cert.at, "cotal.toml:19:8");

        let e = parse(&tls.replace("ca = \"tls/ca.pem\"\n", "")).unwrap_err();
        assert!(e.contains("[cluster.tls] needs `ca`"), "{e}");
        let e = parse(&tls.replace("key = \"tls/route.key\"\n", "")).unwrap_err();
        assert!(e.contains("[cluster.tls] needs `key`"), "{e}");
        let e = parse(&tls.replace("timeout = 3", "verify = false")).unwrap_err();
        assert!(e.contains("unknown field `verify`"), "{e}");
        let both = tls.replace(
            "name = \"c1\"",
            "name = \"c1\"\nallow_plaintext_routes = true",
        );
        let e = parse(&both).unwrap_err();
        assert!(e.contains("contradicts [cluster.tls]"), "{e}");
    }
}
