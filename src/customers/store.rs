//! Persistence of customers, saved methods and mandates. Mandates and customers change under
//! a compare-and-set on their version, so a revoke and a charge (or a delete) cannot both win.

use chrono::{DateTime, Utc};
use payd_entity::{customer, mandate, payment_method, processor_account};
use payd_model::mandates::{Kind as MandateKind, Status as MandateStatus};
use sea_orm::{
    sea_query::{Expr, ExprTrait, Func, OnConflict, Query, SelectStatement},
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};

use super::api::{CustomerFields, ListCustomersQuery, ListMandatesQuery};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    commit::{self, Change, CommitError, Event, Job, Write},
    conflict::Conflict,
    ids::{CustomerId, MandateId, MerchantId, PaymentMethodId, ProfileId},
    pagination::{created_between, paginate, List, Page, PageError},
    processors::{card::StoredCard, connect::Connections},
    recovery::RequestKey,
    webhooks::retention,
};

/// Inserts a customer (and, for a request with an `Idempotency-Key`, names it the key's
/// recovery point in the same transaction).
pub async fn insert(
    db: &Db,
    merchant_id: &MerchantId,
    test_mode: bool,
    f: &CustomerFields,
    now: DateTime<Utc>,
    key: Option<&RequestKey>,
) -> Result<customer::Model, CommitError> {
    let c = customer::Model {
        id: CustomerId::new(),
        merchant_id: merchant_id.clone(),
        test_mode,
        name: f.name.clone(),
        email: f.email.clone(),
        phone: f.phone.clone(),
        description: f.description.clone(),
        address: f.address.clone().map(Json),
        metadata: Json(f.metadata.clone().unwrap_or_default()),
        default_payment_method_id: None,
        redacted_at: None,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let mut change = Change::at(now).write(commit::insert(c.clone()));
    if let Some(key) = key {
        change = change.write(key.bind(&c.id));
    }
    commit::commit(db, change).await?;
    Ok(c)
}

pub async fn replace(
    db: &Db,
    before: &customer::Model,
    after: customer::Model,
) -> Result<customer::Model, CommitError> {
    let (change, after) = replacement(before, after);
    commit::commit(db, change).await?;
    Ok(after)
}

/// The compare-and-set update of a changed customer.
fn replacement(before: &customer::Model, mut after: customer::Model) -> (Change, customer::Model) {
    after.version = before.version + 1;
    let write = Write::Cas(
        customer::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(customer::Column::Id.eq(before.id.as_str()))
            .filter(customer::Column::Version.eq(before.version))
            .into_query(),
    );
    (Change::at(after.updated_at).write(write), after)
}

/// Redacts a customer and deletes its saved methods, unless a mandate is live (refused as
/// `active_mandate`). Returns the customer and the ids of the methods deleted.
pub async fn redact(
    db: &Db,
    before: &customer::Model,
    after: customer::Model,
) -> Result<(customer::Model, Vec<payment_method::Model>), CommitError> {
    let deleted = methods(db, &before.id).await?;
    // Each card is detached at its processor after the commit: one that does not decode
    // refuses the deletion (500) before anything is forgotten (`methods` reads every card).
    let live_mandate = mandate::Entity::find()
        .select_only()
        .column(mandate::Column::Id)
        .filter(mandate::Column::CustomerId.eq(before.id.as_str()))
        .filter(mandate::Column::Status.is_in([MandateStatus::Pending, MandateStatus::Active]))
        .into_query();
    let (replace, after) = replacement(before, after);
    let mut change = Change::at(after.updated_at)
        .write(Write::Require {
            query: live_mandate,
            exists: false,
            refusal: Conflict::ActiveMandate,
        })
        .write(Write::Delete(
            payment_method::Entity::delete_many()
                .filter(payment_method::Column::CustomerId.eq(before.id.as_str()))
                .into_query(),
        ))
        .and(replace);
    // What its events and their attempts hold of it goes with it.
    let personal = personal(before);
    let stored =
        retention::redaction_writes(db, &before.merchant_id, &before.id, &personal).await?;
    for w in stored {
        change = change.write(Write::Update(w));
    }
    commit::commit(db, change).await?;
    Ok((after, deleted))
}

/// The values of a customer's personal fields: name, email, phone and the lines of its
/// address (a customer whose address does not decode is not read at all: the redaction
/// could not know what to take out of the stored events).
fn personal(c: &customer::Model) -> Vec<String> {
    let lines = c.address.clone().into_iter().flat_map(|a| {
        [
            a.0.line1,
            a.0.line2,
            a.0.city,
            a.0.postal_code,
            a.0.state,
            a.0.country,
        ]
    });
    [c.name.clone(), c.email.clone(), c.phone.clone()]
        .into_iter()
        .chain(lines)
        .flatten()
        .filter(|v| !v.trim().is_empty())
        .collect()
}

pub fn apply(c: &customer::Model, f: &CustomerFields, now: DateTime<Utc>) -> customer::Model {
    let mut next = c.clone();
    if f.name.is_some() {
        next.name = f.name.clone();
    }
    if f.email.is_some() {
        next.email = f.email.clone();
    }
    if f.phone.is_some() {
        next.phone = f.phone.clone();
    }
    if f.description.is_some() {
        next.description = f.description.clone();
    }
    if let Some(a) = &f.address {
        next.address = Some(Json(a.clone()));
    }
    if let Some(md) = &f.metadata {
        next.metadata = Json(md.clone());
    }
    next.updated_at = now;
    next
}

pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    q: &ListCustomersQuery,
    page: &Page,
) -> Result<List<customer::Model>, PageError> {
    let mut s = customer::Entity::find()
        .filter(customer::Column::MerchantId.eq(merchant_id))
        .filter(customer::Column::TestMode.eq(test_mode));
    let visible = s.clone();
    if let Some(e) = &q.email {
        // Addresses are compared without regard to case, as mail systems do.
        s = s.filter(
            Expr::expr(Func::lower(Expr::col(customer::Column::Email))).eq(e.to_lowercase()),
        );
    }
    s = created_between(
        s,
        customer::Column::CreatedAt,
        q.created_after,
        q.created_before,
    );
    paginate(db, visible, s, customer::Column::Id, page).await
}

pub async fn methods(
    db: &impl ConnectionTrait,
    customer_id: &str,
) -> Result<Vec<payment_method::Model>, DbErr> {
    payment_method::Entity::find()
        .filter(payment_method::Column::CustomerId.eq(customer_id))
        .order_by_desc(payment_method::Column::Id)
        .all(db)
        .await
}

/// The customer's customer at a processor account that keeps cards (Stripe): the one its
/// cards saved there are filed under, so that every card of one customer is under one.
pub async fn processor_customer(
    db: &impl ConnectionTrait,
    customer_id: &str,
    account_id: &str,
) -> Result<Option<String>, DbErr> {
    for pm in methods(db, customer_id).await? {
        if let Some(customer) = pm
            .card
            .token_at(account_id)
            .and_then(|t| t.customer.clone())
        {
            return Ok(Some(customer));
        }
    }
    Ok(None)
}

pub async fn find_method(
    db: &impl ConnectionTrait,
    id: &PaymentMethodId,
) -> Result<Option<payment_method::Model>, DbErr> {
    payment_method::Entity::find_by_id(id.clone()).one(db).await
}

/// Deletes a saved method and clears it as its customer's default. The mandates that charge it
/// (`pending` or `active`) are revoked in the same commit, each with its `mandate_revoked`
/// event: the buyer asked for the card to be forgotten, so nothing can be charged on it any
/// more.
pub async fn delete_method(
    db: &Db,
    pm: &payment_method::Model,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let charging = mandate::Entity::find()
        .filter(mandate::Column::PaymentMethodId.eq(pm.id.as_str()))
        .filter(mandate::Column::Status.is_in(["pending", "active"]))
        .all(db)
        .await?;
    let revoked = charging.iter().fold(Change::at(now), |change, m| {
        let (revoke, after) = set_mandate_status(m, MandateStatus::Revoked, now);
        change
            .and(revoke)
            .event(mandate_event(&after, "mandate_revoked"))
    });
    let change = revoked
        .write(Write::Delete(
            payment_method::Entity::delete_by_id(pm.id.clone()).into_query(),
        ))
        .write(Write::Update(
            customer::Entity::update_many()
                .col_expr(
                    customer::Column::DefaultPaymentMethodId,
                    Expr::value(Option::<String>::None),
                )
                .col_expr(
                    customer::Column::Version,
                    Expr::col(customer::Column::Version).add(1),
                )
                .filter(customer::Column::Id.eq(pm.customer_id.as_str()))
                .filter(customer::Column::DefaultPaymentMethodId.eq(pm.id.as_str()))
                .into_query(),
        ));
    commit::commit(db, change).await.map(drop)
}

/// Detaches a deleted saved card from the processor that keeps it (Stripe), after payd has
/// forgotten it. A processor that cannot be reached now keeps it attached there, logged: payd
/// never charges it again either way.
pub async fn forget_at_processor(
    db: &impl ConnectionTrait,
    connections: &Connections,
    pm: &payment_method::Model,
) {
    let Some(token) = &pm.card.token else {
        return;
    };
    let account = processor_account::Entity::find_by_id(token.account.as_str())
        .one(db)
        .await
        .ok()
        .flatten();
    let Some(processor) = account.as_ref().and_then(|a| connections.resolve(Some(a))) else {
        return;
    };
    if let Err(e) = processor.forget(token).await {
        tracing::warn!(payment_method = %pm.id, account = %token.account, error = %e, "a deleted card could not be detached at its processor");
    }
}

/// The saved method of this card for the customer, if it is saved already.
pub async fn find_saved(
    db: &impl ConnectionTrait,
    customer_id: &str,
    fingerprint: &str,
) -> Result<Option<payment_method::Model>, DbErr> {
    payment_method::Entity::find()
        .filter(payment_method::Column::CustomerId.eq(customer_id))
        .filter(payment_method::Column::Fingerprint.eq(fingerprint))
        .one(db)
        .await
}

/// A mandate to create with a saved card.
pub struct NewMandate {
    pub id: MandateId,
    pub profile_id: ProfileId,
    pub single_use: bool,
    pub amount_limit: Option<i64>,
    pub currency: Option<String>,
    pub end_at: Option<DateTime<Utc>>,
}

/// Saves a card for a customer, once per fingerprint (`saved`: the method found for it),
/// makes it the default if the customer has none, and creates the mandate, active at once
/// (the sandbox processors confirm mandates immediately), with its `mandate_active` event and
/// expiry job. Each write finds its rows in the database, not in what was read: a customer
/// redacted meanwhile gets no card, no default and no mandate, and a card saved meanwhile by
/// another payment is the one used.
pub fn save_card(
    customer: &customer::Model,
    card: &StoredCard,
    saved: Option<payment_method::Model>,
    mandate: Option<NewMandate>,
    now: DateTime<Utc>,
) -> Change {
    let saved_id = |c: &customer::Model| {
        Query::select()
            .column(payment_method::Column::Id)
            .from(payment_method::Entity)
            .and_where(payment_method::Column::CustomerId.eq(c.id.as_str()))
            .and_where(payment_method::Column::Fingerprint.eq(card.fingerprint.as_str()))
            .to_owned()
    };
    let pm_id = saved.map_or_else(PaymentMethodId::new, |pm| pm.id);
    let mut insert = Query::insert();
    insert
        .into_table(payment_method::Entity)
        .columns([
            payment_method::Column::Id,
            payment_method::Column::CustomerId,
            payment_method::Column::MerchantId,
            payment_method::Column::TestMode,
            payment_method::Column::Card,
            payment_method::Column::Fingerprint,
            payment_method::Column::CreatedAt,
        ])
        .on_conflict(
            OnConflict::columns([
                payment_method::Column::CustomerId,
                payment_method::Column::Fingerprint,
            ])
            .do_nothing()
            .to_owned(),
        );
    let values = Query::select()
        .exprs([
            Expr::val(pm_id.as_str()),
            Expr::val(customer.id.as_str()),
            Expr::val(customer.merchant_id.as_str()),
            Expr::val(customer.test_mode),
            Expr::val(Json(card.clone())),
            Expr::val(card.fingerprint.as_str()),
            Expr::val(now),
        ])
        .from(customer::Entity)
        .and_where(customer::Column::Id.eq(customer.id.as_str()))
        .and_where(customer::Column::RedactedAt.is_null())
        .to_owned();
    // Seven columns, seven values: `select_from` cannot fail here.
    let _ = insert.select_from(values);
    let default = customer::Entity::update_many()
        .col_expr(
            customer::Column::DefaultPaymentMethodId,
            Expr::SubQuery(None, Box::new(saved_id(customer).into())),
        )
        .col_expr(
            customer::Column::Version,
            Expr::col(customer::Column::Version).add(1),
        )
        .filter(customer::Column::Id.eq(customer.id.as_str()))
        .filter(customer::Column::DefaultPaymentMethodId.is_null())
        .filter(customer::Column::RedactedAt.is_null())
        .into_query();
    let mut change = Change::at(now)
        .write(Write::Insert(insert))
        .write(Write::Update(default));
    if let Some(m) = mandate {
        change
            .optional
            .push(mandate_for(customer, &pm_id, saved_id(customer), m, now));
    }
    change
}

/// The mandate's insert takes the saved method's id from the database (none: no mandate),
/// then its event and expiry job.
fn mandate_for(
    customer: &customer::Model,
    pm_id: &PaymentMethodId,
    saved_id: SelectStatement,
    m: NewMandate,
    now: DateTime<Utc>,
) -> Change {
    let row = mandate::Model {
        id: m.id,
        customer_id: customer.id.clone(),
        merchant_id: customer.merchant_id.clone(),
        profile_id: m.profile_id,
        test_mode: customer.test_mode,
        payment_method_id: pm_id.clone(),
        mandate_type: if m.single_use {
            MandateKind::SingleUse
        } else {
            MandateKind::MultiUse
        },
        amount_limit: m.amount_limit,
        currency: m.currency,
        status: MandateStatus::Active,
        start_at: now,
        end_at: m.end_at,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let mut values = saved_id;
    values.clear_selects();
    values.exprs([
        Expr::val(row.id.as_str()),
        Expr::val(row.customer_id.as_str()),
        Expr::val(row.merchant_id.as_str()),
        Expr::val(row.profile_id.as_str()),
        Expr::val(row.test_mode),
        Expr::col(payment_method::Column::Id),
        Expr::val(row.mandate_type),
        Expr::val(row.amount_limit),
        Expr::val(row.currency.clone()),
        Expr::val(row.status),
        Expr::val(row.start_at),
        Expr::val(row.end_at),
        Expr::val(row.version),
        Expr::val(row.created_at),
        Expr::val(row.updated_at),
    ]);
    let mut insert = Query::insert();
    insert.into_table(mandate::Entity).columns([
        mandate::Column::Id,
        mandate::Column::CustomerId,
        mandate::Column::MerchantId,
        mandate::Column::ProfileId,
        mandate::Column::TestMode,
        mandate::Column::PaymentMethodId,
        mandate::Column::MandateType,
        mandate::Column::AmountLimit,
        mandate::Column::Currency,
        mandate::Column::Status,
        mandate::Column::StartAt,
        mandate::Column::EndAt,
        mandate::Column::Version,
        mandate::Column::CreatedAt,
        mandate::Column::UpdatedAt,
    ]);
    // Fifteen columns, fifteen values.
    let _ = insert.select_from(values);
    let mut change = Change::at(now)
        .write(Write::Insert(insert))
        .event(mandate_event(&row, "mandate_active"));
    if let Some(end) = row.end_at {
        change = change.job(Job::Schedule {
            kind: MANDATE_EXPIRY_JOB,
            entity_id: row.id.to_string(),
            at: end,
        });
    }
    change
}

/// Scheduled job: a mandate with an end date becomes `inactive` at it.
pub const MANDATE_EXPIRY_JOB: &str = "mandate_expiry";

pub async fn expire_mandate(db: &Db, id: &str, now: DateTime<Utc>) -> Result<bool, DbErr> {
    let found = match MandateId::parse(id) {
        Some(id) => find_mandate(db, &id).await?,
        None => None,
    };
    let Some(m) = found else {
        return Ok(true);
    };
    let live = matches!(m.status, MandateStatus::Pending | MandateStatus::Active);
    if !live || m.end_at.is_none_or(|end| end > now) {
        return Ok(true);
    }
    match commit::commit(db, set_mandate_status(&m, MandateStatus::Inactive, now).0).await {
        Ok(_) => Ok(true),
        Err(CommitError::LostRace) => Ok(false),
        // The change names no condition: a refusal would be a bug, failing the job.
        Err(CommitError::Refused(c)) => Err(DbErr::Custom(format!("mandate expiry refused: {c}"))),
        Err(CommitError::Db(e)) => Err(e),
    }
}

pub async fn find_mandate(
    db: &impl ConnectionTrait,
    id: &MandateId,
) -> Result<Option<mandate::Model>, DbErr> {
    mandate::Entity::find_by_id(id.clone()).one(db).await
}

pub fn set_mandate_status(
    m: &mandate::Model,
    status: MandateStatus,
    now: DateTime<Utc>,
) -> (Change, mandate::Model) {
    let write = Write::Cas(
        mandate::Entity::update_many()
            .col_expr(mandate::Column::Status, Expr::value(status))
            .col_expr(mandate::Column::Version, Expr::value(m.version + 1))
            .col_expr(mandate::Column::UpdatedAt, Expr::value(now))
            .filter(mandate::Column::Id.eq(m.id.as_str()))
            .filter(mandate::Column::Version.eq(m.version))
            .into_query(),
    );
    let after = mandate::Model {
        status,
        version: m.version + 1,
        updated_at: now,
        ..m.clone()
    };
    (Change::at(now).write(write), after)
}

/// Revokes a mandate (`mandate_revoked`); returns it and the deliveries queued.
pub async fn revoke_mandate(
    db: &Db,
    m: &mandate::Model,
    now: DateTime<Utc>,
) -> Result<(mandate::Model, usize), CommitError> {
    let (change, revoked) = set_mandate_status(m, MandateStatus::Revoked, now);
    let change = change.event(mandate_event(&revoked, "mandate_revoked"));
    let committed = commit::commit(db, change).await?;
    Ok((revoked, committed.deliveries))
}

pub async fn mandates(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    q: &ListMandatesQuery,
    page: &Page,
) -> Result<List<mandate::Model>, PageError> {
    let mut s = mandate::Entity::find()
        .filter(mandate::Column::MerchantId.eq(merchant_id))
        .filter(mandate::Column::TestMode.eq(test_mode));
    let visible = s.clone();
    if let Some(st) = &q.status {
        s = s.filter(mandate::Column::Status.eq(st.as_str()));
    }
    if let Some(c) = &q.customer_id {
        s = s.filter(mandate::Column::CustomerId.eq(c.as_str()));
    }
    paginate(db, visible, s, mandate::Column::Id, page).await
}

/// A `mandate_details` event.
pub fn mandate_event(m: &mandate::Model, event_type: &str) -> Event {
    Event {
        merchant_id: m.merchant_id.clone(),
        profile_id: Some(m.profile_id.clone()),
        test_mode: m.test_mode,
        event_type: event_type.to_owned(),
        object_id: m.id.to_string(),
        content_type: "mandate_details",
        object: serde_json::to_string(&super::api::Mandate::from(m)).unwrap_or_default(),
    }
}
