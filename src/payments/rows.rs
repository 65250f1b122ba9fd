//! The rows a payment's commands write, made from what they decided: a processor attempt and
//! its answer, a patched payment, the event a change announces, the keys of its operations.
//! Pure functions of their arguments: the actor decides and commits; these only shape.

use chrono::{DateTime, Utc};
use payd_entity::{payment, payment_attempt, refund};
use payd_model::payments::AttemptStatus as Attempt;
use payd_model::payments::Trigger;

use super::{
    api::{lines_of, LastError, Refund, RoutingDecision},
    commands::{Patch, PaymentError},
    machine::{Authorization, CaptureMethod, Refusal, Status},
    store::{self, Announcement},
};
use crate::stored::Json;
use crate::{
    ids::new_id,
    processors::{AuthResult, StoredCard},
};

/// The card stored on the payment, if one is.
pub(super) fn card_of(m: &payment::Model) -> Option<StoredCard> {
    m.payment_method.as_ref().map(|c| c.0.clone())
}

/// An attempt about to be sent: `pending` until `answered` records the processor's answer.
pub(super) fn attempt_row(
    m: &payment::Model,
    number: i32,
    processor: &str,
    card: &StoredCard,
    decision: &RoutingDecision,
    now: DateTime<Utc>,
) -> payment_attempt::Model {
    payment_attempt::Model {
        id: new_id("att"),
        payment_id: m.id.clone(),
        number,
        processor: processor.to_owned(),
        processor_reference: None,
        status: Attempt::Pending,
        amount: m.amount,
        error_code: None,
        error_message: None,
        payment_method: Some(Json(card.clone())),
        routing: Json(decision.clone()),
        created_at: now,
    }
}

/// The attempt with the processor's answer.
pub(super) fn answered(
    mut a: payment_attempt::Model,
    m: &payment::Model,
    result: &AuthResult,
) -> payment_attempt::Model {
    a.status = match result.outcome {
        Authorization::Approved { amount } if amount < m.amount => Attempt::PartiallyAuthorized,
        Authorization::Approved { .. } if m.capture_method == CaptureMethod::Automatic => {
            Attempt::Captured
        }
        Authorization::Approved { .. } => Attempt::Authorized,
        Authorization::Declined { .. } | Authorization::Refused => Attempt::Declined,
        Authorization::ChallengeRequired => Attempt::ChallengeRequired,
        Authorization::ReviewRequired => Attempt::ReviewRequired,
        Authorization::Pending => Attempt::Pending,
    };
    a.processor_reference = result.reference.clone();
    a.error_code = result.error.as_ref().map(|(c, _)| c.clone());
    a.error_message = result.error.as_ref().map(|(_, msg)| msg.clone());
    a
}

pub(super) fn last_error(result: &AuthResult) -> Option<Json<LastError>> {
    result.error.as_ref().map(|(code, message)| {
        Json(LastError {
            code: code.clone(),
            message: message.clone(),
        })
    })
}

/// `refund_succeeded` or `refund_failed`, once a refund has settled either way. `r` is the
/// refund before its commit; the event's object is the refund as that commit writes it (its
/// version raised).
pub(super) fn refund_event(r: &refund::Model) -> Result<Vec<Announcement>, sea_orm::DbErr> {
    use payd_model::refunds::Status as Stored;
    let event_type = match r.status {
        Stored::Succeeded => "refund_succeeded",
        Stored::Failed => "refund_failed",
        Stored::Pending | Stored::ManualReview => return Ok(Vec::new()),
    };
    Ok(vec![Announcement {
        event_type,
        content_type: "refund_details",
        object_id: r.id.to_string(),
        object: serde_json::to_string(&Refund::render(&store::refund_raised(r))?)
            .unwrap_or_default(),
    }])
}

/// The event a change announces: the spec's event for the new status, on every status change
/// and on every confirm or capture (a second decline, a further partial capture).
pub(super) fn event_for(
    before: &payment::Model,
    after: &payment::Model,
    trigger: Trigger,
) -> Option<&'static str> {
    let changed =
        before.status != after.status || matches!(trigger, Trigger::Confirm | Trigger::Capture);
    if !changed {
        return None;
    }
    after.status.event()
}

/// The idempotency key of a money-moving operation: the same for a retry of the same
/// decision (the payment's version has not moved), new for the next one.
pub(super) fn op_key(m: &payment::Model, op: &str) -> String {
    format!("{}.{op}.{}", m.id, m.version)
}

pub(super) fn processor_of(m: &payment::Model) -> Result<(String, String), PaymentError> {
    match (&m.processor, &m.processor_reference) {
        (Some(a), Some(r)) => Ok((a.clone(), r.clone())),
        _ => Err(PaymentError::Refused(Refusal::InvalidState(m.status))),
    }
}

pub(super) fn apply_patch(
    m: &payment::Model,
    p: &Patch,
    now: DateTime<Utc>,
) -> Result<payment::Model, PaymentError> {
    let mut after = m.clone();
    if let Some(a) = p.amount {
        after.amount = a;
    }
    if let Some(c) = &p.currency {
        after.currency = c.clone();
    }
    if let Some(manual) = p.manual_capture {
        after.capture_method = CaptureMethod::of(manual);
    }
    if let Some(card) = &p.card {
        after.payment_method = Some(Json(card.clone()));
        if after.status == Status::RequiresPaymentMethod {
            after.status = Status::RequiresConfirmation;
        }
    }
    // Lines that name the catalog were checked against it, and indexed for the sales report,
    // when the payment was created: they, and the currency they were checked in, stay.
    let stored_catalog = after.lines.is_some()
        && lines_of(&after)
            .iter()
            .any(|l| l.product_id.is_some() || l.price_id.is_some());
    let fixed = |param: &str| PaymentError::CatalogLinesFixed(param.to_owned());
    if stored_catalog && (p.lines.is_some() || p.currency.is_some() || p.amount.is_some()) {
        return Err(fixed("lines"));
    }
    if let Some(i) = p.lines.as_ref().and_then(|lines| {
        lines
            .iter()
            .position(|l| l.product_id.is_some() || l.price_id.is_some())
    }) {
        return Err(fixed(&format!("lines[{i}].product_id")));
    }
    match &p.lines {
        Some(lines) => {
            let total: i64 = lines.iter().map(|l| l.amount).sum();
            if total != after.amount {
                let amount = after.amount;
                return Err(PaymentError::LinesMismatch { total, amount });
            }
            after.lines = Some(Json(lines.clone()));
        }
        // Stored lines must still add up when only the amount changes.
        None if p.amount.is_some() && after.lines.is_some() => {
            let lines = lines_of(&after);
            let total: i64 = lines.iter().map(|l| l.amount).sum();
            if total != after.amount {
                return Err(PaymentError::StoredLinesMismatch { total });
            }
        }
        None => {}
    }
    if let Some(md) = &p.metadata {
        after.metadata = Json(md.clone());
    }
    if let Some(d) = &p.description {
        after.description = Some(d.clone());
    }
    if let Some(u) = &p.return_url {
        after.return_url = Some(u.clone());
    }
    after.updated_at = now;
    Ok(after)
}
