//! The sandbox billing processor: a billing engine outside payd (think Chargebee or Recurly)
//! whose subscriptions payd adopts and then bills through. It keeps its own records — its
//! subscriptions (`bsub_…`) and the invoices it collected (`binv_…`) — and offers its plans
//! and add-ons, collection of a cycle under the collector's key (once per key), the status
//! changes payd forwards, and the sandbox's triggers (a subscription made at the processor, a
//! change made there, a chargeback).

use chrono::{DateTime, Utc};
use payd_entity::{billing_invoice, billing_subscription};
use payd_model::subscriptions::{ProcessorInvoiceStatus, ProcessorStatus};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QueryTrait,
};

use super::plans::PlanItem;
use crate::commit::Db;
use crate::{
    auth::keys::Scope,
    commit::{self, Change, CommitError, Write},
    ids::{new_id, ProcessorInvoiceId, ProcessorSubscriptionId, ProfileId},
};

/// A change made at the processor: by the sandbox's trigger (as if in the processor's own
/// dashboard), or forwarded by payd (pause, resume, cancel).
#[derive(Debug, Clone, Default)]
pub struct ProcessorChange {
    pub status: Option<ProcessorStatus>,
    pub plan_id: Option<String>,
    pub quantity: Option<i64>,
    pub declines: Option<bool>,
}

/// A subscription to make at the processor (checked by the caller).
pub struct NewSubscription {
    pub customer_name: String,
    pub customer_email: Option<String>,
    pub plan: &'static PlanItem,
    pub quantity: i64,
    /// Its card declines every collection (a sandbox switch).
    pub declines: bool,
}

/// What a collection did: the processor's invoice, `paid` or `failed`.
pub type Collected = billing_invoice::Model;

pub struct SandboxBilling {
    pub db: Db,
}

impl SandboxBilling {
    /// A subscription made at the processor in the scope's merchant and mode and this shop,
    /// active, its first period from `now`.
    pub async fn create(
        &self,
        scope: &Scope,
        shop: &ProfileId,
        new: NewSubscription,
        now: DateTime<Utc>,
    ) -> Result<billing_subscription::Model, CommitError> {
        let end = new
            .plan
            .period_end(now)
            .ok_or_else(|| CommitError::Db(DbErr::Custom("a period past the calendar".into())))?;
        let s = billing_subscription::Model {
            id: ProcessorSubscriptionId::new(),
            merchant_id: scope.merchant_id.clone(),
            profile_id: shop.clone(),
            test_mode: scope.test_mode,
            customer_name: new.customer_name,
            customer_email: new.customer_email,
            plan_id: new.plan.item_id.to_owned(),
            quantity: new.quantity,
            status: ProcessorStatus::Active,
            current_period_start: now,
            current_period_end: end,
            declines: new.declines,
            created_at: now,
            updated_at: now,
        };
        commit::commit(&self.db, Change::at(now).write(commit::insert(s.clone()))).await?;
        Ok(s)
    }

    /// The processor's subscription, if `scope` sees it.
    pub async fn find(
        &self,
        scope: &Scope,
        id: &ProcessorSubscriptionId,
    ) -> Result<Option<billing_subscription::Model>, DbErr> {
        Ok(billing_subscription::Entity::find_by_id(id.clone())
            .one(&self.db)
            .await?
            .filter(|s| scope.sees(&s.merchant_id, s.test_mode, &s.profile_id)))
    }

    /// The processor's subscription a payd subscription follows, if any.
    pub async fn of(
        &self,
        s: &payd_entity::subscription::Model,
    ) -> Result<Option<billing_subscription::Model>, DbErr> {
        match &s.processor_subscription_id {
            Some(id) => {
                billing_subscription::Entity::find_by_id(id.clone())
                    .one(&self.db)
                    .await
            }
            None => Ok(None),
        }
    }

    /// The shop's subscriptions at the processor, oldest first.
    pub async fn list(
        &self,
        scope: &Scope,
        shop: &ProfileId,
    ) -> Result<Vec<billing_subscription::Model>, DbErr> {
        billing_subscription::Entity::find()
            .filter(billing_subscription::Column::ProfileId.eq(shop))
            .filter(billing_subscription::Column::MerchantId.eq(scope.merchant_id.as_str()))
            .filter(billing_subscription::Column::TestMode.eq(scope.test_mode))
            .order_by_asc(billing_subscription::Column::Id)
            .all(&self.db)
            .await
    }

    /// Applies a change at the processor; answers the subscription as it now is.
    pub async fn change(
        &self,
        s: &billing_subscription::Model,
        change: &ProcessorChange,
        now: DateTime<Utc>,
    ) -> Result<billing_subscription::Model, CommitError> {
        let mut after = s.clone();
        if let Some(status) = change.status {
            after.status = status;
        }
        if let Some(plan) = &change.plan_id {
            after.plan_id = plan.clone();
        }
        if let Some(q) = change.quantity {
            after.quantity = q;
        }
        if let Some(d) = change.declines {
            after.declines = d;
        }
        after.updated_at = now;
        self.save(after, now).await
    }

    async fn save(
        &self,
        s: billing_subscription::Model,
        now: DateTime<Utc>,
    ) -> Result<billing_subscription::Model, CommitError> {
        commit::commit(&self.db, Change::at(now).write(replace(&s))).await?;
        Ok(s)
    }

    /// Collects `amount` for the period under the collector's `key`: the invoice already made
    /// under that key if there is one, else a new one — `paid`, or `failed` when the card the
    /// processor holds declines or the subscription is not active there. The processor's
    /// period moves to the one collected.
    pub async fn collect(
        &self,
        s: &billing_subscription::Model,
        key: &str,
        amount: i64,
        currency: &str,
        period: (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
    ) -> Result<Collected, CommitError> {
        if let Some(done) = self.invoice_by_key(key).await? {
            return Ok(done);
        }
        let paid = s.status == ProcessorStatus::Active && !s.declines;
        let invoice = billing_invoice::Model {
            id: ProcessorInvoiceId::new(),
            billing_subscription_id: s.id.clone(),
            collection_key: key.to_owned(),
            amount,
            currency: currency.to_owned(),
            status: if paid {
                ProcessorInvoiceStatus::Paid
            } else {
                ProcessorInvoiceStatus::Failed
            },
            dispute_id: None,
            created_at: now,
        };
        let mut moved = s.clone();
        (moved.current_period_start, moved.current_period_end) = period;
        moved.updated_at = now;
        let change = Change::at(now)
            .write(commit::insert(invoice.clone()))
            .write(replace(&moved));
        match commit::commit(&self.db, change).await {
            Ok(_) => Ok(invoice),
            // Another collector under the same key got there first: its invoice is the answer.
            Err(CommitError::Db(e))
                if matches!(
                    e.sql_err(),
                    Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
                ) =>
            {
                self.invoice_by_key(key).await?.ok_or(CommitError::Db(e))
            }
            Err(e) => Err(e),
        }
    }

    async fn invoice_by_key(&self, key: &str) -> Result<Option<Collected>, DbErr> {
        billing_invoice::Entity::find()
            .filter(billing_invoice::Column::CollectionKey.eq(key))
            .one(&self.db)
            .await
    }

    pub async fn invoice(&self, id: &ProcessorInvoiceId) -> Result<Option<Collected>, DbErr> {
        billing_invoice::Entity::find_by_id(id.clone())
            .one(&self.db)
            .await
    }

    /// The buyer charges a paid invoice back (the sandbox's trigger): the processor opens its
    /// dispute (`bdp_…`). Once per invoice.
    pub async fn chargeback(
        &self,
        invoice: &Collected,
        now: DateTime<Utc>,
    ) -> Result<Collected, CommitError> {
        let mut after = invoice.clone();
        after.dispute_id = Some(new_id("bdp"));
        commit::commit(
            &self.db,
            Change::at(now).write(Write::Cas(
                billing_invoice::Entity::update_many()
                    .set(after.clone().into_active_model().reset_all())
                    .filter(billing_invoice::Column::Id.eq(invoice.id.as_str()))
                    .filter(billing_invoice::Column::DisputeId.is_null())
                    .into_query(),
            )),
        )
        .await?;
        Ok(after)
    }
}

/// The write that stores the processor's subscription as it now is.
fn replace(s: &billing_subscription::Model) -> Write {
    Write::Update(
        billing_subscription::Entity::update_many()
            .set(s.clone().into_active_model().reset_all())
            .filter(billing_subscription::Column::Id.eq(s.id.as_str()))
            .into_query(),
    )
}
