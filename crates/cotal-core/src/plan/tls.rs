//! The listeners' TLS, judged: the refusal when `[broker.tls]`'s or `[cluster.tls]`'s files
//! cannot serve (each problem at its key's place in `cotal.toml`), when the certificate has expired, or when
//! it does not cover the names clients reach a listener by; the warning when it expires within
//! [`EXPIRY_WARNING`]. Pure: expiry is judged at `observed.now`.

use super::guards::Refusal;
use crate::desired::Desired;
use crate::diagnostic::Diagnostic;
use crate::model::stamp;
use crate::observed::{Observed, covers};
use crate::render::Node;

/// A certificate that expires within this many seconds is a plan warning and a `status`
/// problem (30 days).
pub const EXPIRY_WARNING: i64 = 30 * 24 * 3600;

/// Refuse TLS material that cannot serve every listener: the client listeners'
/// (`[broker.tls]`) and the routes' (`[cluster.tls]`).
pub fn guard_tls(desired: &Desired, observed: &Observed, nodes: &[Node]) -> Result<(), Refusal> {
    let mut refused = Vec::new();
    if let (Some(tls), Some(seen)) = (&desired.broker.tls, &observed.tls) {
        let mut problems = Vec::new();
        if tls.names.is_empty() && nodes.iter().any(|n| unspecified(&n.host)) {
            problems.push(format!(
                "{}: the listener binds every address, so no one name is checked: list the names clients (and cotal) reach the broker by in `names`",
                tls.cert.at
            ));
        }
        let wanted: Vec<String> = if tls.names.is_empty() {
            nodes
                .iter()
                .map(|n| n.host.clone())
                .filter(|h| !unspecified(h))
                .collect()
        } else {
            tls.names.clone()
        };
        judge(tls, seen, &wanted, observed.now, &mut problems);
        if !problems.is_empty() {
            refused.push(format!(
                "[broker.tls] cannot serve the client listener:\n  {}",
                problems.join("\n  ")
            ));
        }
    }
    if let (Some(tls), Some(seen)) = (&desired.topology.route_tls, &observed.route_tls) {
        // Every node opens its routes to the others' `host`, and checks the name there.
        let wanted: Vec<String> = desired
            .topology
            .nodes
            .iter()
            .map(|n| n.host.clone())
            .collect();
        let mut problems = Vec::new();
        judge(tls, seen, &wanted, observed.now, &mut problems);
        if !problems.is_empty() {
            refused.push(format!(
                "[cluster.tls] cannot serve the routes:\n  {}",
                problems.join("\n  ")
            ));
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::new(refused.join("\n"))
    .blast("none, nothing was changed.")
    .next("fix the files or the keys named above (a certificate issued for the listener's host, its key readable by its owner only), then plan again"))
}

/// What is wrong with `tls`'s material as `seen` at `now`, for listeners reached by `wanted`.
fn judge(
    tls: &crate::desired::tls_config::TlsSettings,
    seen: &crate::observed::ObservedTls,
    wanted: &[String],
    now: i64,
    problems: &mut Vec<String>,
) {
    problems.extend(seen.problems.iter().cloned());
    let Some(f) = &seen.facts else {
        return;
    };
    if f.not_after <= now {
        problems.push(format!(
            "{}: the certificate {} expired at {}",
            tls.cert.at,
            tls.cert.path,
            stamp(f.not_after)
        ));
    }
    let missing: Vec<&String> = wanted.iter().filter(|h| !covers(&f.names, h)).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{}: the certificate {} does not cover {} (it names {}): the other end, which checks the name it connects to, would refuse it",
            tls.cert.at,
            tls.cert.path,
            missing
                .iter()
                .map(|h| format!("{h:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            if f.names.is_empty() {
                "nothing".to_string()
            } else {
                f.names.join(", ")
            }
        ));
    }
}

/// A listener bound to every address has no one name to check; `names` lists them.
fn unspecified(host: &str) -> bool {
    matches!(host, "0.0.0.0" | "::" | "[::]")
}

/// The certificates (the client listener's, the routes') that expire soon.
pub fn warnings(desired: &Desired, observed: &Observed) -> Vec<String> {
    [
        (&desired.broker.tls, &observed.tls),
        (&desired.topology.route_tls, &observed.route_tls),
    ]
    .into_iter()
    .filter_map(|(tls, seen)| {
        let f = seen.as_ref()?.facts.as_ref()?;
        let path = &tls.as_ref()?.cert.path;
        (f.not_after > observed.now && f.not_after - observed.now <= EXPIRY_WARNING)
            .then(|| expiring(path, f.not_after, observed.now))
    })
    .collect()
}

/// "the TLS certificate X expires in N days (at T)".
pub fn expiring(path: &str, not_after: i64, now: i64) -> String {
    format!(
        "the TLS certificate {path} expires in {} day(s), at {}: put a renewed one at the same path and apply (the reload serves it with no restart)",
        (not_after - now) / 86_400,
        stamp(not_after)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{ObservedTls, TlsFacts};

    fn with_tls(names: &[&str], not_after: i64) -> (Desired, Observed) {
        let desired = crate::desired::parse(
            "version = 1\n[broker]\nhost = \"broker.example.com\"\n[broker.tls]\ncert = \"tls/cert.pem\"\nkey = \"tls/key.pem\"\n[spaces.a]\n",
            "cotal.toml",
        )
        .unwrap();
        let mut observed = crate::testing::observed(&[]);
        observed.now = 1_000_000_000;
        observed.tls = Some(ObservedTls {
            facts: Some(TlsFacts {
                cert_file: "/r/tls/cert.pem".into(),
                key_file: "/r/tls/key.pem".into(),
                ca_file: None,
                fingerprint: format!("sha256:{}", "0".repeat(64)),
                not_after,
                names: names.iter().map(|n| n.to_string()).collect(),
                ca_fingerprint: None,
            }),
            problems: Vec::new(),
        });
        (desired, observed)
    }

    #[test]
    fn an_expired_or_misnamed_certificate_is_refused_at_its_line_and_one_near_expiry_warns() {
        let now = 1_000_000_000;
        let (d, o) = with_tls(&["broker.example.com"], now + 90 * 86_400);
        let nodes = crate::plan::nodes(&d, &o);
        assert!(guard_tls(&d, &o, &nodes).is_ok());
        assert!(warnings(&d, &o).is_empty());

        let (d, o) = with_tls(&["broker.example.com"], now - 1);
        let e = guard_tls(&d, &o, &nodes).unwrap_err().to_string();
        assert!(
            e.contains("cotal.toml:5:8: the certificate tls/cert.pem expired at"),
            "{e}"
        );

        let (d, o) = with_tls(&["other.example.com"], now + 90 * 86_400);
        let e = guard_tls(&d, &o, &nodes).unwrap_err().to_string();
        assert!(e.contains("does not cover \"broker.example.com\""), "{e}");

        let (d, o) = with_tls(&["broker.example.com"], now + 10 * 86_400);
        assert!(guard_tls(&d, &o, &nodes).is_ok());
        let w = warnings(&d, &o);
        assert!(w[0].contains("expires in 10 day(s)"), "{w:?}");
    }

    #[test]
    fn a_route_certificate_must_cover_every_node_and_warns_near_expiry() {
        let now = 1_000_000_000;
        let desired = crate::desired::parse(
            "version = 1\n[cluster]\n[[cluster.nodes]]\nname = \"n1\"\nport = 4222\ncluster_port = 6222\n[[cluster.nodes]]\nname = \"n2\"\nport = 4223\ncluster_port = 6223\n[cluster.tls]\ncert = \"tls/route.pem\"\nkey = \"tls/route.key\"\nca = \"tls/ca.pem\"\n[spaces.a]\n",
            "cotal.toml",
        )
        .unwrap();
        let observed = |names: &[&str], not_after: i64| {
            let mut o = crate::testing::observed(&[]);
            o.now = now;
            o.route_tls = Some(ObservedTls {
                facts: Some(TlsFacts {
                    cert_file: "/r/tls/route.pem".into(),
                    key_file: "/r/tls/route.key".into(),
                    ca_file: Some("/r/tls/ca.pem".into()),
                    fingerprint: format!("sha256:{}", "1".repeat(64)),
                    not_after,
                    names: names.iter().map(|n| n.to_string()).collect(),
                    ca_fingerprint: None,
                }),
                problems: Vec::new(),
            });
            o
        };
        let o = observed(&["127.0.0.1"], now + 90 * 86_400);
        let nodes = crate::plan::nodes(&desired, &o);
        assert!(guard_tls(&desired, &o, &nodes).is_ok());
        assert!(warnings(&desired, &o).is_empty());

        let o = observed(&["10.0.0.1"], now + 90 * 86_400);
        let e = guard_tls(&desired, &o, &nodes).unwrap_err().to_string();
        assert!(
            e.contains("[cluster.tls] cannot serve the routes")
                && e.contains(
                    "cotal.toml:12:8: the certificate tls/route.pem does not cover \"127.0.0.1\""
                ),
            "{e}"
        );

        let o = observed(&["127.0.0.1"], now + 5 * 86_400);
        let w = warnings(&desired, &o);
        assert!(w[0].contains("tls/route.pem expires in 5 day(s)"), "{w:?}");
    }
}
