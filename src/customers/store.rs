//! Persistence of customers, saved methods and mandates. Mandates and customers change under
//! a compare-and-set on their version, so a revoke and a charge (or a delete) cannot both win.

use chrono::{DateTime, Utc};
use payd_entity::{customer, mandate, payment_method};
use sea_orm::{
    sea_query::{Expr, ExprTrait},
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder,
};

use super::api::{CustomerFields, ListCustomersQuery, ListMandatesQuery};
use crate::{
    events::outbox::{self, NewEvent},
    ids::new_id,
    pagination::{paginate, List, Page},
    processors::StoredCard,
    scheduler,
};

pub async fn insert(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    f: &CustomerFields,
    now: DateTime<Utc>,
) -> Result<customer::Model, DbErr> {
    let c = customer::Model {
        id: new_id("cus"),
        merchant_id: merchant_id.to_owned(),
        test_mode,
        name: f.name.clone(),
        email: f.email.clone(),
        phone: f.phone.clone(),
        description: f.description.clone(),
        address: f
            .address
            .as_ref()
            .and_then(|a| serde_json::to_string(a).ok()),
        metadata: serde_json::to_string(&f.metadata.clone().unwrap_or_default())
            .unwrap_or_else(|_| "{}".into()),
        default_payment_method_id: None,
        redacted_at: None,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    c.clone().into_active_model().reset_all().insert(db).await?;
    Ok(c)
}

/// A customer of this merchant and mode; `None` for anyone else's.
pub async fn find_owned(
    db: &impl ConnectionTrait,
    id: &str,
    merchant_id: &str,
    test_mode: bool,
) -> Result<Option<customer::Model>, DbErr> {
    Ok(customer::Entity::find_by_id(id)
        .one(db)
        .await?
        .filter(|c| c.merchant_id == merchant_id && c.test_mode == test_mode))
}

/// Writes a changed customer if nobody wrote since (`false` when someone did).
pub async fn replace(
    db: &impl ConnectionTrait,
    before: &customer::Model,
    mut after: customer::Model,
) -> Result<Option<customer::Model>, DbErr> {
    after.version = before.version + 1;
    let res = customer::Entity::update_many()
        .set(after.clone().into_active_model().reset_all())
        .filter(customer::Column::Id.eq(before.id.as_str()))
        .filter(customer::Column::Version.eq(before.version))
        .exec(db)
        .await?;
    Ok((res.rows_affected == 1).then_some(after))
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
        next.address = serde_json::to_string(a).ok();
    }
    if let Some(md) = &f.metadata {
        next.metadata = serde_json::to_string(md).unwrap_or_else(|_| "{}".into());
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
) -> Result<List<customer::Model>, DbErr> {
    let mut s = customer::Entity::find()
        .filter(customer::Column::MerchantId.eq(merchant_id))
        .filter(customer::Column::TestMode.eq(test_mode));
    if let Some(e) = &q.email {
        s = s.filter(customer::Column::Email.eq(e.as_str()));
    }
    if let Some(t) = q.created_after {
        s = s.filter(customer::Column::CreatedAt.gt(t));
    }
    if let Some(t) = q.created_before {
        s = s.filter(customer::Column::CreatedAt.lt(t));
    }
    paginate(db, s, customer::Column::Id, page).await
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

pub async fn find_method(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<payment_method::Model>, DbErr> {
    payment_method::Entity::find_by_id(id).one(db).await
}

pub async fn delete_method(
    db: &impl ConnectionTrait,
    pm: &payment_method::Model,
) -> Result<(), DbErr> {
    payment_method::Entity::delete_by_id(pm.id.as_str())
        .exec(db)
        .await?;
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
        .exec(db)
        .await?;
    Ok(())
}

/// Saves a card for a customer, once per fingerprint, and makes it the default if the
/// customer has none. Returns the saved method (new or existing).
pub async fn save_card(
    db: &impl ConnectionTrait,
    customer: &customer::Model,
    card: &StoredCard,
    now: DateTime<Utc>,
) -> Result<payment_method::Model, DbErr> {
    let row = payment_method::Model {
        id: new_id("pm"),
        customer_id: customer.id.clone(),
        merchant_id: customer.merchant_id.clone(),
        test_mode: customer.test_mode,
        card: serde_json::to_string(card).unwrap_or_default(),
        fingerprint: card.fingerprint.clone(),
        created_at: now,
    };
    payment_method::Entity::insert(row.into_active_model().reset_all())
        .on_conflict_do_nothing_on([
            payment_method::Column::CustomerId,
            payment_method::Column::Fingerprint,
        ])
        .exec_without_returning(db)
        .await?;
    let saved = payment_method::Entity::find()
        .filter(payment_method::Column::CustomerId.eq(customer.id.as_str()))
        .filter(payment_method::Column::Fingerprint.eq(card.fingerprint.as_str()))
        .one(db)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("saved payment method".into()))?;
    customer::Entity::update_many()
        .col_expr(
            customer::Column::DefaultPaymentMethodId,
            Expr::value(saved.id.clone()),
        )
        .col_expr(
            customer::Column::Version,
            Expr::col(customer::Column::Version).add(1),
        )
        .filter(customer::Column::Id.eq(customer.id.as_str()))
        .filter(customer::Column::DefaultPaymentMethodId.is_null())
        .exec(db)
        .await?;
    Ok(saved)
}

/// A new mandate, active at once (the sandbox processors confirm mandates immediately).
#[allow(clippy::too_many_arguments)]
pub async fn insert_mandate(
    db: &impl ConnectionTrait,
    id: &str,
    profile_id: &str,
    customer: &customer::Model,
    payment_method_id: &str,
    single_use: bool,
    amount_limit: Option<i64>,
    currency: Option<String>,
    end_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<mandate::Model, DbErr> {
    let m = mandate::Model {
        id: id.to_owned(),
        customer_id: customer.id.clone(),
        merchant_id: customer.merchant_id.clone(),
        profile_id: profile_id.to_owned(),
        test_mode: customer.test_mode,
        payment_method_id: payment_method_id.to_owned(),
        mandate_type: if single_use {
            "single_use"
        } else {
            "multi_use"
        }
        .to_owned(),
        amount_limit,
        currency,
        status: "active".to_owned(),
        start_at: now,
        end_at,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    m.clone().into_active_model().reset_all().insert(db).await?;
    if let Some(end) = end_at {
        scheduler::schedule(
            db,
            now,
            MANDATE_EXPIRY_JOB,
            &m.id,
            end,
            serde_json::Value::Null,
        )
        .await?;
    }
    Ok(m)
}

/// Scheduled job: a mandate with an end date becomes `inactive` at it.
pub const MANDATE_EXPIRY_JOB: &str = "mandate_expiry";

/// Ends a mandate whose end date has come (a revoked one stays revoked). `false` when the
/// mandate changed meanwhile (the job tries again).
pub async fn expire_mandate(
    db: &impl ConnectionTrait,
    id: &str,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let Some(m) = find_mandate(db, id).await? else {
        return Ok(true);
    };
    if !matches!(m.status.as_str(), "pending" | "active") || m.end_at.is_none_or(|end| end > now) {
        return Ok(true);
    }
    Ok(set_mandate_status(db, &m, "inactive", now).await?.is_some())
}

pub async fn find_mandate(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<mandate::Model>, DbErr> {
    mandate::Entity::find_by_id(id).one(db).await
}

/// Moves a mandate to `status` if nobody changed it since it was read.
pub async fn set_mandate_status(
    db: &impl ConnectionTrait,
    m: &mandate::Model,
    status: &str,
    now: DateTime<Utc>,
) -> Result<Option<mandate::Model>, DbErr> {
    let res = mandate::Entity::update_many()
        .col_expr(mandate::Column::Status, Expr::value(status))
        .col_expr(mandate::Column::Version, Expr::value(m.version + 1))
        .col_expr(mandate::Column::UpdatedAt, Expr::value(now))
        .filter(mandate::Column::Id.eq(m.id.as_str()))
        .filter(mandate::Column::Version.eq(m.version))
        .exec(db)
        .await?;
    Ok((res.rows_affected == 1).then(|| mandate::Model {
        status: status.to_owned(),
        version: m.version + 1,
        updated_at: now,
        ..m.clone()
    }))
}

pub async fn mandates(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    q: &ListMandatesQuery,
    page: &Page,
) -> Result<List<mandate::Model>, DbErr> {
    let mut s = mandate::Entity::find()
        .filter(mandate::Column::MerchantId.eq(merchant_id))
        .filter(mandate::Column::TestMode.eq(test_mode));
    if let Some(st) = &q.status {
        s = s.filter(mandate::Column::Status.eq(st.as_str()));
    }
    if let Some(c) = &q.customer_id {
        s = s.filter(mandate::Column::CustomerId.eq(c.as_str()));
    }
    paginate(db, s, mandate::Column::Id, page).await
}

pub async fn has_live_mandate(db: &impl ConnectionTrait, customer_id: &str) -> Result<bool, DbErr> {
    Ok(mandate::Entity::find()
        .filter(mandate::Column::CustomerId.eq(customer_id))
        .filter(mandate::Column::Status.is_in(["pending", "active"]))
        .one(db)
        .await?
        .is_some())
}

pub async fn delete_methods(
    db: &impl ConnectionTrait,
    customer_id: &str,
) -> Result<Vec<String>, DbErr> {
    let ids: Vec<String> = methods(db, customer_id)
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect();
    payment_method::Entity::delete_many()
        .filter(payment_method::Column::CustomerId.eq(customer_id))
        .exec(db)
        .await?;
    Ok(ids)
}

/// Records a `mandate_details` event (in the caller's transaction); returns the deliveries
/// queued.
pub async fn record_mandate_event(
    db: &impl ConnectionTrait,
    m: &payd_entity::mandate::Model,
    event_type: &str,
    now: DateTime<Utc>,
) -> Result<usize, DbErr> {
    outbox::record(
        db,
        NewEvent {
            merchant_id: &m.merchant_id,
            profile_id: Some(&m.profile_id),
            test_mode: m.test_mode,
            event_type,
            object_id: &m.id,
            content_type: "mandate_details",
            object: serde_json::to_string(&super::api::Mandate::from(m)).unwrap_or_default(),
        },
        now,
    )
    .await
}
