//! Syncing with the processor: a payment still `processing`, refunds pending there, and the
//! reconciliation of an operation whose outcome was not recorded.

use super::*;
use crate::stored::Json;
use payd_model::payments::Trigger;

/// Reconciles the operation whose outcome the payment has not recorded: an authorization by
/// a sync of its reference; a challenge's answer, a capture or a void by the same request with
/// the same key. No answer yet leaves it (and its settle job) as it is.
pub(super) async fn reconcile(
    deps: &PaymentDeps,
    m: &payment::Model,
) -> Result<Done, PaymentError> {
    let Some(Json(intent)) = m.pending_operation.clone() else {
        return Ok(Done::unchanged(m));
    };
    let now = deps.clock.now();
    let (account, reference) = match &intent {
        Intent::Authorize {
            account, reference, ..
        } => (account.clone(), reference.clone()),
        _ => processor_of(m)?,
    };
    let processor = deps.processor_for(m, &account).await?;
    match intent {
        Intent::Authorize {
            attempt_id,
            at,
            resend,
            ..
        } => {
            let deadline = Duration::from_std(processor.answer_deadline()).unwrap_or_default();
            let recovered = processor
                .recover(&reference, at, resend.as_deref(), now)
                .await?;
            let Some((outcome, error)) = recovered_outcome(&recovered, now - at > deadline) else {
                // Pending, or no trace yet of a request that may still arrive.
                return keep_waiting(deps, m).await;
            };
            let result = AuthResult {
                reference: recovered.reference.or(Some(reference)),
                outcome,
                error,
                token: recovered.token,
                resend: None,
                capture_before: None,
            };
            let card = card_of(m).ok_or_else(|| {
                PaymentError::Internal("an authorization's card is not stored".into())
            })?;
            let attempt = store::find_attempt(&deps.db, &attempt_id)
                .await?
                .ok_or_else(|| {
                    PaymentError::Internal("an authorization's attempt is gone".into())
                })?;
            let mandate = match (&m.mandate_id, m.off_session) {
                (Some(id), true) => customers::store::find_mandate(&deps.db, id).await?,
                _ => None,
            };
            let authorized = Authorized {
                chosen: account,
                can_save: saves(&*processor, &card, &result),
                attempts: vec![answered(attempt, m, &result)],
                result,
                intent: None,
            };
            confirmed(deps, m, card, mandate, authorized, &None).await
        }
        Intent::Challenge { approve } => {
            let back = super::authorize::challenge_return(deps, m);
            let answer = processor
                .complete_challenge(&reference, approve, &back, now)
                .await;
            challenged(deps, m, answer).await
        }
        Intent::Capture {
            key,
            amount,
            final_capture,
        } => {
            let answer = processor
                .capture(&reference, amount, &m.currency, &key)
                .await;
            captured(deps, m, amount, final_capture, answer).await
        }
        Intent::Void { key, to, expiry } => {
            let answer = processor.void(&reference, &key).await;
            voided(deps, m, to, expiry, answer).await
        }
    }
}

/// What a recovered authorization's outcome is, with a decline's code and message; `None`
/// while it is pending, or not found yet before the processor's deadline (`overdue`): past
/// it, with no trace found, the authorization never arrived.
fn recovered_outcome(
    recovered: &crate::processors::Recovered,
    overdue: bool,
) -> Option<(Authorization, Option<(String, String)>)> {
    match recovered.view {
        ProcessorView::Authorized { amount } | ProcessorView::Captured { amount } => {
            Some((Authorization::Approved { amount }, None))
        }
        ProcessorView::Declined { retryable } => {
            let error = recovered.error.clone().unwrap_or_else(|| {
                (
                    "card_declined".to_owned(),
                    "the processor declined the authorization".to_owned(),
                )
            });
            Some((Authorization::Declined { retryable }, Some(error)))
        }
        ProcessorView::AwaitsBuyer => {
            Some((Authorization::ChallengeRequired, recovered.error.clone()))
        }
        ProcessorView::Unknown if overdue => Some((
            Authorization::Declined { retryable: true },
            Some((
                "processor_unavailable".to_owned(),
                "the authorization never reached the processor".to_owned(),
            )),
        )),
        _ => None,
    }
}

/// Asks the processor where the payment stands, records the refunds it applied that payd
/// lacks, and settles payd's refunds still pending there.
pub(super) async fn sync(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let synced = sync_status(deps, m).await?;
    let (adopted, _) = adopt_refunds(deps, &synced.payment).await?;
    settle_pending_refunds(deps, adopted).await
}

/// Asks the processor about each of the payment's refunds still pending that it acknowledged
/// (the others are asked again by their settle jobs, with their idempotency keys).
pub(super) async fn settle_pending_refunds(
    deps: &PaymentDeps,
    done: Done,
) -> Result<Done, PaymentError> {
    let m = &done.payment;
    let Ok((account, _)) = processor_of(m) else {
        return Ok(done);
    };
    let pending: Vec<refund::Model> = store::refunds_of(&deps.db, &m.id)
        .await?
        .into_iter()
        .filter(|r| {
            r.status == payd_model::refunds::Status::Pending && r.processor_reference.is_some()
        })
        .collect();
    if pending.is_empty() {
        return Ok(done);
    }
    let processor = deps.processor_for(m, &account).await?;
    let mut payment = m.clone();
    for r in pending {
        let Some(reference) = r.processor_reference.clone() else {
            continue;
        };
        let answer = processor.sync_refund(&reference, deps.clock.now()).await;
        payment = record_refund_outcome(deps, &payment, r, answer)
            .await?
            .payment;
    }
    Ok(Done::unchanged(&payment))
}

/// Asks the processor where a pending payment stands.
pub(super) async fn sync_status(
    deps: &PaymentDeps,
    m: &payment::Model,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let Ok((account, reference)) = processor_of(m) else {
        return Ok(Done::unchanged(m));
    };
    let view = deps
        .processor_for(m, &account)
        .await?
        .sync(&reference, now)
        .await?;
    // Released at the processor once its window to capture had closed: it lapsed, whether
    // or not the processor says why.
    let view = match view {
        ProcessorView::Voided if m.capture_before.is_some_and(|at| now >= at) => {
            ProcessorView::Lapsed
        }
        view => view,
    };
    let next = machine::settle(&state, view, now);
    if next == state {
        store::resync_jobs(&deps.db, m, now, deps.settle_delay()).await?;
        return Ok(Done::unchanged(m));
    }
    let mut after = store::with_state(m, &next, now);
    if next.status == Status::Conflicted {
        after.conflict = Some(Json(serde_json::json!({
            "ours": {"status": m.status.as_str(), "authorized": m.amount_authorized, "captured": m.amount_captured},
            "processor": format!("{view:?}"),
        })));
    }
    after.capture_before = deps.capture_before(&next, now);
    commit(deps, m, after, Changes::of(Trigger::Sync)).await
}
