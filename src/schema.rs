//! The database's schema against this build's: before migrating, payd reads which migrations
//! the database has; one it does not know was applied by a newer release, and
//! `schema_compatibility` says whether this one may run beside it (docs/upgrading.md). After
//! migrating, payd records what older releases may do for each of its own migrations.

use payd_migration::{Migrator, MigratorTrait, Older, OLDER_RELEASES};
use sea_orm::{
    sea_query::{Alias, OnConflict, Query},
    ConnectionTrait, DbErr,
};

/// This build's release, as `schema_compatibility.recorded_by` names it.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// Where the policy and the way back are written down.
const DOC: &str = "docs/upgrading.md, \"Rolling back\"";

/// What a start finds in the database.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Only migrations this build knows: it applies the `pending` rest of its own.
    Known { pending: usize },
    /// Newer migrations, each recorded as one older releases run beside: it runs, unmigrated.
    NewerCompatible(Newer),
}

/// A database a newer release migrated.
#[derive(Debug, PartialEq, Eq)]
pub struct Newer {
    /// The database's newest migration.
    pub newest: String,
    /// This build's newest migration.
    pub ours: String,
    /// The releases that recorded the newer migrations (empty when none did).
    pub recorded_by: Vec<String>,
    /// The newer migrations this build cannot run beside, each with why.
    pub refusing: Vec<(String, String)>,
}

/// Why a start stops before migrating.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(transparent)]
    Db(#[from] DbErr),
    #[error("{}", refusal(.0))]
    Newer(Newer),
}

fn refusal(n: &Newer) -> String {
    let by = match n.recorded_by.last() {
        Some(release) => format!("a newer payd ({release})"),
        None => "a newer payd".to_owned(),
    };
    let refusing = n
        .refusing
        .iter()
        .map(|(m, why)| format!("{m} ({why})"))
        .collect::<Vec<_>>()
        .join(", ");
    let run = match n.recorded_by.last() {
        Some(release) => format!("Run payd {release} or later"),
        None => "Run the release that migrated it".to_owned(),
    };
    format!(
        "the database was migrated by {by}: its newest migration is {}, this build's (payd {RELEASE}) is {}. This build cannot run beside {refusing}. {run}, or restore the backup taken before the upgrade ({DOC}).",
        n.newest, n.ours
    )
}

impl Newer {
    /// The warning a compatible start logs.
    pub fn warning(&self) -> String {
        format!(
            "the database's schema is newer than this build's: its newest migration is {}, this build's (payd {RELEASE}) is {}; every newer migration is marked as one older releases run beside, so this build runs without migrating ({DOC})",
            self.newest, self.ours
        )
    }
}

/// Compares the migrations applied to `db` with this build's, and for newer ones reads what
/// their releases recorded. Creates the migrations' own table when it is missing (as
/// migrating would).
pub async fn check(db: &impl ConnectionTrait) -> Result<Found, MigrateError> {
    let ours: Vec<String> = Migrator::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .collect();
    let applied: Vec<String> = Migrator::get_migration_models(db)
        .await?
        .into_iter()
        .map(|m| m.version)
        .collect();
    let newer: Vec<&String> = applied.iter().filter(|v| !ours.contains(v)).collect();
    let Some(newest) = newer.iter().max() else {
        let pending = ours.iter().filter(|m| !applied.contains(m)).count();
        return Ok(Found::Known { pending });
    };
    let mut n = Newer {
        newest: newest.to_string(),
        ours: ours.last().cloned().unwrap_or_default(),
        recorded_by: Vec::new(),
        refusing: Vec::new(),
    };
    // A newer database always has every earlier migration, the table below included.
    let missing: Vec<&String> = ours.iter().filter(|m| !applied.contains(m)).collect();
    if !missing.is_empty() {
        n.refusing = missing
            .iter()
            .map(|m| {
                let why =
                    "this build's migration, missing from a database a newer release migrated";
                (m.to_string(), why.to_owned())
            })
            .collect();
        return Err(MigrateError::Newer(n));
    }
    let recorded = recorded(db).await?;
    for version in newer {
        match recorded.iter().find(|r| &r.0 == version) {
            Some((_, older, _, by)) if older == Older::Runs.as_str() => {
                n.recorded_by.push(by.clone());
            }
            Some((_, _, reason, by)) => {
                n.recorded_by.push(by.clone());
                n.refusing.push((version.clone(), reason.clone()));
            }
            None => n.refusing.push((
                version.clone(),
                "not recorded in schema_compatibility".to_owned(),
            )),
        }
    }
    n.recorded_by.sort_by_key(|r| release_order(r));
    n.recorded_by.dedup();
    if n.refusing.is_empty() {
        Ok(Found::NewerCompatible(n))
    } else {
        Err(MigrateError::Newer(n))
    }
}

/// `schema_compatibility`'s rows: (migration, older_releases, reason, recorded_by).
async fn recorded(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, String, String, String)>, DbErr> {
    let select = Query::select()
        .columns(["migration", "older_releases", "reason", "recorded_by"].map(Alias::new))
        .from(Alias::new("schema_compatibility"))
        .to_owned();
    let backend = db.get_database_backend();
    let rows = db.query_all_raw(backend.build(&select)).await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("", "migration")?,
                r.try_get("", "older_releases")?,
                r.try_get("", "reason")?,
                r.try_get("", "recorded_by")?,
            ))
        })
        .collect()
}

/// Records, for each of this build's migrations the policy covers, what older releases do
/// beside it; a row already there (recorded by the release that applied it) stays.
pub async fn record(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    let mut insert = Query::insert()
        .into_table(Alias::new("schema_compatibility"))
        .columns(["migration", "older_releases", "reason", "recorded_by"].map(Alias::new))
        .on_conflict(
            OnConflict::column(Alias::new("migration"))
                .do_nothing()
                .to_owned(),
        )
        .to_owned();
    for (migration, older) in OLDER_RELEASES {
        insert.values_panic([
            (*migration).into(),
            older.as_str().into(),
            older.reason().into(),
            RELEASE.into(),
        ]);
    }
    db.execute_raw(db.get_database_backend().build(&insert))
        .await?;
    Ok(())
}

/// A release's numbers, for ordering (`0.10.0` after `0.9.0`); what does not parse sorts first.
fn release_order(release: &str) -> Vec<u64> {
    release
        .split(['.', '-'])
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}
