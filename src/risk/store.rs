//! Persistence of risk assessments: the counts over a window, each shop's chain of
//! assessments, and the commit of a new one with its escalation event.

use chrono::{DateTime, Utc};
use payd_entity::{dispute, payment, payment_attempt, profile, refund, risk_assessment};
use sea_orm::{
    sea_query::OnConflict, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};

use super::{api::RiskRecord, machine::Counts};
use crate::{
    commit::{Change, Event, Write},
    pagination::{paginate, List, Page, PageError},
};

/// Scheduled job: assesses every shop, then runs again after `risk.assess_every`.
pub const ASSESS_JOB: &str = "risk_assess";

/// The event of a band that rose.
pub const ESCALATED: &str = "shop_risk_band_escalated";

/// What the shop did in this mode since `since`, over the payments created since then: their
/// attempts the processor declined (each confirm is an attempt, so a payment declined three
/// times is three declines, whether it ended `declined` or `failed`), the payments authorized,
/// refunds not failed and disputes opened. The volume is authorized payments plus declined
/// attempts, so no rate exceeds 1.
pub async fn counts(
    db: &impl ConnectionTrait,
    shop: &str,
    test_mode: bool,
    since: DateTime<Utc>,
) -> Result<Counts, DbErr> {
    let payments = || {
        payment::Entity::find()
            .filter(payment::Column::ProfileId.eq(shop))
            .filter(payment::Column::TestMode.eq(test_mode))
            .filter(payment::Column::CreatedAt.gte(since))
    };
    let declines = payment_attempt::Entity::find()
        .filter(payment_attempt::Column::Status.eq(payd_model::payments::AttemptStatus::Declined))
        .filter(
            payment_attempt::Column::PaymentId.in_subquery(
                payments()
                    .select_only()
                    .column(payment::Column::Id)
                    .into_query(),
            ),
        )
        .count(db)
        .await? as i64;
    let authorized = payments()
        .filter(payment::Column::AmountAuthorized.gt(0))
        .filter(payment::Column::Status.ne(payd_model::payments::Status::Failed))
        .count(db)
        .await? as i64;
    let refunds = refund::Entity::find()
        .filter(refund::Column::ProfileId.eq(shop))
        .filter(refund::Column::TestMode.eq(test_mode))
        .filter(refund::Column::CreatedAt.gte(since))
        .filter(refund::Column::Status.ne(payd_model::refunds::Status::Failed))
        .count(db)
        .await? as i64;
    let disputes = dispute::Entity::find()
        .filter(dispute::Column::ProfileId.eq(shop))
        .filter(dispute::Column::TestMode.eq(test_mode))
        .filter(dispute::Column::CreatedAt.gte(since))
        .count(db)
        .await? as i64;
    Ok(Counts {
        payments: authorized + declines,
        declines,
        refunds,
        disputes,
    })
}

/// The shop's latest assessment in this mode.
pub async fn latest(
    db: &impl ConnectionTrait,
    shop: &str,
    test_mode: bool,
) -> Result<Option<risk_assessment::Model>, DbErr> {
    risk_assessment::Entity::find()
        .filter(risk_assessment::Column::ProfileId.eq(shop))
        .filter(risk_assessment::Column::TestMode.eq(test_mode))
        .order_by_desc(risk_assessment::Column::Seq)
        .one(db)
        .await
}

/// The shop's assessments in this mode, newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    shop: &str,
    test_mode: bool,
    page: &Page,
) -> Result<List<risk_assessment::Model>, PageError> {
    let q = risk_assessment::Entity::find()
        .filter(risk_assessment::Column::ProfileId.eq(shop))
        .filter(risk_assessment::Column::TestMode.eq(test_mode));
    paginate(db, q.clone(), q, risk_assessment::Column::Id, page).await
}

/// Up to `limit` shops after `after` (by id), with their merchants: the scheduled job's pages.
pub async fn shops_after(
    db: &impl ConnectionTrait,
    after: Option<&str>,
    limit: u64,
) -> Result<Vec<profile::Model>, DbErr> {
    let mut q = profile::Entity::find().order_by_asc(profile::Column::Id);
    if let Some(after) = after {
        q = q.filter(profile::Column::Id.gt(after));
    }
    q.limit(limit).all(db).await
}

/// True when the shop has had any payment in this mode, or an assessment: a mode it never used
/// is not assessed by the schedule.
pub async fn in_use(db: &impl ConnectionTrait, shop: &str, test_mode: bool) -> Result<bool, DbErr> {
    let paid = payment::Entity::find()
        .filter(payment::Column::ProfileId.eq(shop))
        .filter(payment::Column::TestMode.eq(test_mode))
        .one(db)
        .await?
        .is_some();
    Ok(paid || latest(db, shop, test_mode).await?.is_some())
}

/// The commit of a new assessment: its row, numbered after the shop's latest (another writer
/// that numbered first makes it a lost race), and its event when the band rose.
pub fn record(row: &risk_assessment::Model, escalated: bool) -> Change {
    let insert = risk_assessment::Entity::insert(row.clone().into_active_model())
        .on_conflict(
            OnConflict::columns([
                risk_assessment::Column::ProfileId,
                risk_assessment::Column::TestMode,
                risk_assessment::Column::Seq,
            ])
            .do_nothing()
            .to_owned(),
        )
        .into_query();
    let mut change = Change::at(row.assessed_at).write(Write::InsertNew(insert));
    if escalated {
        change = change.event(Event {
            merchant_id: row.merchant_id.clone(),
            profile_id: Some(row.profile_id.clone()),
            test_mode: row.test_mode,
            event_type: ESCALATED.to_owned(),
            object_id: row.profile_id.to_string(),
            content_type: "shop_risk_details",
            object: serde_json::to_string(&RiskRecord::render(row))
                .unwrap_or_else(|_| "{}".to_owned()),
        });
    }
    change
}

/// A shop by id, whoever's it is (the operator's routes).
pub async fn shop(
    db: &impl ConnectionTrait,
    id: &crate::ids::ProfileId,
) -> Result<Option<profile::Model>, DbErr> {
    profile::Entity::find_by_id(id.clone()).one(db).await
}
