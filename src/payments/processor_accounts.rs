//! Persistence of a shop's processor accounts and routing rules: the accounts of a mode (read
//! with the rules in one query when a payment is routed), the operator's approval, an account's
//! sealed connection and its audit rows, and how far a Stripe account's events have been read.

use chrono::{DateTime, Utc};
use payd_entity::{processor_account, profile, routing_config};
use sea_orm::{
    sea_query::{Alias, Expr, ExprTrait, OnConflict, Order, Query},
    ActiveModelTrait,
    ActiveValue::Set,
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, IdenStatic, IntoActiveModel,
    Iterable, QueryFilter, QueryOrder, QueryTrait,
};

use super::routing::RoutingRules;
use crate::commit::{self, Change, CommitError, Db, Write};
use crate::stored::Json;
use crate::{
    accounts,
    ids::new_id,
    processors::connect::{AccountKind, Approval},
};

/// A processor account by its id.
pub async fn find_account(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<processor_account::Model>, DbErr> {
    processor_account::Entity::find_by_id(id).one(db).await
}

/// The shop's processor accounts of one mode, in creation order.
pub async fn accounts(
    db: &impl ConnectionTrait,
    profile_id: &str,
    test_mode: bool,
) -> Result<Vec<processor_account::Model>, DbErr> {
    processor_account::Entity::find()
        .filter(processor_account::Column::ProfileId.eq(profile_id))
        .filter(processor_account::Column::TestMode.eq(test_mode))
        .order_by_asc(processor_account::Column::Id)
        .all(db)
        .await
}

/// What routing a payment needs, in one read: the shop's processor accounts of the payment's
/// mode in creation order ([`accounts`]) and that mode's routing rules ([`routing_rules`]).
/// The shop's row anchors the query, so a shop without accounts or rules still answers one
/// row; `None` for no such shop.
pub async fn accounts_and_rules(
    db: &impl ConnectionTrait,
    profile_id: &str,
    test_mode: bool,
) -> Result<Option<(Vec<processor_account::Model>, RoutingRules)>, DbErr> {
    const ACCOUNT: &str = "account_";
    const RULES: &str = "routing_rules";
    let shop = (profile::Entity, profile::Column::Id);
    let mut query = Query::select();
    query
        .expr_as(
            Expr::col((routing_config::Entity, routing_config::Column::Rules)),
            Alias::new(RULES),
        )
        // Names the row in the read error of rules that do not decode: the shop.
        .expr_as(Expr::col(shop), Alias::new("id"))
        .from(profile::Entity)
        .left_join(
            routing_config::Entity,
            Expr::col((routing_config::Entity, routing_config::Column::ProfileId))
                .equals(shop)
                .and(
                    Expr::col((routing_config::Entity, routing_config::Column::TestMode))
                        .eq(test_mode),
                ),
        )
        .left_join(
            processor_account::Entity,
            Expr::col((
                processor_account::Entity,
                processor_account::Column::ProfileId,
            ))
            .equals(shop)
            .and(
                Expr::col((
                    processor_account::Entity,
                    processor_account::Column::TestMode,
                ))
                .eq(test_mode),
            ),
        )
        .and_where(Expr::col(shop).eq(profile_id))
        .order_by(
            (processor_account::Entity, processor_account::Column::Id),
            Order::Asc,
        );
    for column in processor_account::Column::iter() {
        query.expr_as(
            Expr::col((processor_account::Entity, column)),
            Alias::new(format!("{ACCOUNT}{}", column.as_str())),
        );
    }
    let rows = db.query_all(&query).await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let rules = first.try_get::<Option<Json<RoutingRules>>>("", RULES)?;
    let accounts = rows
        .iter()
        .map(|row| Option::<processor_account::Model>::from_query_result(row, ACCOUNT))
        .filter_map(Result::transpose)
        .collect::<Result<Vec<_>, DbErr>>()?;
    Ok(Some((accounts, rules.unwrap_or_default().0)))
}

/// Accounts in one approval state (`pending`, `approved`, `rejected`), oldest first.
pub async fn accounts_in(
    db: &impl ConnectionTrait,
    approval: Approval,
) -> Result<Vec<processor_account::Model>, DbErr> {
    processor_account::Entity::find()
        .filter(processor_account::Column::Approval.eq(approval))
        .order_by_asc(processor_account::Column::Id)
        .all(db)
        .await
}

/// The approved Stripe accounts, whose events the catch-up reads back.
pub async fn stripe_accounts(
    db: &impl ConnectionTrait,
) -> Result<Vec<processor_account::Model>, DbErr> {
    processor_account::Entity::find()
        .filter(processor_account::Column::Kind.eq(AccountKind::Stripe))
        .filter(processor_account::Column::Approval.eq(Approval::Approved))
        .order_by_asc(processor_account::Column::Id)
        .all(db)
        .await
}

/// Records how far an account's events have been read back (Unix seconds).
pub async fn set_events_read_until(
    db: &Db,
    id: &str,
    until: i64,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let read = processor_account::Entity::update_many()
        .col_expr(
            processor_account::Column::EventsReadUntil,
            Expr::value(until),
        )
        .filter(processor_account::Column::Id.eq(id))
        .into_query();
    commit::commit(db, Change::at(now).write(Write::Update(read)))
        .await
        .map(drop)
}

/// Sets an account's approval (`approved` or `rejected`: only an approved one is routed to
/// or heard from); `None` if there is no such account.
pub async fn decide_account(
    db: &Db,
    id: &str,
    approval: Approval,
    now: DateTime<Utc>,
) -> Result<Option<processor_account::Model>, CommitError> {
    let approve = processor_account::Entity::update_many()
        .col_expr(processor_account::Column::Approval, Expr::value(approval))
        .filter(processor_account::Column::Id.eq(id))
        .into_query();
    let change = Change::at(now)
        .write(Write::Update(approve))
        .write(crate::lookups::bump());
    commit::commit(db, change).await?;
    Ok(processor_account::Entity::find_by_id(id).one(db).await?)
}

/// Changes a processor account's connection settings (sealed) and whether it is enabled, with
/// its audit row (`processor_account.updated` by `actor`, naming what changed, never a
/// secret); the account as it now is.
pub async fn update_account(
    db: &Db,
    account: &processor_account::Model,
    changed: &[&str],
    now: DateTime<Utc>,
    actor: &crate::ids::KeyId,
) -> Result<Option<processor_account::Model>, CommitError> {
    let update = processor_account::Entity::update_many()
        .col_expr(
            processor_account::Column::Config,
            Expr::value(account.config.clone()),
        )
        .col_expr(
            processor_account::Column::Enabled,
            Expr::value(account.enabled),
        )
        .filter(processor_account::Column::Id.eq(account.id.as_str()))
        .into_query();
    let audit = accounts::store::Audit {
        merchant_id: &account.merchant_id,
        actor: Some(actor),
        action: accounts::store::Action::ProcessorAccountUpdated,
        target_id: &account.id,
        details: serde_json::json!({"profile_id": account.profile_id, "changed": changed,
            "enabled": account.enabled, "test_mode": account.test_mode}),
    };
    let change = Change::at(now)
        .write(Write::Update(update))
        .write(accounts::store::audited(audit, now))
        .write(crate::lookups::bump());
    commit::commit(db, change).await?;
    Ok(processor_account::Entity::find_by_id(account.id.as_str())
        .one(db)
        .await?)
}

/// Adds a processor account, with its audit row (`processor_account.added` by `actor`);
/// `None` when the shop has one of that name. `config` is the sealed JSON of a remote or
/// Stripe account's connection.
#[allow(clippy::too_many_arguments)]
pub async fn insert_account(
    db: &Db,
    merchant_id: &crate::ids::MerchantId,
    profile_id: &crate::ids::ProfileId,
    name: &str,
    kind: AccountKind,
    config: Option<String>,
    approval: Approval,
    test_mode: bool,
    now: DateTime<Utc>,
    actor: &crate::ids::KeyId,
) -> Result<Option<processor_account::Model>, CommitError> {
    let row = processor_account::Model {
        id: new_id("proc"),
        merchant_id: merchant_id.clone(),
        profile_id: profile_id.clone(),
        name: name.to_owned(),
        kind,
        enabled: true,
        config,
        approval,
        created_at: now,
        test_mode,
        events_read_until: None,
    };
    let unique = OnConflict::columns([
        processor_account::Column::ProfileId,
        processor_account::Column::Name,
    ])
    .do_nothing()
    .to_owned();
    let insert = processor_account::Entity::insert(row.clone().into_active_model().reset_all())
        .on_conflict(unique)
        .into_query();
    let audit = accounts::store::Audit {
        merchant_id,
        actor: Some(actor),
        action: accounts::store::Action::ProcessorAccountAdded,
        target_id: &row.id,
        details: serde_json::json!({"profile_id": profile_id, "name": name, "kind": row.kind,
            "approval": approval, "test_mode": test_mode}),
    };
    // Only an account that was added is audited.
    let mut change = Change::at(now);
    change.optional.push(
        Change::at(now)
            .write(Write::Insert(insert))
            .write(accounts::store::audited(audit, now))
            .write(crate::lookups::bump()),
    );
    commit::commit(db, change).await?;
    let stored = processor_account::Entity::find()
        .filter(processor_account::Column::ProfileId.eq(profile_id))
        .filter(processor_account::Column::Name.eq(name))
        .one(db)
        .await?;
    Ok(stored.filter(|s| s.id == row.id))
}

/// The shop's routing rules of one mode.
pub async fn routing_rules(
    db: &impl ConnectionTrait,
    profile_id: &str,
    test_mode: bool,
) -> Result<RoutingRules, DbErr> {
    let row = routing_config::Entity::find_by_id((profile_id.to_owned(), test_mode))
        .one(db)
        .await?;
    // A shop without stored rules routes by default.
    Ok(row.map(|r| r.rules.0).unwrap_or_default())
}

/// Puts the shop's routing rules, and tells the instances that cache them.
pub async fn put_routing_rules(
    db: &Db,
    profile_id: &str,
    test_mode: bool,
    rules: &RoutingRules,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let row = routing_config::ActiveModel {
        profile_id: Set(profile_id.to_owned()),
        test_mode: Set(test_mode),
        rules: Set(Json(rules.clone())),
        updated_at: Set(now),
    };
    let upsert = routing_config::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([
                routing_config::Column::ProfileId,
                routing_config::Column::TestMode,
            ])
            .update_columns([
                routing_config::Column::Rules,
                routing_config::Column::UpdatedAt,
            ])
            .to_owned(),
        )
        .into_query();
    let change = Change::at(now)
        .write(Write::Insert(upsert))
        .write(crate::lookups::bump());
    commit::commit(db, change).await?;
    Ok(())
}
