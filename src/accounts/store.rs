//! Persistence of merchants, shops and keys.

use chrono::{DateTime, Utc};
use payd_entity::{api_key, audit_entry, file, merchant, profile};
use sea_orm::{
    sea_query::{Expr, ExprTrait, Func, Query, SelectStatement, UpdateStatement},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect,
    QueryTrait,
};

pub use payd_model::audit::Action;

use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::{generate_key, hash_key, pepper_id, KeyKind, Mode},
    clock::Timeline,
    commit::{self, Change, CommitError, Write},
    ids::{AuditEntryId, KeyId, MerchantId, ProfileId},
    pagination::{paginate, List, Page, PageError},
};

/// A security action on a merchant's account, for its audit log.
pub struct Audit<'a> {
    pub merchant_id: &'a MerchantId,
    /// The key that acted; `None` for the operator.
    pub actor: Option<&'a KeyId>,
    pub action: Action,
    pub target_id: &'a str,
    /// What changed; never a secret.
    pub details: serde_json::Value,
}

/// The audit row of an action, written in the action's own commit.
pub fn audited(a: Audit<'_>, now: DateTime<Utc>) -> Write {
    commit::insert(audit_entry::Model {
        id: AuditEntryId::new(),
        merchant_id: a.merchant_id.clone(),
        actor_key_id: a.actor.cloned(),
        action: a.action,
        target_id: a.target_id.to_owned(),
        details: Json(a.details),
        created_at: now,
    })
}

/// The merchant's audit log.
pub async fn list_audit(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    page: &Page,
) -> Result<List<audit_entry::Model>, PageError> {
    let select = audit_entry::Entity::find()
        .filter(audit_entry::Column::MerchantId.eq(merchant_id.as_str()));
    paginate(db, select.clone(), select, audit_entry::Column::Id, page).await
}

/// Every merchant, newest first (the operator's list).
pub async fn list_merchants(
    db: &impl ConnectionTrait,
    page: &Page,
) -> Result<List<merchant::Model>, PageError> {
    let select = merchant::Entity::find();
    paginate(db, select.clone(), select, merchant::Column::Id, page).await
}

/// A merchant just created, with its first shop and the only copy of its keys.
pub struct NewMerchant {
    pub merchant: merchant::Model,
    pub profile: profile::Model,
    pub mode: Mode,
    pub secret_key: String,
    pub publishable_key: String,
}

/// Creates a merchant, a default shop, and one secret and one publishable key of `mode`.
pub async fn create_merchant(
    db: &Db,
    now: DateTime<Utc>,
    pepper: &str,
    name: &str,
    mode: Mode,
) -> Result<NewMerchant, CommitError> {
    let merchant = merchant::Model {
        id: MerchantId::new(),
        name: name.to_owned(),
        created_at: now,
        sandbox_clock_offset: 0,
        suspended_at: None,
    };
    let merchant_id = MerchantId::parse(&merchant.id).unwrap_or_default();
    let profile = profile_row(now, &merchant_id, "Default shop");
    let key = |kind| NewKey {
        merchant_id: &merchant_id,
        kind,
        mode,
        profile_id: None,
        name: None,
    };
    let (secret, secret_key) = key_row(now, pepper, key(KeyKind::Secret));
    let (publishable, publishable_key) = key_row(now, pepper, key(KeyKind::Publishable));
    let change = Change::at(now)
        .write(commit::insert(merchant.clone()))
        .write(commit::insert(profile.clone()))
        .write(commit::insert(secret))
        .write(commit::insert(publishable));
    commit::commit(db, change).await?;
    Ok(NewMerchant {
        merchant,
        profile,
        mode,
        secret_key,
        publishable_key,
    })
}

pub async fn any_merchant(db: &impl ConnectionTrait) -> Result<bool, DbErr> {
    Ok(merchant::Entity::find().count(db).await? > 0)
}

pub async fn find_merchant(
    db: &impl ConnectionTrait,
    id: &MerchantId,
) -> Result<Option<merchant::Model>, DbErr> {
    merchant::Entity::find_by_id(id.clone()).one(db).await
}

/// Adds a shop to a merchant that has fewer than `max` (`limits.max_shops_per_merchant`),
/// counted inside the commit: concurrent adds never pass the bound.
pub async fn insert_profile(
    db: &Db,
    now: DateTime<Utc>,
    merchant_id: &MerchantId,
    name: &str,
    max: u64,
) -> Result<profile::Model, CommitError> {
    let row = profile_row(now, merchant_id, name);
    let within = Query::select()
        .expr(Func::count(Expr::col(profile::Column::Id)))
        .from(profile::Entity)
        .and_where(profile::Column::MerchantId.eq(merchant_id.as_str()))
        .and_having(Expr::expr(Func::count(Expr::col(profile::Column::Id))).lte(max as i64))
        .to_owned();
    let change = Change::at(now)
        .write(commit::insert(row.clone()))
        .write_all(commit::bounded(
            merchant_lock(merchant_id.as_str()),
            within,
            SHOPS_BOUND,
            max,
        ));
    commit::commit(db, change).await?;
    Ok(row)
}

/// The refusals of the merchant's bounds: each names its setting.
pub const SHOPS_BOUND: &str = "limits.max_shops_per_merchant";
pub const KEYS_BOUND: &str = "limits.max_api_keys_per_merchant";

/// Locks the merchant's row until the change commits: the changes that add to the merchant's
/// bounded rows (shops, keys, files) follow one another ([`commit::bounded`]).
pub fn merchant_lock(merchant_id: &str) -> UpdateStatement {
    merchant::Entity::update_many()
        .col_expr(merchant::Column::Id, Expr::col(merchant::Column::Id))
        .filter(merchant::Column::Id.eq(merchant_id))
        .into_query()
}

fn profile_row(now: DateTime<Utc>, merchant_id: &MerchantId, name: &str) -> profile::Model {
    profile::Model {
        id: ProfileId::new(),
        merchant_id: merchant_id.clone(),
        name: name.to_owned(),
        created_at: now,
        display_name: None,
        logo_file_id: None,
        accent_color: None,
        embed_origins: None,
    }
}

/// The content type of the merchant's file `id` in this mode, for a shop's logo; `None` for
/// a file that is not theirs (the files resource owns files; a shop only points at one).
pub async fn file_type(
    db: &impl ConnectionTrait,
    id: &crate::ids::FileId,
    merchant_id: &MerchantId,
    test_mode: bool,
) -> Result<Option<String>, DbErr> {
    file::Entity::find_by_id(id.clone())
        .filter(file::Column::MerchantId.eq(merchant_id.as_str()))
        .filter(file::Column::TestMode.eq(test_mode))
        .select_only()
        .column(file::Column::ContentType)
        .into_tuple()
        .one(db)
        .await
}

/// Writes a shop's name and branding as `shop` holds them, with its audit row.
pub async fn update_profile(
    db: &Db,
    now: DateTime<Utc>,
    shop: &profile::Model,
    actor: Option<&KeyId>,
) -> Result<(), CommitError> {
    let update = profile::Entity::update_many()
        .col_expr(profile::Column::Name, Expr::value(shop.name.clone()))
        .col_expr(
            profile::Column::DisplayName,
            Expr::value(shop.display_name.clone()),
        )
        .col_expr(
            profile::Column::LogoFileId,
            Expr::value(shop.logo_file_id.clone()),
        )
        .col_expr(
            profile::Column::AccentColor,
            Expr::value(shop.accent_color.clone()),
        )
        .col_expr(
            profile::Column::EmbedOrigins,
            Expr::value(shop.embed_origins.clone()),
        )
        .filter(profile::Column::Id.eq(shop.id.as_str()))
        .into_query();
    let audit = audited(
        Audit {
            merchant_id: &shop.merchant_id,
            actor,
            action: Action::ShopUpdated,
            target_id: &shop.id,
            details: serde_json::json!({
                "name": shop.name,
                "display_name": shop.display_name,
                "logo_file_id": shop.logo_file_id,
                "accent_color": shop.accent_color,
                "embed_origins": shop.embed_origins,
            }),
        },
        now,
    );
    commit::commit(
        db,
        Change::at(now).write(Write::Update(update)).write(audit),
    )
    .await
    .map(drop)
}

pub async fn list_profiles(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    only: Option<&ProfileId>,
    page: &Page,
) -> Result<List<profile::Model>, PageError> {
    let mut select =
        profile::Entity::find().filter(profile::Column::MerchantId.eq(merchant_id.as_str()));
    if let Some(only) = only {
        select = select.filter(profile::Column::Id.eq(only.as_str()));
    }
    paginate(db, select.clone(), select, profile::Column::Id, page).await
}

/// A key to make.
pub struct NewKey<'a> {
    pub merchant_id: &'a MerchantId,
    pub kind: KeyKind,
    pub mode: Mode,
    /// The shop a key is bound to, if any.
    pub profile_id: Option<&'a ProfileId>,
    pub name: Option<String>,
}

/// Stores a new key, made by the key `actor` (none: by payd itself), and returns its row and
/// the key itself (which is never stored).
pub async fn insert_key(
    db: &Db,
    now: DateTime<Utc>,
    pepper: &str,
    new: NewKey<'_>,
    actor: Option<&KeyId>,
    max: Option<u64>,
) -> Result<(api_key::Model, String), CommitError> {
    let [made] = insert_keys(db, now, pepper, [new], actor, max).await?;
    Ok(made)
}

/// Stores new keys of one merchant in one commit (all or none), as [`insert_key`] one.
pub async fn insert_keys<const N: usize>(
    db: &Db,
    now: DateTime<Utc>,
    pepper: &str,
    news: [NewKey<'_>; N],
    actor: Option<&KeyId>,
    max: Option<u64>,
) -> Result<[(api_key::Model, String); N], CommitError> {
    let made = news.map(|new| key_row(now, pepper, new));
    let mut change = Change::at(now);
    for (row, _) in &made {
        let audit = Audit {
            merchant_id: &row.merchant_id,
            actor,
            action: Action::ApiKeyCreated,
            target_id: &row.id,
            details: serde_json::json!({"kind": row.kind.as_str(), "mode": row.mode.as_str(), "last4": row.last4,
                "profile_id": row.profile_id, "name": row.name}),
        };
        change = change
            .write(commit::insert(row.clone()))
            .write(audited(audit, now));
    }
    if let (Some(max), Some((row, _))) = (max, made.first()) {
        let within = live_keys(&row.merchant_id, max);
        change = change.write_all(commit::bounded(
            merchant_lock(&row.merchant_id),
            within,
            KEYS_BOUND,
            max,
        ));
    }
    commit::commit(db, change).await?;
    Ok(made)
}

/// Finds a row while the merchant holds at most `max` live keys (revoked keys do not count).
fn live_keys(merchant_id: &str, max: u64) -> SelectStatement {
    Query::select()
        .expr(Func::count(Expr::col(api_key::Column::Id)))
        .from(api_key::Entity)
        .and_where(api_key::Column::MerchantId.eq(merchant_id))
        .and_where(api_key::Column::RevokedAt.is_null())
        .and_having(Expr::expr(Func::count(Expr::col(api_key::Column::Id))).lte(max as i64))
        .to_owned()
}

/// A new key's row and the key itself.
fn key_row(now: DateTime<Utc>, pepper: &str, new: NewKey<'_>) -> (api_key::Model, String) {
    let key = generate_key(new.kind, new.mode);
    let row = api_key::Model {
        id: KeyId::new(),
        merchant_id: new.merchant_id.clone(),
        profile_id: new.profile_id.cloned(),
        kind: new.kind,
        mode: new.mode,
        key_hash: hash_key(pepper, &key),
        last4: key[key.len() - 4..].to_owned(),
        name: new.name,
        created_at: now,
        revoked_at: None,
        pepper_id: Some(pepper_id(pepper)),
    };
    (row, key)
}

/// The timeline a command on an object of this merchant and mode runs on: the base time for a
/// live object; for a sandbox one, the timeline it was sent on when that is its merchant's (a
/// request on its key, one of its jobs), else (an anonymous route, a job scheduled on no
/// timeline) the merchant's test clock, read here.
///
/// A database that cannot be read leaves the timeline it was sent on: the command itself then
/// meets the same fault and fails.
pub async fn timeline_for(
    db: &impl ConnectionTrait,
    sent: &Timeline,
    merchant_id: &MerchantId,
    test_mode: bool,
) -> Timeline {
    if !test_mode {
        return Timeline::default();
    }
    if sent.merchant.as_deref() == Some(merchant_id.as_str()) {
        return sent.clone();
    }
    match merchant::Entity::find_by_id(merchant_id.clone())
        .one(db)
        .await
    {
        Ok(m) => Timeline::of(merchant_id, m.map_or(0, |m| m.sandbox_clock_offset)),
        Err(e) => {
            tracing::warn!(merchant_id = %merchant_id, error = %e, "the merchant's test clock could not be read");
            sent.clone()
        }
    }
}

fn merchant_keys(merchant_id: &MerchantId, mode: Mode) -> sea_orm::Select<api_key::Entity> {
    api_key::Entity::find()
        .filter(api_key::Column::MerchantId.eq(merchant_id.as_str()))
        .filter(api_key::Column::Mode.eq(mode.as_str()))
}

pub async fn list_keys(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    mode: Mode,
    only_profile: Option<&ProfileId>,
    page: &Page,
) -> Result<List<api_key::Model>, PageError> {
    let mut select = merchant_keys(merchant_id, mode);
    if let Some(p) = only_profile {
        select = select.filter(api_key::Column::ProfileId.eq(p.as_str()));
    }
    paginate(db, select.clone(), select, api_key::Column::Id, page).await
}

/// Which keys a revocation may reach: a merchant key's (its mode, and its shop if bound) or
/// the operator's (any key of the merchant).
pub struct Revoker<'a> {
    pub mode: Option<Mode>,
    pub only_profile: Option<&'a ProfileId>,
    /// The key that revokes; `None` for the operator.
    pub actor: Option<&'a KeyId>,
}

/// Revokes a key of this merchant that `by` may reach; revoking again changes nothing (and is
/// not audited again).
pub async fn revoke_key(
    db: &Db,
    now: DateTime<Utc>,
    merchant_id: &MerchantId,
    key_id: &KeyId,
    by: Revoker<'_>,
) -> Result<Option<api_key::Model>, CommitError> {
    let mut select = api_key::Entity::find()
        .filter(api_key::Column::MerchantId.eq(merchant_id.as_str()))
        .filter(api_key::Column::Id.eq(key_id.as_str()));
    if let Some(mode) = by.mode {
        select = select.filter(api_key::Column::Mode.eq(mode.as_str()));
    }
    if let Some(p) = by.only_profile {
        select = select.filter(api_key::Column::ProfileId.eq(p.as_str()));
    }
    let Some(row) = select.clone().one(db).await? else {
        return Ok(None);
    };
    let revoke = api_key::Entity::update_many()
        .col_expr(api_key::Column::RevokedAt, Expr::value(Some(now)))
        .filter(api_key::Column::Id.eq(row.id.as_str()))
        .filter(api_key::Column::RevokedAt.is_null())
        .into_query();
    let audit = Audit {
        merchant_id: &row.merchant_id,
        actor: by.actor,
        action: Action::ApiKeyRevoked,
        target_id: &row.id,
        details: serde_json::json!({"kind": row.kind.as_str(), "mode": row.mode.as_str(), "last4": row.last4}),
    };
    // Only the revoke that revoked it is audited.
    let mut change = Change::at(now);
    change.optional.push(
        Change::at(now)
            .write(Write::Update(revoke))
            .write(audited(audit, now))
            .write(crate::lookups::bump()),
    );
    commit::commit(db, change).await?;
    Ok(select.one(db).await?)
}

/// Suspends (`true`) or reinstates a merchant, audited as the operator's; `None` for no such
/// merchant. Setting what is already set changes nothing and is not audited again.
pub async fn set_suspended(
    db: &Db,
    now: DateTime<Utc>,
    merchant_id: &MerchantId,
    suspended: bool,
) -> Result<Option<merchant::Model>, CommitError> {
    let id = merchant_id.as_str();
    if find_merchant(db, merchant_id).await?.is_none() {
        return Ok(None);
    }
    let column = merchant::Column::SuspendedAt;
    let (value, unchanged) = match suspended {
        true => (Some(now), column.is_null()),
        false => (None, column.is_not_null()),
    };
    let update = merchant::Entity::update_many()
        .col_expr(column, Expr::value(value))
        .filter(merchant::Column::Id.eq(id))
        .filter(unchanged)
        .into_query();
    let action = if suspended {
        Action::MerchantSuspended
    } else {
        Action::MerchantReinstated
    };
    let audit = Audit {
        merchant_id,
        actor: None,
        action,
        target_id: id,
        details: serde_json::json!({}),
    };
    let mut change = Change::at(now);
    change.optional.push(
        Change::at(now)
            .write(Write::Update(update))
            .write(audited(audit, now))
            .write(crate::lookups::bump()),
    );
    commit::commit(db, change).await?;
    Ok(find_merchant(db, merchant_id).await?)
}

/// How many unrevoked keys were hashed under each pepper (`None`: made before payd recorded
/// it), most first.
pub async fn keys_by_pepper(
    db: &impl ConnectionTrait,
) -> Result<Vec<(Option<String>, i64)>, DbErr> {
    let mut counts: Vec<(Option<String>, i64)> = api_key::Entity::find()
        .filter(api_key::Column::RevokedAt.is_null())
        .select_only()
        .column(api_key::Column::PepperId)
        .column_as(api_key::Column::Id.count(), "keys")
        .group_by(api_key::Column::PepperId)
        .into_tuple()
        .all(db)
        .await?;
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    Ok(counts)
}

/// Records `pepper` on the keys made before payd recorded peppers. Run at start-up only when
/// no previous pepper is configured: every key that still authenticates was then hashed under
/// this one.
pub async fn record_pepper(db: &impl ConnectionTrait, pepper: &str) -> Result<u64, DbErr> {
    let done = api_key::Entity::update_many()
        .col_expr(api_key::Column::PepperId, Expr::value(pepper_id(pepper)))
        .filter(api_key::Column::PepperId.is_null())
        .exec(db)
        .await?;
    Ok(done.rows_affected)
}
