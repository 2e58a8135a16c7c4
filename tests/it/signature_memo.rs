//! The memo of verified signatures (`.cotal/maintenance/signatures`) is proved safe: the apply
//! that writes it makes the next observation skip the signature checks of exactly the tokens
//! it saw, and a record swapped for a tampered or foreign-signed one is still refused with the
//! memo in place (its bytes are not the ones vouched for, so the memo is bypassed).

use crate::support::{TestRoot, stdout};
use cotal::store::broker_record::{self, Loaded};
use cotal::store::caches::signature_memo::SignatureMemo;
use cotal::store::{Root, inventory};

/// The inventory read with the root's memo: (valid spaces, corrupt reasons, checks spared).
fn read_with_memo(root: &TestRoot) -> (usize, Vec<String>, usize) {
    let root = Root::at(root.path()).unwrap();
    let Loaded::Valid((record, trust)) = broker_record::load(&root).unwrap() else {
        panic!("the broker record is valid");
    };
    let memo = SignatureMemo::load(&root, record.operator.seed.expose());
    let inv = inventory::read(&root, &trust, &memo).unwrap();
    let reasons = inv.corrupt.iter().map(|c| c.reason.clone()).collect();
    (inv.spaces.len(), reasons, memo.hits())
}

#[test]
fn the_memo_spares_known_signatures_and_is_bypassed_by_a_tampered_or_foreign_record() {
    let root = TestRoot::init();
    root.desire("[spaces.a]\n\n[spaces.b]\n");
    root.apply().success();
    let memo = root.file(".cotal/maintenance/signatures");
    assert!(
        std::fs::metadata(&memo).unwrap().len() >= 2 * 16,
        "the apply saved a tag for each account JWT at least"
    );
    // Reached: both account JWTs (and their observer accounts') are vouched for by the memo
    // the apply wrote.
    assert_eq!(read_with_memo(&root), (2, vec![], 4));
    let untouched = root.snapshot();
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert_eq!(root.snapshot(), untouched, "a plan never writes the memo");

    // A's JWT with one signature character changed: its tag is another, so its signature is
    // checked, and refused; b's is still vouched for.
    let record_a = root.account_record("a");
    let original = std::fs::read(&record_a).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let jwt = v["account"]["jwt"].as_str().unwrap().to_string();
    let (head, sig) = jwt.rsplit_once('.').unwrap();
    let flipped = if sig.starts_with('A') { "B" } else { "A" };
    v["account"]["jwt"] = format!("{head}.{flipped}{}", &sig[1..]).into();
    std::fs::write(&record_a, serde_json::to_vec(&v).unwrap()).unwrap();
    let (valid, corrupt, hits) = read_with_memo(&root);
    assert_eq!((valid, hits), (1, 2));
    assert!(corrupt[0].contains("does not verify"), "{corrupt:?}");
    let plan = root.cotal(&["plan"]).assert().code(3);
    assert!(
        stdout(&plan).contains("does not verify")
            || crate::support::stderr(&plan).contains("does not verify")
    );

    // A record of another root's operator, valid on its own: refused for its issuer.
    let other = TestRoot::init();
    other.desire("[spaces.a]\n");
    other.apply().success();
    std::fs::copy(other.account_record("a"), &record_a).unwrap();
    let (valid, corrupt, hits) = read_with_memo(&root);
    assert_eq!((valid, hits), (1, 2));
    assert!(corrupt[0].contains("another operator"), "{corrupt:?}");
    root.cotal(&["apply", "--auto-approve"]).assert().code(3);

    // The record restored: vouched for again, and nothing to do.
    std::fs::write(&record_a, &original).unwrap();
    assert_eq!(read_with_memo(&root), (2, vec![], 4));
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}
