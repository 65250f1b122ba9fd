//! Refunds: reserving, asking the processor, recording its answer, settling pending ones,
//! adopting those made at the processor; and the sandbox buyer's dispute.

use super::*;
use crate::stored::Json;
use payd_model::payments::Trigger;
use payd_model::refunds::Status as Stored;

/// Plans a refund against what is captured, refundable and not disputed, and makes it:
/// intent, effect, outcome. Invariant: a processor that keeps state never hears of a refund
/// payd has not recorded. The refund is first committed `pending`, holding its balance, with
/// its settle job; only then is the processor asked, with the refund's id as the idempotency
/// key; its answer is committed last. A crash, a timeout or a failed commit in between leaves
/// a pending refund whose job asks the processor again with the same key (no second effect)
/// and records the outcome. The stateless sandbox is asked first and its answer recorded in
/// one commit (`Processor::keeps_state`).
pub(super) async fn refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    ask: &refunds::Ask,
    reason: &Option<String>,
    metadata: &Metadata,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let lines = lines_of(m);
    let plan = refunds::plan(
        &state,
        &lines,
        ask,
        &store::disputed(&deps.db, &m.id).await?,
    )?;
    let (account, reference) = processor_of(m)?;
    let (after, mut intent) = reserved(m, &lines, &plan, now);
    intent.reason = reason.clone();
    intent.metadata = Json(metadata.clone());
    let processor = deps.processor_for(m, &account).await?;
    takes_amount(&*processor, plan.amount, &m.currency)?;
    if !processor.keeps_state() {
        // Nothing a crash could make payd forget: asked first, recorded once with its answer.
        let answer = processor
            .refund(&reference, plan.amount, &m.currency, now, &intent.id)
            .await;
        return refund_answered(deps, m, after, intent, answer).await;
    }
    let changes = Changes {
        refund: Some(intent),
        ..Changes::of(Trigger::Refund)
    };
    let recorded = commit(deps, m, after, changes).await?;
    let (m, r) = (
        recorded.payment,
        recorded.refund.ok_or(PaymentError::RefundNotFound)?,
    );
    let answer = processor
        .refund(&reference, r.amount, &m.currency, now, &r.id)
        .await;
    match record_refund_outcome(deps, &m, r.clone(), answer).await {
        // Recorded meanwhile (its settle job, on another instance): that record stands, and
        // this request must not decide again.
        Err(PaymentError::LostRace) => Ok(Done {
            payment: store::find(&deps.db, &m.id).await?.unwrap_or(m),
            refund: store::find_refund(&deps.db, &r.id).await?.or(Some(r)),
            dispute: None,
        }),
        other => other,
    }
}

/// The payment with a refund's balance reserved (on the payment and its lines), and that
/// refund, `pending`, not yet stored.
pub(super) fn reserved(
    m: &payment::Model,
    lines: &[crate::payments::api::Line],
    plan: &refunds::Plan,
    now: DateTime<Utc>,
) -> (payment::Model, refund::Model) {
    let (next, next_lines) = refunds::reserve(&crate::payments::api::state_of(m), lines, plan);
    let mut after = store::with_state(m, &next, now);
    if m.lines.is_some() {
        after.lines = Some(Json(next_lines));
    }
    let refund = refund::Model {
        id: crate::ids::RefundId::new(),
        payment_id: m.id.clone(),
        merchant_id: m.merchant_id.clone(),
        profile_id: m.profile_id.clone(),
        test_mode: m.test_mode,
        status: Stored::Pending,
        amount: plan.amount,
        currency: m.currency.clone(),
        lines: Json(plan.lines.clone()),
        reason: None,
        metadata: Json::default(),
        processor_reference: None,
        failure_reason: None,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    (after, refund)
}

/// Commits a refund a stateless processor has answered, with the balance it holds (none for
/// a failed one) and its event, in one commit.
pub(super) async fn refund_answered(
    deps: &PaymentDeps,
    m: &payment::Model,
    reserved: payment::Model,
    mut r: refund::Model,
    answer: Result<RefundResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (status, reference) = refund_answer(answer).unwrap_or((RefundStatus::Pending, None));
    r.processor_reference = reference;
    let after = match status {
        RefundStatus::Pending => reserved,
        RefundStatus::Succeeded => {
            r.status = Stored::Succeeded;
            reserved
        }
        RefundStatus::Failed(why) => {
            r.status = Stored::Failed;
            r.failure_reason = Some(why);
            let mut unchanged = m.clone();
            unchanged.updated_at = r.updated_at;
            unchanged
        }
    };
    let changes = Changes {
        events: refund_event(&r)?,
        refund: Some(r),
        ..Changes::of(Trigger::Refund)
    };
    commit(deps, m, after, changes).await
}

/// What a processor's answer makes of a refund: its status and reference, or `None` when
/// there was no answer (a timeout, an unreachable processor).
pub(super) fn refund_answer(
    answer: Result<RefundResult, ProcessorError>,
) -> Option<(RefundStatus, Option<String>)> {
    match answer {
        Ok(result) => Some((result.status, Some(result.reference))),
        Err(ProcessorError::Refused(why)) => Some((RefundStatus::Failed(why), None)),
        Err(
            ProcessorError::Unavailable(_) | ProcessorError::Timeout | ProcessorError::Unknown(_),
        ) => None,
    }
}

/// Where a pending refund stands: one whose request never got an answer is asked again with
/// the same idempotency key (the processor answers its first answer, without a second effect);
/// one the processor acknowledged is synced by its reference. The payment's refunds at the
/// processor that payd lacks are recorded first.
pub(super) async fn settle_refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    refund_id: &crate::ids::RefundId,
) -> Result<Done, PaymentError> {
    let now = deps.clock.now();
    let Some(r) = store::find_refund(&deps.db, refund_id)
        .await?
        .filter(|r| r.payment_id == m.id)
    else {
        return Err(PaymentError::RefundNotFound);
    };
    // The payment's refunds at the processor first: those payd lacks are recorded, and payd's
    // own found there (this one too) settle from what the processor shows.
    let (adopted, listed) = adopt_refunds(deps, m).await?;
    let m = &adopted.payment;
    let r = store::find_refund(&deps.db, refund_id).await?.unwrap_or(r);
    if !r.status.is_open() {
        return Ok(Done::refund(m, r));
    }
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let answer = match &r.processor_reference {
        // Not among the processor's refunds: never applied, so asking again cannot refund
        // twice, even once the processor has forgotten the idempotency key. When the list
        // cannot be read, payd does not ask blind: the settle job comes back.
        None if !listed => {
            store::resync_refund_job(&deps.db, &r, now, deps.settle_delay()).await?;
            return Ok(Done::refund(m, r));
        }
        None => {
            processor
                .refund(&reference, r.amount, &m.currency, now, &r.id)
                .await
        }
        Some(refund_reference) => processor.sync_refund(refund_reference, now).await,
    };
    record_refund_outcome(deps, m, r, answer).await
}

/// Commits what the processor answered about a pending refund. A settled answer ends it (a
/// failed one gives its balance back); no answer (timeout, unreachable) keeps it pending, and
/// its settle job asks again.
pub(super) async fn record_refund_outcome(
    deps: &PaymentDeps,
    m: &payment::Model,
    mut r: refund::Model,
    answer: Result<RefundResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let Some((status, reference)) = refund_answer(answer) else {
        store::resync_refund_job(&deps.db, &r, now, deps.settle_delay()).await?;
        return Ok(Done::refund(m, r));
    };
    fault(deps, "refund")?;
    let mut after = m.clone();
    let unchanged = matches!(status, RefundStatus::Pending) && r.processor_reference == reference;
    match status {
        RefundStatus::Pending => {}
        RefundStatus::Succeeded => r.status = Stored::Succeeded,
        RefundStatus::Failed(why) => {
            let plan = refunds::Plan {
                amount: r.amount,
                lines: r.lines.0.clone(),
            };
            let (next, next_lines) = refunds::release(&state, &lines_of(m), &plan);
            after = store::with_state(m, &next, now);
            if m.lines.is_some() {
                after.lines = Some(Json(next_lines));
            }
            r.status = Stored::Failed;
            r.failure_reason = Some(why);
        }
    }
    if unchanged {
        store::resync_refund_job(&deps.db, &r, now, deps.settle_delay()).await?;
        return Ok(Done::refund(m, r));
    }
    r.processor_reference = reference.or(r.processor_reference);
    r.updated_at = now;
    if r.status != Stored::Failed {
        // The payment already holds the refund's balance: only the refund changes.
        let events = refund_event(&r)?;
        let (r, deliveries) =
            store::commit_refund(&deps.db, r, events, now, deps.settle_delay()).await?;
        if deliveries > 0 {
            deps.wake.now();
        }
        return Ok(Done::refund(m, r));
    }
    after.updated_at = now;
    let changes = Changes {
        events: refund_event(&r)?,
        refund: Some(r),
        ..Changes::of(Trigger::RefundSettled)
    };
    commit(deps, m, after, changes).await
}

/// Brings payd's refunds in line with those the processor lists for the payment. payd's own
/// refunds found there settle from it: a pending one succeeds or fails, and one that succeeded
/// and then failed at the processor (a closed card) fails, its balance given back, with
/// `refund_failed`. The refunds payd has no record of — made in the processor's dashboard, or
/// by an integration beside payd — are recorded, each with `refund_succeeded` once, its amount
/// taken from what is refundable (an open dispute does not stop what the processor already
/// did). One the payment cannot hold makes it `conflicted`. A processor that cannot list
/// refunds now leaves the payment as it is (`false`: not listed): the next sync asks again.
pub(super) async fn adopt_refunds(
    deps: &PaymentDeps,
    m: &payment::Model,
) -> Result<(Done, bool), PaymentError> {
    let Ok((account, reference)) = processor_of(m) else {
        return Ok((Done::unchanged(m), true));
    };
    if m.amount_captured == 0 {
        return Ok((Done::unchanged(m), true));
    }
    let listed = match deps
        .processor_for(m, &account)
        .await?
        .refunds(&reference)
        .await
    {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(payment_id = %m.id, error = %e, "the processor's refunds could not be listed");
            return Ok((Done::unchanged(m), false));
        }
    };
    if listed.is_empty() {
        return Ok((Done::unchanged(m), true));
    }
    let known = store::refunds_of(&deps.db, &m.id).await?;
    let mut done = Done::unchanged(m);
    for applied in listed {
        let ours = known.iter().find(|r| {
            r.id == applied.reference
                || r.processor_reference.as_deref() == Some(applied.reference.as_str())
        });
        if let Some(ours) = ours {
            if settles(ours, &applied) {
                let answer = Ok(RefundResult {
                    reference: applied
                        .processor_reference
                        .clone()
                        .unwrap_or(applied.reference),
                    status: applied.status,
                });
                done = record_refund_outcome(deps, &done.payment, ours.clone(), answer).await?;
            }
            continue;
        }
        if matches!(applied.status, RefundStatus::Failed(_)) {
            continue;
        }
        done = adopt_refund(deps, &done.payment, applied).await?;
        if done.payment.status == Status::Conflicted {
            break;
        }
    }
    Ok((done, true))
}

/// Whether what the processor lists of payd's refund `ours` changes it: a pending one that
/// settled or got the processor's reference, or a succeeded one that failed since.
fn settles(ours: &refund::Model, applied: &AppliedRefund) -> bool {
    match (ours.status, &applied.status) {
        (Stored::Pending, RefundStatus::Pending) => {
            ours.processor_reference.is_none() && applied.processor_reference.is_some()
        }
        (Stored::Pending, _) => true,
        (Stored::Succeeded, RefundStatus::Failed(_)) => true,
        (Stored::Succeeded | Stored::ManualReview | Stored::Failed, _) => false,
    }
}

/// Records one refund the processor made without payd.
pub(super) async fn adopt_refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    applied: AppliedRefund,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let lines = lines_of(m);
    let mut disputed = store::disputed(&deps.db, &m.id).await?;
    disputed.open = None;
    let ask = refunds::Ask::Amount(Some(applied.amount));
    let Ok(plan) = refunds::plan(&state, &lines, &ask, &disputed) else {
        let mut after = m.clone();
        after.status = Status::Conflicted;
        after.updated_at = now;
        after.conflict = Some(Json(serde_json::json!({
            "ours": {"status": m.status.as_str(), "captured": m.amount_captured, "refunded": m.amount_refunded},
            "processor": {"refund": applied.reference, "amount": applied.amount},
        })));
        return commit(deps, m, after, Changes::of(Trigger::Sync)).await;
    };
    let (after, mut refund) = reserved(m, &lines, &plan, now);
    if applied.status == RefundStatus::Succeeded {
        refund.status = Stored::Succeeded;
    }
    refund.reason = Some("made at the processor, outside payd".to_owned());
    refund.processor_reference = Some(applied.reference);
    let changes = Changes {
        events: refund_event(&refund)?,
        refund: Some(refund),
        ..Changes::of(Trigger::RefundAdopted)
    };
    commit(deps, m, after, changes).await
}

/// The processor reports the buyer's dispute of what was captured.
/// Opens a dispute of the payment: the card sandbox's (`case: None`), of which a payment has at
/// most one, or a processor's case (a wallet case, a Stripe dispute): one payd dispute per case,
/// so a payment the processor holds several disputes against has as many. (A wallet case
/// is imported only into a payment without a dispute: `wallet::follow`.)
pub(super) async fn open_dispute(
    deps: &PaymentDeps,
    m: &payment::Model,
    case: Option<&disputes::actor::CaseOpening>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    // Nothing left to dispute (refunded, or given back by a cancel after capture), or disputed.
    let Some(left) = machine::dispute_amount(&state) else {
        return Ok(Done::unchanged(m));
    };
    let existing = disputes::store::of_payment(&deps.db, &m.id).await?;
    let opened = match case {
        Some(c) => existing
            .iter()
            .any(|d| d.case_id.as_deref() == Some(c.case_id.as_str())),
        None => !existing.is_empty(),
    };
    if opened {
        return Ok(Done::unchanged(m));
    }
    let opening = match case {
        Some(c) => disputes::store::Opening {
            stage: c.stage,
            amount: c.amount.min(left),
            reason: c.reason.clone(),
            processor: Some(c.processor.clone()),
            processor_reference: Some(c.case_id.clone()),
            evidence_due_by: c.due_by,
            case_id: Some(c.case_id.clone()),
        },
        None => disputes::store::Opening {
            stage: disputes::machine::Stage::Dispute,
            amount: left,
            reason: "fraudulent".to_owned(),
            processor: m.processor.clone(),
            processor_reference: m
                .processor_reference
                .as_ref()
                .map(|r| format!("{r}.dispute")),
            evidence_due_by: disputes::actor::due_by(now),
            case_id: None,
        },
    };
    let dispute = disputes::store::opened(m, opening, now);
    let mut after = m.clone();
    after.updated_at = now;
    let changes = Changes {
        dispute: Some(dispute.clone()),
        ..Changes::of(Trigger::Dispute)
    };
    // Committed means this command opened it: a case's dispute that another instance opened
    // first makes the commit a lost race (the insert must add its row), decided again.
    let mut done = commit(deps, m, after, changes).await?;
    done.dispute = Some(dispute);
    Ok(done)
}
