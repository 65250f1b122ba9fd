//! Read queries of refunds, and the one write that is not the payment actor's: reason and
//! metadata, which move no money (compare-and-set on the refund's version).

use chrono::{DateTime, Utc};
use payd_entity::refund;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter,
    QueryTrait,
};

use super::api::ListRefundsRequest;
use crate::commit::Db;
use crate::fields::Metadata;
use crate::stored::Json;
use crate::{
    commit::{self, Change, CommitError, Write},
    pagination::{created_between, paginate, List, Page, PageError},
};

/// The refunds of `merchant_id` in this mode, of shop `profile_id` if one is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListRefundsRequest,
    page: &Page,
) -> Result<List<refund::Model>, PageError> {
    let mut q = refund::Entity::find()
        .filter(refund::Column::MerchantId.eq(merchant_id))
        .filter(refund::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(refund::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(p) = &f.payment_id {
        q = q.filter(refund::Column::PaymentId.eq(p.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(refund::Column::Status.eq(s.as_str()));
    }
    if let Some(c) = &f.currency {
        q = q.filter(refund::Column::Currency.eq(c.as_str()));
    }
    if let Some(a) = f.amount_gte {
        q = q.filter(refund::Column::Amount.gte(a));
    }
    if let Some(a) = f.amount_lte {
        q = q.filter(refund::Column::Amount.lte(a));
    }
    q = created_between(
        q,
        refund::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, refund::Column::Id, page).await
}

/// Sets reason and metadata under the refund's compare-and-set.
pub async fn update_details(
    db: &Db,
    current: &refund::Model,
    reason: Option<String>,
    metadata: Option<Metadata>,
    now: DateTime<Utc>,
) -> Result<refund::Model, CommitError> {
    let mut next = current.clone();
    if let Some(r) = reason {
        next.reason = Some(r);
    }
    if let Some(m) = metadata {
        next.metadata = Json(m);
    }
    next.version = current.version + 1;
    next.updated_at = now;
    let cas = Write::Cas(
        refund::Entity::update_many()
            .set(next.clone().into_active_model().reset_all())
            .filter(refund::Column::Id.eq(current.id.as_str()))
            .filter(refund::Column::Version.eq(current.version))
            .into_query(),
    );
    commit::commit(db, Change::at(now).write(cas)).await?;
    Ok(next)
}
