//! `.cotal/maintenance/folders.jsonl`: what each space's folder said ([`FolderFacts`]: its
//! `$SYS` users and its protection) when the last apply, or `up`'s or `down`'s state refresh,
//! read it, with the stamps of the folder and of every file in it. The next observation
//! believes an entry when the folder and each file still carry the stamps saved: about five
//! status calls for a space where it opened, read and parsed four or five files and decoded a
//! JWT (at 1,000 spaces, the most of a plan's time with the broker stopped).
//!
//! What vouches for an entry: the same account (the space's record, read afresh every time) and
//! the same operator; the folder's stamp (inode, size, modification and status-change times):
//! an entry made, removed or renamed in a folder changes its times, and cotal replaces a file
//! by renaming a new one over it; and each file's stamp: a write in place changes its times,
//! and its status-change time cannot be set by anyone (only the clock moves it). A file system
//! gives times the granularity of its clock (a tick, or coarser), so a change in the tick of the
//! read could leave every stamp as read. An entry is therefore saved only when every stamp it
//! holds is older than the reference: a time the file system stamped before the reads began
//! (the latest status change of `.cotal` and of its maintenance folder; an apply's journal
//! closes there just before). Any change after the reads is stamped no older than that
//! reference, so it never carries a saved stamp (git's rule for racily clean files). A stamp
//! is taken before the file is read, so what was read is never older than what it vouches for.
//!
//! Invariants: the file is an optimisation, never a source of truth: anything wrong with it is
//! an empty cache, which costs one plan its speed. It holds no secret (public keys, times,
//! flags) and is written 0600 like every maintenance file. Only a folder that holds nothing but
//! the files [`FolderFacts`] come from (each a regular file, on the file system of `.cotal`) and
//! was read whole is cached: pidfiles, member users and a move are read every time. A clock
//! that went back (now earlier than the save) voids it, since the ledger's users were filtered
//! by expiry at the save's time, and a reference later than the wall clock caches nothing.
//! Whoever could write this file could write the files it describes, and read the operator
//! seed beside them: unlike the signature memo (keyed from that seed, because a record is
//! checked against the operator), it is not keyed. What a stamp cannot see: a file system
//! that answers a status call from a cache where an open would look again (NFS's attribute
//! cache), and data a crash left on disk without its new times (`lazytime`); git's index has
//! the same limits.

use crate::error::Result;
use crate::model::SpaceName;
use crate::store::space_dir::{FACT_FILES, FolderFacts, Listing};
use crate::store::{Root, atomic};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The format this build writes and reads (another is an empty cache).
const VERSION: u32 = 2;
/// Larger files are not read (an empty cache): about 1 KB a space.
const MAX_BYTES: u64 = 64 << 20;

pub fn path(root: &Root) -> std::path::PathBuf {
    root.maintenance_dir().join("folders.jsonl")
}

/// What identifies a file's content: its file system and inode, size, modification and status
/// change times (nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp(u64, u64, u64, i64, i64);

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp(
            meta.dev(),
            meta.ino(),
            meta.size(),
            nanos(meta.mtime(), meta.mtime_nsec()),
            nanos(meta.ctime(), meta.ctime_nsec()),
        )
    }

    /// When the file system last changed the file (its status-change time).
    fn changed(&self) -> i64 {
        self.4
    }

    fn device(&self) -> u64 {
        self.0
    }
}

fn nanos(secs: i64, nsecs: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsecs)
}

/// A time the file system stamped before an observation's reads began, on the file system of
/// `.cotal` (see the module's header).
#[derive(Debug, Clone, Copy)]
pub struct Reference {
    changed: i64,
    device: u64,
}

/// The reference for an observation about to read the root's folders: `None` when `.cotal`
/// cannot be stamped, its file system keeps no times, or the reference is later than the wall
/// clock (a clock stepped back since would stamp a change after the read older than it, so
/// nothing is cached then). The maintenance folder counts only on the file system of `.cotal`.
pub fn reference(root: &Root) -> Option<Reference> {
    let stamp = |dir: &Path| std::fs::symlink_metadata(dir).ok();
    let state = stamp(&root.state_dir())?;
    let changed = std::iter::once(&state)
        .chain(
            stamp(&root.maintenance_dir())
                .as_ref()
                .filter(|m| m.dev() == state.dev()),
        )
        .map(|m| nanos(m.ctime(), m.ctime_nsec()))
        .max()?;
    let wall = crate::clock::current()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())?;
    (changed > 0 && changed <= wall).then_some(Reference {
        changed,
        device: state.dev(),
    })
}

/// The stamps of a space's folder and of every file in it, taken before the files are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamps {
    dir: Stamp,
    /// Every name the folder held, with its stamp, in order.
    files: Vec<(String, Stamp)>,
}

/// The folder `dir`'s own stamp, taken before it is listed; `None` unless it is a folder on
/// the reference's file system.
pub fn stamp_dir(dir: &Path, reference: &Reference) -> Option<Stamp> {
    let meta = std::fs::symlink_metadata(dir).ok()?;
    (meta.is_dir() && meta.dev() == reference.device).then(|| Stamp::of(&meta))
}

/// The stamps of the folder `listing` lists (`dir`: its stamp before it was listed) and of each
/// file in it, taken before they are read; `None` when it holds anything but the regular files
/// [`FolderFacts`] come from.
pub fn stamp_files(dir: Stamp, listing: &Listing) -> Option<Stamps> {
    let files = listing
        .names()
        .map(|name| {
            let name = name.to_str()?;
            FACT_FILES.iter().find(|f| f.name() == name)?;
            let meta = std::fs::symlink_metadata(listing.dir().join(name)).ok()?;
            (meta.is_file() && meta.dev() == dir.device())
                .then(|| (name.to_string(), Stamp::of(&meta)))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Stamps { dir, files })
}

/// Whether the folder `dir` and its files still carry `stamps` (status calls only, no link
/// followed: a folder or file replaced by a link no longer matches).
fn still(dir: &Path, stamps: &Stamps) -> bool {
    let carries = |path: &Path, stamp: &Stamp, is_dir: bool| {
        std::fs::symlink_metadata(path)
            .is_ok_and(|m| (m.is_dir() == is_dir) && Stamp::of(&m) == *stamp)
    };
    carries(dir, &stamps.dir, true)
        && stamps
            .files
            .iter()
            .all(|(name, stamp)| carries(&dir.join(name), stamp, false))
}

/// One space's folder as read: for its account, with its stamps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub space: SpaceName,
    pub account: String,
    pub stamps: Stamps,
    pub facts: FolderFacts,
}

impl Entry {
    /// Whether every stamp is older than `reference` (a change in the reads' tick could carry
    /// no newer stamp: such an entry is not saved).
    fn settled(&self, reference: &Reference) -> bool {
        std::iter::once(&self.stamps.dir)
            .chain(self.stamps.files.iter().map(|(_, s)| s))
            .all(|s| s.changed() < reference.changed)
    }

    /// The facts as at `now` (no earlier than the save): the ledger's users expired since are
    /// left out, as a read at `now` would.
    pub fn facts_at(&self, now: i64) -> FolderFacts {
        let mut facts = self.facts.clone();
        facts
            .sys_issued
            .retain(|u| u.expires_at.is_none_or(|e| e > now));
        facts
    }
}

/// The first line of the file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    version: u32,
    /// The operator's public key: another root's entries vouch for nothing.
    operator: String,
    /// When it was saved (seconds): a clock now earlier voids it.
    saved_at: i64,
}

/// The entries an observation read, for one operator, as of `saved_at`: what it saves.
#[derive(Debug, Clone)]
pub struct FolderCache {
    operator: String,
    saved_at: i64,
    entries: BTreeMap<SpaceName, Entry>,
}

impl FolderCache {
    pub fn new(operator: &str, now: i64) -> FolderCache {
        FolderCache {
            operator: operator.to_string(),
            saved_at: now,
            entries: BTreeMap::new(),
        }
    }

    /// Keep the entries of `entries` whose stamps are all older than `reference`.
    pub fn extend_settled(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
        reference: &Reference,
    ) {
        self.entries.extend(
            entries
                .into_iter()
                .filter(|e| e.settled(reference))
                .map(|e| (e.space.clone(), e)),
        );
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The file as loaded: each entry's line by the account it was read for, parsed only when its
/// space is looked up (on the core that reads that space's folder).
#[derive(Debug)]
pub struct Loaded {
    bytes: Vec<u8>,
    lines: std::collections::HashMap<String, std::ops::Range<usize>>,
}

impl Loaded {
    /// `space`'s entry when it holds: read for `account`, and the folder `dir` and each of its
    /// files still stamped as then. An entry that does not parse vouches for nothing.
    pub fn vouched(&self, dir: &Path, space: &SpaceName, account: &str) -> Option<Entry> {
        let line = self.bytes.get(self.lines.get(account)?.clone())?;
        serde_json::from_slice::<Entry>(line)
            .ok()
            .filter(|e| &e.space == space && e.account == account && still(dir, &e.stamps))
    }
}

/// The cache of `operator`'s root, at `now`; `None` when absent, unreadable, of another format
/// or operator, or saved later than `now` (the clock went back). Lines are `ACCOUNT ENTRY`, the
/// entry JSON; only the header is parsed here.
pub fn load(root: &Root, operator: &str, now: i64) -> Option<Loaded> {
    let bytes = match atomic::read_no_follow_within(&path(root), MAX_BYTES) {
        Ok(atomic::Found::File(bytes)) => bytes,
        _ => return None,
    };
    let mut starts = 0;
    let mut lines = bytes.split(|b| *b == b'\n').map(|line| {
        let range = starts..starts + line.len();
        starts = range.end + 1;
        range
    });
    let header: Header = serde_json::from_slice(&bytes[lines.next()?]).ok()?;
    if header.version != VERSION || header.operator != operator || header.saved_at > now {
        return None;
    }
    let mut index = std::collections::HashMap::new();
    for range in lines.filter(|r| !r.is_empty()) {
        let line = &bytes[range.clone()];
        let gap = line.iter().position(|b| *b == b' ')?;
        let account = std::str::from_utf8(&line[..gap]).ok()?.to_string();
        index.insert(account, range.start + gap + 1..range.end);
    }
    Some(Loaded {
        bytes,
        lines: index,
    })
}

/// Replace the cache (0600, atomic); its entries are encoded on every core.
pub fn save(root: &Root, cache: &FolderCache) -> Result<()> {
    let header = Header {
        version: VERSION,
        operator: cache.operator.clone(),
        saved_at: cache.saved_at,
    };
    let entries: Vec<&Entry> = cache.entries.values().collect();
    let lines: Vec<Vec<u8>> = entries
        .par_iter()
        .map(|e| {
            let mut line = e.account.as_bytes().to_vec();
            line.push(b' ');
            serde_json::to_writer(&mut line, e).expect("entries serialize");
            line
        })
        .collect();
    let mut bytes = serde_json::to_vec(&header).expect("the header serializes");
    for line in lines {
        bytes.push(b'\n');
        bytes.extend_from_slice(&line);
    }
    bytes.push(b'\n');
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    atomic::write(&path(root), &bytes, atomic::SECRET)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::caches::signature_memo::SignatureMemo;
    use crate::store::paths::SpaceFile;
    use crate::store::space_dir;
    use std::io::Write;

    const OPERATOR: &str = "OPERATOR";
    const ACCOUNT: &str = "ACCOUNT";

    /// A root whose space `s` has a protection record bound to `ACCOUNT`.
    fn root() -> (tempfile::TempDir, Root, SpaceName) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let space = SpaceName::parse("s").unwrap();
        std::fs::create_dir_all(root.maintenance_dir()).unwrap();
        std::fs::create_dir_all(root.space_dir(&space)).unwrap();
        std::fs::write(
            root.space_file(&space, SpaceFile::Lifecycle),
            br#"{"account":"ACCOUNT","protect":true}"#,
        )
        .unwrap();
        (dir, root, space)
    }

    /// The clock moved past everything in the space's folder: the reference taken now.
    fn tick_past_folder(root: &Root, space: &SpaceName) -> Reference {
        crate::testing::tick_past(
            root,
            crate::testing::folder_and_files(root.space_dir(space)),
        );
        reference(root).unwrap()
    }

    /// The space's folder read as an observation that saves reads it: stamped, then read.
    fn read(root: &Root, space: &SpaceName, reference: &Reference) -> Option<Entry> {
        let dir = root.space_dir(space);
        let dir_stamp = stamp_dir(&dir, reference)?;
        let listing = space_dir::listing_of(dir).unwrap();
        let stamps = stamp_files(dir_stamp, &listing)?;
        let (facts, whole) = space_dir::folder_facts(&listing, ACCOUNT, 0, &SignatureMemo::none());
        whole.then(|| Entry {
            space: space.clone(),
            account: ACCOUNT.into(),
            stamps,
            facts,
        })
    }

    /// The entry read now, saved as the only one, and the file loaded again.
    fn saved(root: &Root, space: &SpaceName) -> (Entry, Loaded) {
        let reference = tick_past_folder(root, space);
        let entry = read(root, space, &reference).expect("the folder is cacheable");
        let mut cache = FolderCache::new(OPERATOR, 100);
        cache.extend_settled([entry.clone()], &reference);
        assert_eq!(
            cache.len(),
            1,
            "settled: every stamp older than the reference"
        );
        save(root, &cache).unwrap();
        (entry, load(root, OPERATOR, 100).unwrap())
    }

    fn vouched(root: &Root, space: &SpaceName, loaded: &Loaded) -> Option<Entry> {
        loaded.vouched(&root.space_dir(space), space, ACCOUNT)
    }

    #[test]
    fn an_entry_holds_only_while_the_folder_and_every_file_keep_their_stamps() {
        let (_dir, root, space) = root();
        let (entry, loaded) = saved(&root, &space);
        assert!(entry.facts.protect_recorded);
        assert_eq!(vouched(&root, &space, &loaded), Some(entry.clone()));
        // Bound to its account and its operator, and void when the clock went back.
        assert_eq!(
            loaded.vouched(&root.space_dir(&space), &space, "OTHER"),
            None
        );
        assert!(load(&root, "ANOTHER OPERATOR", 100).is_none());
        assert!(load(&root, OPERATOR, 99).is_none(), "saved in the future");

        // A write in place of the same size, then the same bytes written back: the bytes are
        // as read, the file's change time is not, and the entry is not believed.
        let file = root.space_file(&space, SpaceFile::Lifecycle);
        let original = std::fs::read(&file).unwrap();
        let rewrite = |bytes: &[u8]| {
            let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
            f.write_all(bytes).unwrap();
        };
        rewrite(br#"{"account":"ACCOUNT","protect":fals}"#);
        assert_eq!(vouched(&root, &space, &loaded), None, "edited in place");
        rewrite(&original);
        assert_eq!(std::fs::read(&file).unwrap(), original);
        assert_eq!(vouched(&root, &space, &loaded), None, "written back");

        // A file replaced by another of the same bytes (a new inode, the folder changed).
        let (_, loaded) = saved(&root, &space);
        let aside = root.space_dir(&space).join("aside");
        std::fs::write(&aside, &original).unwrap();
        std::fs::rename(&aside, &file).unwrap();
        assert_eq!(vouched(&root, &space, &loaded), None, "replaced");

        // A file added to the folder (a pidfile): the folder's stamp moved, and a folder that
        // holds one is never cached.
        let (_, loaded) = saved(&root, &space);
        let pidfile = root.space_dir(&space).join("agent.pid");
        std::fs::write(&pidfile, b"1").unwrap();
        assert_eq!(vouched(&root, &space, &loaded), None, "a file added");
        let reference = tick_past_folder(&root, &space);
        assert_eq!(read(&root, &space, &reference), None, "not cacheable");
        std::fs::remove_file(&pidfile).unwrap();

        // The folder replaced by a link to itself is not a folder.
        let (_, loaded) = saved(&root, &space);
        let dir = root.space_dir(&space);
        let moved = root.state_dir().join("moved");
        std::fs::rename(&dir, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &dir).unwrap();
        assert_eq!(vouched(&root, &space, &loaded), None, "a link");
    }

    #[test]
    fn a_file_changed_after_the_reference_is_never_saved() {
        let (_dir, root, space) = root();
        tick_past_folder(&root, &space);
        // The reference is taken, then the file changes (in the reference's tick or later):
        // a change after the read could carry the same stamp, so the entry is not saved.
        let reference = reference(&root).unwrap();
        std::fs::write(
            root.space_file(&space, SpaceFile::Lifecycle),
            br#"{"account":"ACCOUNT","protect":false}"#,
        )
        .unwrap();
        let entry = read(&root, &space, &reference).unwrap();
        let mut cache = FolderCache::new(OPERATOR, 100);
        cache.extend_settled([entry], &reference);
        assert!(cache.is_empty());
    }

    #[test]
    fn only_the_known_regular_files_are_cached_and_a_bad_file_is_an_empty_cache() {
        let (_dir, root, space) = root();
        let reference = tick_past_folder(&root, &space);
        assert!(read(&root, &space, &reference).is_some());
        // A member-user ledger is read every time.
        let users = root.space_file(&space, SpaceFile::Users);
        std::fs::write(&users, b"{}").unwrap();
        let reference = tick_past_folder(&root, &space);
        assert_eq!(read(&root, &space, &reference), None, "users.json");
        std::fs::remove_file(&users).unwrap();
        // A known name that is a link.
        let membership = root.space_file(&space, SpaceFile::Membership);
        std::os::unix::fs::symlink("/dev/null", &membership).unwrap();
        let reference = tick_past_folder(&root, &space);
        assert_eq!(read(&root, &space, &reference), None, "a link");
        std::fs::remove_file(&membership).unwrap();
        // A protection record that does not parse fails closed, and is no fact to keep.
        let lifecycle = root.space_file(&space, SpaceFile::Lifecycle);
        std::fs::write(&lifecycle, b"{").unwrap();
        let reference = tick_past_folder(&root, &space);
        assert_eq!(read(&root, &space, &reference), None, "not read whole");

        // Whatever is wrong with the file, nothing is vouched for.
        std::fs::write(&lifecycle, br#"{"account":"ACCOUNT","protect":true}"#).unwrap();
        let (_, loaded) = saved(&root, &space);
        assert!(vouched(&root, &space, &loaded).is_some());
        let file = path(&root);
        let whole = std::fs::read(&file).unwrap();
        for broken in [&whole[..whole.len() - 20], b"{}\n", b"", b"\xff\n"] {
            std::fs::write(&file, broken).unwrap();
            assert!(
                load(&root, OPERATOR, 100).is_none_or(|l| vouched(&root, &space, &l).is_none()),
                "{broken:?}"
            );
        }
    }
}
