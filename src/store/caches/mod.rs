//! The caches under `.cotal/maintenance/`: what a plan would otherwise read, ask or verify
//! again, saved by the last write for the next observation. Each is an optimisation, never a
//! source of truth: anything wrong with one (absent, unreadable, torn, from another root, a
//! clock gone back) counts as empty, which costs one plan its speed and nothing else. No cache
//! holds a secret; each is written 0600, atomically, like every maintenance file. Observation
//! never writes one (`observe` only loads); an apply, `up` and `down` save them after their
//! write (`ops::state`), from the observation that followed it.
//!
//! | cache | file | what it spares | what vouches for an entry | what voids it | written by | read by |
//! |---|---|---|---|---|---|---|
//! | [`signature_memo`] | `signatures` | the ed25519 arithmetic of every account and `$SYS` JWT | an HMAC tag of the token's exact bytes, keyed from the operator seed: these bytes verified under this operator before | any change of a token's bytes (another tag); another operator (another key); a token not seen at the last save is forgotten | `ops::state` (`save_for_next`) after an apply, `up`, `down` | `observe` (every account record and `$SYS` credential: `store::inventory`, `store::space_dir`) |
//! | [`folder_cache`] | `folders.jsonl` | opening, reading and parsing a space folder's files (its `$SYS` users, its protection) | the same account and operator; the folder's and each file's stamp (inode, size, modification and status-change times), every one older than the reference taken before the reads | any stamp changed; a folder holding anything but those files; a clock gone back; a reference later than the wall clock | `ops::state` (`save_for_next`) | `observe::local` |
//! | [`registry_cache`] | `registries.json` | a connection into each account to read its channel registry | the live fingerprint of the account's registry stream (created, first and last sequence) equal to the one taken just before the read | the stream moved (any write to the registry); a cluster (only a single server's are kept) | `ops::state` (the state refresh) | `observe` (with the broker running) |
//! | [`drift_cache`] | `drift.json` | the stream configs in JSZ's reply (60% of it at 1,000 spaces) and their judgement | the same server process and loaded config; the account's JetStream API counters and stream names unchanged, no counter lower; the same token, storage quota, stream table and judgement | a restart; a counter or a stream name changed; any other expectation changed; every apply removes the file before it changes anything ([`drift_cache::void`]) | `ops::state` (`save_drift_cache`) | `observe` (`observe::drift`) |
//!
//! Each module's own header says why what vouches for an entry is enough.

pub mod drift_cache;
pub mod folder_cache;
pub mod registry_cache;
pub mod signature_memo;
