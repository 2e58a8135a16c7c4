//! Moving a space to another broker as a recorded procedure (issue 25; the lifecycle seed's
//! relocation, adapted): the source records the move when it exports a fenced space, the
//! destination writes a receipt once it verified every stream against the artifact, and the
//! source removes the space only with that receipt. Types and the receipt's check; pure (the
//! files are `crate::store::relocation`'s).
//!
//! Invariant: a source space whose relocation is recorded is removed only when a receipt
//! names its account and the artifact it exported (by digest), counts every stream it exported
//! with the same messages and last sequence, and the space is fenced (suspended or archived):
//! an apply that serves it again (resumes it, or brings it back from its archive) deletes the
//! record, so a space served since its export has no move left to prove.

use crate::model::SpaceName;
use serde::{Deserialize, Serialize};

/// What a receipt file says it is.
pub const RECEIPT_KIND: &str = "cotal-relocation-receipt";
/// Bumped when the receipt's shape changes incompatibly.
pub const RECEIPT_FORMAT: u32 = 1;

/// Where a recorded relocation stands, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `cotal space backup` of the fenced space began.
    Started,
    /// The space was found fenced (suspended or archived): no client writes to it.
    Fenced,
    /// The artifact is written; its digest is recorded.
    Exported,
    /// A receipt from the destination was verified against the artifact; the removal may
    /// go on (and an interrupted one is finished).
    Verified,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Started => "started",
            Phase::Fenced => "fenced",
            Phase::Exported => "exported",
            Phase::Verified => "verified",
        })
    }
}

/// One stream as exported, or as the destination verified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamCount {
    pub name: String,
    pub messages: u64,
    pub last_seq: u64,
}

/// The artifact a relocation exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// Where it was written (for people; the digest is what is checked).
    pub path: String,
    /// `sha256:` of its `manifest.json`, which holds the sha256 of every file.
    pub digest: String,
    pub exported_at: String,
    pub streams: Vec<StreamCount>,
}

/// The source's record of a move (`.cotal/space.<hex>/relocation.json`), bound to its account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relocation {
    pub account: String,
    pub phase: Phase,
    pub started_at: String,
    /// `user@host`, as the audit names operators.
    pub by: String,
    /// `sha256:` of the account JWT the space was fenced under when it was exported, for the
    /// record (that it was not served since is kept by the apply that serves it again, which
    /// deletes this record, and checked by the removal, which needs it fenced).
    pub fenced_jwt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// `sha256:` of the receipt that verified it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// What the destination writes once it restored the artifact and read every stream back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub kind: String,
    pub format_version: u32,
    pub space: String,
    /// The account the artifact came from (the source's).
    pub source_account: String,
    /// `sha256:` of the artifact's `manifest.json`.
    pub artifact_digest: String,
    /// The destination broker's operator, and the space's account there.
    pub destination_operator: String,
    pub destination_account: String,
    pub streams: Vec<StreamCount>,
    pub verified_at: String,
    pub by: String,
}

/// `sha256:` of a space's account JWT, as a relocation records it.
pub fn jwt_digest(jwt: &str) -> String {
    crate::trust::digest::sha256(jwt.as_bytes())
}

impl Relocation {
    /// A record that could not be read (`why`): a move in an unknown phase, which no receipt
    /// proves (it has no artifact) and `cotal space relocation NAME --cancel` ends.
    pub fn unreadable(account: &str, why: &str) -> Relocation {
        Relocation {
            account: account.to_string(),
            phase: Phase::Started,
            started_at: format!("unknown (its record cannot be read: {why})"),
            by: "unknown".into(),
            fenced_jwt: String::new(),
            artifact: None,
            receipt: None,
        }
    }

    /// Whether the space may be removed without a receipt now: verified. (Serving it again
    /// ends the move: the apply that resumes it or brings it back deletes the record.)
    pub fn verified(&self) -> bool {
        self.phase == Phase::Verified
    }

    /// Check `receipt` against this record of space `name`. `Err` says why it does not prove
    /// the move, in words. (That the space was not served since its export is its caller's
    /// check: it must be fenced now, and serving it again deletes this record.)
    pub fn check(&self, name: &SpaceName, receipt: &Receipt) -> Result<(), String> {
        if receipt.kind != RECEIPT_KIND || receipt.format_version != RECEIPT_FORMAT {
            return Err(format!(
                "it is not a cotal relocation receipt of format {RECEIPT_FORMAT} (kind {:?}, format {})",
                receipt.kind, receipt.format_version
            ));
        }
        if receipt.space != name.as_str() {
            return Err(format!(
                "it is the receipt of space {:?}, not of {}",
                receipt.space,
                name.quoted()
            ));
        }
        if receipt.source_account != self.account {
            return Err(format!(
                "it restored an artifact of account {}, not of {} (this space's)",
                receipt.source_account, self.account
            ));
        }
        let Some(artifact) = &self.artifact else {
            return Err(format!(
                "this root never finished exporting the space (phase {}): back it up again",
                self.phase
            ));
        };
        if receipt.artifact_digest != artifact.digest {
            return Err(format!(
                "it verified artifact {}, but this root exported {} (to {}): restore that one",
                receipt.artifact_digest, artifact.digest, artifact.path
            ));
        }
        for exported in &artifact.streams {
            match receipt.streams.iter().find(|s| s.name == exported.name) {
                Some(s) if s == exported => {}
                Some(s) => {
                    return Err(format!(
                        "stream {} came back with {} messages up to sequence {}; {} up to {} were exported",
                        s.name, s.messages, s.last_seq, exported.messages, exported.last_seq
                    ));
                }
                None => return Err(format!("it does not count stream {}", exported.name)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported() -> Relocation {
        Relocation {
            account: "ASRC".into(),
            phase: Phase::Exported,
            started_at: "2026-12-04T10:00:00Z".into(),
            by: "ops@a".into(),
            fenced_jwt: jwt_digest("eyJ.fenced"),
            artifact: Some(Artifact {
                path: "/backups/design".into(),
                digest: "sha256:aaa".into(),
                exported_at: "2026-12-04T10:01:00Z".into(),
                streams: vec![StreamCount {
                    name: "CHAT_design".into(),
                    messages: 5,
                    last_seq: 5,
                }],
            }),
            receipt: None,
        }
    }

    fn receipt() -> Receipt {
        Receipt {
            kind: RECEIPT_KIND.into(),
            format_version: RECEIPT_FORMAT,
            space: "design".into(),
            source_account: "ASRC".into(),
            artifact_digest: "sha256:aaa".into(),
            destination_operator: "ODST".into(),
            destination_account: "ADST".into(),
            streams: vec![StreamCount {
                name: "CHAT_design".into(),
                messages: 5,
                last_seq: 5,
            }],
            verified_at: "2026-12-04T11:00:00Z".into(),
            by: "ops@b".into(),
        }
    }

    #[test]
    fn a_receipt_proves_the_move_only_of_the_artifact_exported() {
        let name = SpaceName::parse("design").unwrap();
        let r = exported();
        assert_eq!(r.check(&name, &receipt()), Ok(()));
        let refused = |edit: &dyn Fn(&mut Receipt), why: &str| {
            let mut rc = receipt();
            edit(&mut rc);
            let e = r.check(&name, &rc).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        refused(&|rc| rc.space = "other".into(), "not of \"design\"");
        refused(&|rc| rc.source_account = "AX".into(), "account AX");
        refused(
            &|rc| rc.artifact_digest = "sha256:b".into(),
            "restore that one",
        );
        refused(&|rc| rc.streams[0].messages = 4, "came back with 4");
        refused(&|rc| rc.streams.clear(), "does not count");
        refused(&|rc| rc.kind = "x".into(), "not a cotal relocation receipt");
        let mut unfinished = exported();
        unfinished.artifact = None;
        unfinished.phase = Phase::Fenced;
        assert!(
            unfinished
                .check(&name, &receipt())
                .unwrap_err()
                .contains("phase fenced")
        );
        let mut verified = exported();
        verified.phase = Phase::Verified;
        assert!(verified.verified() && !exported().verified());
    }
}
