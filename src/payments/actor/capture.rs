//! Capturing, cancelling, voiding, updating and expiring a payment.

use super::*;
use payd_model::payments::Trigger;

/// Captures part or all of what is authorized.
pub(super) async fn capture(
    deps: &PaymentDeps,
    m: &payment::Model,
    amount: &Option<i64>,
    final_capture: &bool,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let amount = machine::capture_amount(&state, *amount)?;
    machine::capture(&state, amount, *final_capture, now)?;
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    // A capture that is not final must leave the rest capturable at the processor too.
    if !*final_capture && amount < m.amount_authorized && !processor.captures_more_than_once() {
        return Err(PaymentError::NotForProcessor {
            param: "final_capture",
            message: format!(
                "the payment's processor ({account}) releases what a partial capture leaves: capture with final_capture true"
            ),
        });
    }
    takes_amount(&*processor, amount, &m.currency)?;
    let key = op_key(m, "capture");
    let intent = Intent::Capture {
        key: key.clone(),
        amount,
        final_capture: *final_capture,
    };
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor
        .capture(&reference, amount, &m.currency, &key)
        .await;
    captured(deps, &base, amount, *final_capture, answer).await
}

/// Commits the processor's answer to a capture. A refusal clears its intent (nothing was
/// captured) and is answered; no answer leaves the intent to be reconciled.
pub(super) async fn captured(
    deps: &PaymentDeps,
    base: &payment::Model,
    amount: i64,
    final_capture: bool,
    answer: Result<(), ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(base));
    match answer {
        Ok(()) => {
            let next = machine::capture(&state, amount, final_capture, now)?;
            let after = store::with_state(base, &next, now);
            record_outcome(deps, base, after, Changes::of(Trigger::Capture)).await
        }
        Err(e) => Err(not_done(deps, base, Trigger::CaptureRefused, e).await),
    }
}

/// The error of an operation the processor did not carry out. A refusal clears its intent
/// first (the payment is as it was before it); no answer leaves the intent to be reconciled.
pub(super) async fn not_done(
    deps: &PaymentDeps,
    base: &payment::Model,
    trigger: Trigger,
    e: ProcessorError,
) -> PaymentError {
    if matches!(e, ProcessorError::Refused(_)) && base.pending_operation.is_some() {
        let mut after = base.clone();
        after.updated_at = deps.clock.now();
        if let Err(failed) = record_outcome(deps, base, after, Changes::of(trigger)).await {
            return failed;
        }
    }
    e.into()
}

/// Voids at the processor (unless nothing is held there) and cancels.
pub(super) async fn cancel(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let kind = machine::cancel_kind(&state, now)?;
    // Only a void of captured money meets the payment's disputes.
    let disputed = match kind {
        CancelKind::VoidCapture => store::disputed(&deps.db, &m.id).await?,
        _ => refunds::Disputed::default(),
    };
    let next = machine::cancel(&state, now, &disputed)?;
    if kind == CancelKind::Local && !challenge_held(deps, m).await? {
        return commit(
            deps,
            m,
            store::with_state(m, &next, now),
            Changes::of(Trigger::Cancel),
        )
        .await;
    }
    if kind == CancelKind::VoidCapture {
        let (account, _) = processor_of(m)?;
        if !deps.processor_for(m, &account).await?.voids_captures() {
            return Err(machine::Refusal::CaptureNotVoidable.into());
        }
    }
    void(deps, m, next.status, false).await
}

/// Whether the payment waits for the buyer's 3-D Secure on an authorization its processor holds
/// (a Stripe PaymentIntent in `requires_action`): cancelling or expiring it voids it there.
async fn challenge_held(deps: &PaymentDeps, m: &payment::Model) -> Result<bool, PaymentError> {
    if m.status != Status::RequiresCustomerAction {
        return Ok(false);
    }
    let Ok((account, _)) = processor_of(m) else {
        return Ok(false);
    };
    Ok(deps.processor_for(m, &account).await?.voids_challenges())
}

/// Voids what the processor holds, after which the payment is `to` (for a cancel, or the
/// authorization's lapse: `expiry`): intent, effect, outcome.
pub(super) async fn void(
    deps: &PaymentDeps,
    m: &payment::Model,
    to: Status,
    expiry: bool,
) -> Result<Done, PaymentError> {
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let key = op_key(m, "void");
    let intent = Intent::void(key.clone(), to, expiry);
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor.void(&reference, &key).await;
    voided(deps, &base, to, expiry, answer).await
}

/// Commits the processor's answer to a void: the payment is `to` (decided before the
/// request). A refusal clears its intent and is answered; no answer leaves it to be reconciled.
pub(super) async fn voided(
    deps: &PaymentDeps,
    base: &payment::Model,
    to: Status,
    expiry: bool,
    answer: Result<(), ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, mut next) = (deps.clock.now(), crate::payments::api::state_of(base));
    let trigger = if expiry {
        Trigger::Expire
    } else {
        Trigger::Cancel
    };
    match answer {
        Ok(()) => {
            next.status = to;
            record_outcome(
                deps,
                base,
                store::with_state(base, &next, now),
                Changes::of(trigger),
            )
            .await
        }
        Err(e) => Err(not_done(deps, base, Trigger::VoidRefused, e).await),
    }
}

/// Changes fields of a payment not yet confirmed.
pub(super) async fn update(
    deps: &PaymentDeps,
    m: &payment::Model,
    patch: &Patch,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    machine::check_update(&state)?;
    commit(
        deps,
        m,
        apply_patch(m, patch, now)?,
        Changes::of(Trigger::Update),
    )
    .await
}

/// Expires an unconfirmed payment or a lapsed authorization (releasing what is held).
pub(super) async fn expire(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let Some(next) = machine::expire(&state, now, m.expires_at, m.capture_before) else {
        store::resync_jobs(&deps.db, m, now, deps.settle_delay()).await?;
        return Ok(Done::unchanged(m));
    };
    // Release what the processor still holds for us.
    let held = state.status.is_capturable() || challenge_held(deps, m).await?;
    if held && processor_of(m).is_ok() {
        return void(deps, m, next.status, true).await;
    }
    commit(
        deps,
        m,
        store::with_state(m, &next, now),
        Changes::of(Trigger::Expire),
    )
    .await
}
