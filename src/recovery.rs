//! Where a request with an `Idempotency-Key` left off. A change made for such a request names
//! the object it made or moved as the key's recovery point, in the change's own transaction.
//! When the request's answer is never stored (the database went away after the change, the
//! instance died, the answer was a 5xx), a retry with the same key finds the recovery point
//! and resumes from that object — it answers with the object as it now stands, or carries the
//! request on from there — instead of running the request a second time.
//!
//! Invariant: a key's recovery point is set only by a committed change, so a retry finds one
//! exactly when the first request had an effect; a key without one never had any, and runs
//! afresh.

use payd_entity::idempotency_key::{self, Entity as Keys};
use sea_orm::{sea_query::Expr, ColumnTrait, EntityTrait, QueryFilter, QueryTrait};

use crate::commit::Write;

pub use payd_model::idempotency::KeyState;

/// The `Idempotency-Key` a request runs under: merchant, mode, scope and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    pub merchant_id: String,
    pub mode: crate::auth::keys::Mode,
    /// `{key kind}:{bound shop or *}`.
    pub scope: String,
    pub key: String,
}

/// The object a retried request resumes from: the recovery point its key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume(pub String);

impl RequestKey {
    /// This key's row.
    pub fn this(&self) -> sea_orm::Condition {
        sea_orm::Condition::all()
            .add(idempotency_key::Column::MerchantId.eq(self.merchant_id.as_str()))
            .add(idempotency_key::Column::Mode.eq(self.mode))
            .add(idempotency_key::Column::Scope.eq(&self.scope))
            .add(idempotency_key::Column::Key.eq(self.key.as_str()))
    }

    /// The write that names `object_id` as the request's recovery point: part of the change
    /// that made or moved the object. A key already answered is left alone.
    pub fn bind(&self, object_id: &str) -> Write {
        Write::Update(
            Keys::update_many()
                .col_expr(
                    idempotency_key::Column::RecoveryPoint,
                    Expr::value(object_id),
                )
                .filter(self.this())
                .filter(idempotency_key::Column::State.eq(KeyState::InFlight))
                .into_query(),
        )
    }
}
