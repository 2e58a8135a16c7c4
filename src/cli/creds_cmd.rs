//! `cotal creds`: hand a declared member a user of its own account (`cotal creds SPACE
//! --member OWNER.ACTOR`), a space's owner a user of the space (`--user NAME --profile admin`), or a
//! monitoring tool a read-only system user (`cotal creds --system monitor`), list the users
//! handed out, and revoke them. The operations are [`crate::ops::creds`]; this file parses,
//! writes the creds where asked and prints.

use super::Global;
use super::status_cmd::Format;
use crate::credentials::{DEFAULT_EXPIRY, Request, Target};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::model::stamp;
use crate::report::{creds, documents};
use crate::space::permissions::Profile;
use crate::store::atomic;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub mint: MintArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Mint a user (the same as `cotal creds SPACE --member OWNER.ACTOR` or `--user NAME`;
    /// use it for a space named `mint`, `list` or `revoke`).
    #[command(
        after_help = "Examples:\n  cotal creds mint design --member acme.alice --out alice.creds\n  cotal creds mint list --user bob --profile admin --out bob.creds   # a space named `list`"
    )]
    Mint(MintArgs),
    /// Revoke users of a space (or, with --system, monitoring users): recorded now, enforced by
    /// the next `cotal apply`, which closes
    /// their connections and refuses them from then on.
    #[command(
        after_help = "Examples:\n  cotal creds revoke design --user alice && cotal apply\n  cotal creds revoke design --all --format json\n  cotal creds revoke --system --all && cotal apply"
    )]
    Revoke(RevokeArgs),
    /// The users minted for a space (or, with --system, the monitoring users handed out):
    /// profile, expiry, revocation.
    #[command(
        after_help = "Examples:\n  cotal creds list design\n  cotal creds list --system --format json"
    )]
    List(ListArgs),
}

/// A `--user` is never named as a declared member's users are: it would share the member's
/// consumer and inbox prefix.
fn refuse_member_name(root: &crate::store::Root, space: &SpaceName, user: &str) -> Result<()> {
    let Some(text) = crate::store::desired_file::read(root)? else {
        return Ok(());
    };
    let Ok(desired) = crate::desired::parse(&text, "cotal.toml") else {
        return Ok(());
    };
    if let Some(p) = desired
        .members_of(space)
        .and_then(|m| m.keys().find(|p| p.user_name() == user))
    {
        return Err(Error::input(
            Diagnostic::new(format!(
                "{user:?} is the user name of member {p} of space {} (its consumer and inbox); nothing was minted.",
                space.quoted()
            ))
            .next(format!("mint the member's creds with `--member {p}`, or give this user another name")),
        ));
    }
    Ok(())
}

/// The system users `--system` hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SystemRole {
    /// Read-only `$SYS` requests (server and account `*Z` endpoints: VARZ, CONNZ, JSZ, STATSZ,
    /// HEALTHZ, ...), for nats-surveyor or an exporter; never RELOAD, KICK, a purge or a
    /// claims update.
    Monitor,
}

impl SystemRole {
    fn role(self) -> crate::space::permissions::SysRole {
        match self {
            SystemRole::Monitor => crate::space::permissions::SysRole::Monitor,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct MintArgs {
    /// The space.
    #[arg(required_unless_present = "system", conflicts_with = "system")]
    pub space: Option<String>,
    /// A user of the system account instead of a space's: `monitor` (read-only monitoring
    /// requests). Listed by `cotal creds list --system`, revoked by `cotal creds revoke
    /// --system`.
    #[arg(long, value_enum, value_name = "ROLE")]
    pub system: Option<SystemRole>,
    /// The user's name: letters, digits, '_' and '-' (it names the user's consumers and shows
    /// in the broker's connection lists). With --system, default: the role's name.
    #[arg(long, required_unless_present_any = ["system", "member"])]
    pub user: Option<String>,
    /// A member cotal.toml declares (`[spaces.SPACE.members."OWNER.ACTOR"]`): its user may post
    /// only to its post channels and read only its read channels (live, and their history
    /// through its own consumer); named OWNER_ACTOR. A changed grant revokes it at the apply.
    #[arg(long, value_name = "OWNER.ACTOR", conflicts_with_all = ["user", "system", "profile"])]
    pub member: Option<String>,
    /// What a --user may do (required with it): `admin` is the space's owner, a user of its
    /// account with every right but deleting or purging the streams and buckets cotal
    /// provisions through the API (`cotal space purge` and removal are the ways to do that).
    /// `member` is retired and refused: declare the member in cotal.toml and mint it with
    /// --member (its users get an account of their own, importing only its grant).
    #[arg(long, value_enum, conflicts_with = "system")]
    pub profile: Option<Profile>,
    /// How long the creds work: a duration (1h, 7d, 30d) or `never`. Default: 30 days. A
    /// monitoring user (--system) lives at most 90 days.
    #[arg(long, value_parser = parse_expiry, default_value = "30d", value_name = "DURATION|never")]
    pub expires: Expiry,
    /// Write the creds file here (0600) instead of standard output (`-`: standard output). An
    /// existing file is replaced only with --force; a link or special file never.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// `json`: one versioned document of the user minted, never its creds
    /// (`schemas/creds-mint.schema.json`); needs --out FILE, where the creds go.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["user", "key", "all"])))]
pub struct RevokeArgs {
    /// The space.
    #[arg(required_unless_present = "system", conflicts_with = "system")]
    pub space: Option<String>,
    /// Revoke system users `cotal creds --system` handed out instead (`--all`: every one of
    /// them, never cotal's own or the spaces' $SYS users).
    #[arg(long)]
    pub system: bool,
    /// Every key minted under this user name.
    #[arg(long)]
    pub user: Option<String>,
    /// One user public key (U…), minted by cotal or not (with --system: one `cotal creds
    /// --system` handed out).
    #[arg(long)]
    pub key: Option<String>,
    /// Every user of the space, whoever minted it (creds minted afterwards work); with
    /// --system, every monitoring user handed out.
    #[arg(long)]
    pub all: bool,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// `json`: one versioned document of the keys revoked (`schemas/creds-revoke.schema.json`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// The space.
    #[arg(required_unless_present = "system", conflicts_with = "system")]
    pub space: Option<String>,
    /// List the system users `cotal creds --system` handed out instead.
    #[arg(long)]
    pub system: bool,
    /// `json`: one versioned document (`schemas/creds-list.schema.json`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `--expires`: a duration or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    After(Duration),
    Never,
}

fn parse_expiry(raw: &str) -> std::result::Result<Expiry, String> {
    if raw.trim() == "never" {
        return Ok(Expiry::Never);
    }
    let d = super::parse_duration(raw)?;
    if d.is_zero() {
        return Err(
            "0 would mint creds that are already expired: give a duration (1h, 30d) or `never`"
                .into(),
        );
    }
    Ok(Expiry::After(d))
}

const _: () = assert!(
    DEFAULT_EXPIRY.as_secs() == 30 * 24 * 3600,
    "keep --expires' default and its help in step"
);

pub fn run(global: &Global, args: Args) -> Result<i32> {
    match args.command {
        None => mint(global, args.mint),
        Some(Command::Mint(m)) => mint(global, m),
        Some(Command::Revoke(r)) => revoke(global, r),
        Some(Command::List(l)) => list(global, l),
    }
}

/// Show why `cotal.toml` could not be read, when an operation says so.
fn warn(why: &str) {
    eprintln!("warning: cotal.toml cannot be read ({why}); the spaces on disk are used");
}

fn mint(global: &Global, args: MintArgs) -> Result<i32> {
    let root = global.root()?;
    let out = args
        .out
        .as_deref()
        .map(|raw| super::out_file::Target::check(raw, args.force, Some(&root)))
        .transpose()?
        .unwrap_or(super::out_file::Target::Stdout);
    if args.format == Format::Json && out.is_stdout() {
        return Err(Error::input(
            Diagnostic::new(
                "--format json prints a document of the user minted on standard output, where the creds would go; nothing was minted.",
            )
            .next("give the creds a file: `--out FILE --format json`"),
        ));
    }
    if let Some(role) = args.system {
        let user = args.user.unwrap_or_else(|| "monitor".into());
        return mint_system(
            &root,
            role,
            &user,
            (args.expires, args.lock_timeout),
            &out,
            args.format,
        );
    }
    let Some(raw_space) = args.space else {
        return Err(Error::input(
            "give the space and --member OWNER.ACTOR, or --user NAME --profile admin",
        ));
    };
    let space = SpaceName::parse(&raw_space).map_err(Error::input)?;
    let member = args
        .member
        .as_deref()
        .map(|m| crate::ops::creds::declared_member(&root, &space, m))
        .transpose()?;
    let (user, profile) = match (&member, args.user) {
        (Some((principal, _)), _) => (principal.user_name(), Profile::Member),
        (None, Some(user)) => {
            refuse_member_name(&root, &space, &user)?;
            let Some(profile) = args.profile else {
                return Err(Error::input(
                    Diagnostic::new(format!(
                        "--user mints a user of space {}'s own account, which is its owner's: say so with --profile admin; nothing was minted.",
                        space.quoted()
                    ))
                    .next(format!(
                        "for anyone else, declare a member in cotal.toml ([spaces.{}.members.\"OWNER.ACTOR\"] with its read and post channels), run `cotal apply`, then `cotal creds {} --member OWNER.ACTOR`",
                        crate::adopt::toml_key(space.as_str()),
                        space.as_str()
                    )),
                ));
            };
            (user, profile)
        }
        (None, None) => {
            return Err(Error::input(
                "give the space and --member OWNER.ACTOR, or --user NAME --profile admin",
            ));
        }
    };
    crate::space::permissions::valid_user_name(&user).map_err(Error::input)?;
    let issued = crate::ops::creds::mint(
        &root,
        &Request {
            space: space.clone(),
            user,
            profile,
            expires: match args.expires {
                Expiry::After(d) => Some(d),
                Expiry::Never => None,
            },
            member,
        },
        args.lock_timeout,
        &warn,
    )?;
    let m = &issued.minted;
    let expiry = match m.expires_at {
        Some(t) => format!("expires {}", stamp(t)),
        None => "never expires".into(),
    };
    out.write(issued.creds.expose().as_bytes(), atomic::SECRET)
        .map_err(|e| {
            Error::other(
                Diagnostic::new(format!(
                    "user {:?} ({}) of space {} was minted and recorded, but its creds could not be written to {out}: {e}",
                    issued.minted.name,
                    issued.minted.key,
                    space.quoted()
                ))
                .next(format!(
                    "revoke it (`cotal creds revoke {} --key {}`) and mint again",
                    space.as_str(),
                    issued.minted.key
                )),
            )
        })?;
    if format_json(
        args.format,
        Some(space.as_str()),
        m,
        m.profile.to_string(),
        &out,
    ) {
        return Ok(0);
    }
    let written = if out.is_stdout() {
        String::new()
    } else {
        format!("Wrote {out} (0600): ")
    };
    eprintln!(
        "{written}{} user {:?} ({}) of space {}, {expiry}.",
        m.profile,
        m.name,
        m.key,
        space.quoted()
    );
    if m.member.is_some() {
        eprintln!(
            "Connect it with the inbox prefix {:?} (the only inbox a member may subscribe under).",
            crate::space::permissions::member_inbox(&m.name)
        );
    }
    if let Some(hint) = crate::ops::creds::connect_hint(&root) {
        eprintln!("{hint}");
    }
    Ok(0)
}

/// `cotal creds --system ROLE`: a user of the system account's role key.
fn mint_system(
    root: &crate::store::Root,
    role: SystemRole,
    user: &str,
    (expires, lock_timeout): (Expiry, Duration),
    out: &super::out_file::Target,
    format: Format,
) -> Result<i32> {
    let issued = crate::ops::creds::mint_system(
        root,
        role.role(),
        user,
        match expires {
            Expiry::After(d) => Some(d),
            Expiry::Never => None,
        },
        lock_timeout,
        &warn,
    )?;
    let m = &issued.minted;
    out.write(issued.creds.expose().as_bytes(), atomic::SECRET)
        .map_err(|e| {
            Error::other(
                Diagnostic::new(format!(
                    "system user {:?} ({}) was minted and recorded, but its creds could not be written to {out}: {e}",
                    m.name, m.key
                ))
                .next(format!(
                    "revoke it (`cotal creds revoke --system --key {}`, then `cotal apply`) and mint again",
                    m.key
                )),
            )
        })?;
    if format_json(format, None, m, m.profile.name().to_string(), out) {
        return Ok(0);
    }
    let written = if out.is_stdout() {
        String::new()
    } else {
        format!("Wrote {out} (0600): ")
    };
    eprintln!(
        "{written}{} user {:?} ({}) of the system account, {}.",
        m.profile.name(),
        m.name,
        m.key,
        match m.expires_at {
            Some(t) => format!("expires {}", stamp(t)),
            None => "never expires".into(),
        }
    );
    eprintln!(
        "It may only make the read-only $SYS monitoring requests (server and account VARZ, CONNZ, JSZ, STATSZ, HEALTHZ, ...); it sees every tenant's connections, so hand it to monitoring only."
    );
    if let Some(hint) = crate::ops::creds::connect_hint(root) {
        eprintln!("{hint}");
    }
    Ok(0)
}

/// With `--format json`, print the document of the user minted (its creds are in `out`) and
/// say so.
fn format_json<P>(
    format: Format,
    space: Option<&str>,
    m: &crate::store::users::Minted<P>,
    profile: String,
    out: &super::out_file::Target,
) -> bool {
    if format != Format::Json {
        return false;
    }
    print!(
        "{}",
        documents::pretty(&documents::CredsMinted {
            format_version: documents::FORMAT_VERSION,
            space: space.map(str::to_string),
            user: m.name.clone(),
            key: m.key.clone(),
            profile,
            expires: m.expires_at.map(stamp),
            out: out.to_string(),
        })
    );
    true
}

/// With `--format json`, print the document of the keys revoked and say so.
fn revoked_json(
    format: Format,
    space: Option<&SpaceName>,
    revoked: &crate::credentials::Revoked,
) -> bool {
    if format != Format::Json {
        return false;
    }
    print!(
        "{}",
        documents::pretty(&documents::CredsRevoked {
            format_version: documents::FORMAT_VERSION,
            space: space.map(|s| s.as_str().to_string()),
            keys: revoked.keys.clone(),
            at: stamp(revoked.at),
            enforced_by_next_apply: true,
        })
    );
    true
}

fn revoke(global: &Global, args: RevokeArgs) -> Result<i32> {
    let root = global.root()?;
    let target = match (args.user, args.key, args.all) {
        (Some(u), _, _) => Target::User(u),
        (_, Some(k), _) => Target::Key(k),
        _ => Target::All,
    };
    if args.system {
        let revoked = crate::ops::creds::revoke_system(&root, &target, args.lock_timeout, &warn)?;
        if revoked_json(args.format, None, &revoked) {
            return Ok(0);
        }
        eprintln!(
            "Recorded the revocation of {} system user key{} at {}.\n\
             next: `cotal apply` re-issues the system account with it and reloads the broker: their connections close and they are refused from then on",
            revoked.keys.len(),
            if revoked.keys.len() == 1 { "" } else { "s" },
            stamp(revoked.at)
        );
        return Ok(0);
    }
    let Some(raw_space) = args.space else {
        return Err(Error::input("give the space, or --system"));
    };
    let space = SpaceName::parse(&raw_space).map_err(Error::input)?;
    let revoked = crate::ops::creds::revoke(&root, &space, &target, args.lock_timeout, &warn)?;
    if revoked_json(args.format, Some(&space), &revoked) {
        return Ok(0);
    }
    eprintln!(
        "Recorded the revocation of {} key{} of space {} at {}.\n\
         next: `cotal apply` re-issues the account with it and reloads the broker: their connections close and they are refused from then on",
        revoked.keys.len(),
        if revoked.keys.len() == 1 { "" } else { "s" },
        space.quoted(),
        stamp(revoked.at)
    );
    Ok(0)
}

fn list(global: &Global, args: ListArgs) -> Result<i32> {
    let root = global.root()?;
    if args.system {
        return list_system(&root, args.format);
    }
    let Some(raw_space) = args.space else {
        return Err(Error::input("give the space, or --system"));
    };
    let space = SpaceName::parse(&raw_space).map_err(Error::input)?;
    let listing = crate::ops::creds::list(&root, &space, crate::clock::now(), &warn)?;
    let rows: Vec<creds::UserRow> = listing
        .users
        .iter()
        .map(|(m, state)| creds::UserRow {
            name: m.name.clone(),
            key: m.key.clone(),
            kind: m.profile.to_string(),
            issued: m.issued_at,
            expires: m.expires_at,
            state: *state,
        })
        .collect();
    let revoked = Some(&listing.ledger.revoked);
    match args.format {
        Format::Json => print!(
            "{}",
            creds::list_json(Some(space.as_str()), &listing.account, &rows, revoked)
        ),
        Format::Text => print!("{}", creds::table(&rows, creds::Of::Space, revoked)),
    }
    Ok(0)
}

/// `cotal creds list --system`.
fn list_system(root: &crate::store::Root, format: Format) -> Result<i32> {
    let listing = crate::ops::creds::list_system(root, crate::clock::now(), &warn)?;
    let rows: Vec<creds::UserRow> = listing
        .users
        .iter()
        .map(|(m, state)| creds::UserRow {
            name: m.name.clone(),
            key: m.key.clone(),
            kind: m.profile.name().to_string(),
            issued: m.issued_at,
            expires: m.expires_at,
            state: *state,
        })
        .collect();
    match format {
        Format::Json => print!("{}", creds::list_json(None, &listing.account, &rows, None)),
        Format::Text => print!("{}", creds::table(&rows, creds::Of::System, None)),
    }
    Ok(0)
}
