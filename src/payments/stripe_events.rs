//! Stripe's events for a `stripe` processor account: `POST
//! /processor-webhooks/{processor_account_id}`, signed with the account's webhook secret.
//!
//! An event is a prompt, not a record: a payment's events make its actor ask Stripe where the
//! PaymentIntent stands (`force_sync`), so an event sent twice, late or out of order changes
//! nothing twice and never moves a payment backwards. A dispute's events carry the dispute
//! itself (Stripe's disputes are read from the event): the first opens the payment's dispute
//! through its actor, and every one brings it up to the dispute's status, as a wallet case's
//! changes do; the event's `created` orders them. Each effect is committed before the answer.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use payd_entity::processor_account;
use serde_json::Value;

use super::{
    actor::{self, Command, Payments},
    processor_accounts, store,
};
use crate::{
    clock,
    commit::Db,
    disputes::{
        self,
        actor::{CaseOpening, Command as DisputeCommand, Exec as DisputeExec, Followed},
        machine::{Stage, Status as DisputeStatus},
        Disputes,
    },
    error::ApiError,
    ids::PaymentId,
    mount::Env,
    processors::{
        connect::{AccountKind, Approval, Connections},
        stripe,
    },
    scheduler::{Job, Outcome, Scheduler},
    state::AppState,
};

crate::http::routes! {
    "/processor-webhooks/{processor_account_id}" => { post: receive_processor_event },
}

/// What payd made of an accepted event.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Received {
    pub received: bool,
    /// `handled`, or `ignored` (an event type payd does not follow, or one about a payment
    /// payd does not hold).
    pub outcome: &'static str,
}

/// The Stripe event of the body, if its `Stripe-Signature` is made with one of the account's
/// secrets (`secrets`: the current one, and one being rolled) and fresh.
fn verified_event(secrets: &[&str], req: &HttpRequest, body: &[u8]) -> Result<Value, ApiError> {
    let signature = req
        .headers()
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let refused =
        |why: String| ApiError::invalid("invalid_signature", why).param("Stripe-Signature");
    if secrets.is_empty() {
        return Err(refused(
            "the account has no webhook secret yet: set the endpoint's signing secret on it (PATCH)".into(),
        ));
    }
    let now = clock::wall_now().timestamp();
    let mut outcome = Ok(());
    for secret in secrets {
        outcome = stripe::verify(secret, signature, body, now);
        if outcome.is_ok() {
            break;
        }
    }
    outcome.map_err(|e| refused(e.to_string()))?;
    serde_json::from_slice(body)
        .ok()
        .filter(|e: &Value| e["type"].is_string() && e["data"]["object"].is_object())
        .ok_or_else(|| {
            ApiError::invalid("invalid_event", "the body is not a Stripe event").param("body")
        })
}

/// Receive an event from Stripe for a `stripe` processor account.
///
/// No api-key: the `Stripe-Signature` header, made with the account's webhook secret (or, for
/// 24 hours, the one it replaced) within 5 minutes, authenticates it, and only an approved
/// Stripe account is heard. A payment's or a refund's event makes the payment's settle job due
/// now, which asks Stripe where the PaymentIntent stands, so its changes and their events
/// follow asynchronously; a dispute's event opens the payment's dispute and brings it up to
/// Stripe's status before the answer. An event of a type payd does not follow, or about a
/// payment it does not hold, answers `ignored`.
///
/// Fails: `invalid_signature` (400), `invalid_event` (400), `resource_missing` (404).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_captured`, `payment_failed`, `payment_cancelled`, `payment_cancelled_post_capture`, `payment_expired`, `action_required`, `refund_succeeded`, `refund_failed`, `dispute_opened`, `dispute_challenged`, `dispute_won`, `dispute_lost`, `dispute_cancelled`.
#[utoipa::path(post, path = "/processor-webhooks/{processor_account_id}", tag = "processors",
    params(("processor_account_id" = String, Path),
        ("Stripe-Signature" = String, Header, description = "t=…,v1=…: HMAC-SHA256 of t.body")),
    request_body(content = Object, content_type = "application/json"),
    responses((status = 200, body = Received), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn receive_processor_event(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    disputes: web::Data<Disputes>,
    connections: web::Data<Connections>,
    id: web::Path<String>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    // An account the operator has not approved (or rejected) is not heard: until then it is
    // nobody's processor.
    let account = processor_accounts::find_account(&state.db, &id)
        .await?
        .filter(|a| a.kind == AccountKind::Stripe && a.approval == Approval::Approved)
        .ok_or_else(|| ApiError::not_found("processor account").param("processor_account_id"))?;
    let config = connections
        .stripe(&account)
        .ok_or_else(|| ApiError::internal("a Stripe account's settings cannot be read"))?;
    let event = verified_event(&config.webhook_secrets(state.clock.now()), &req, &body)?;
    let handled = handle(
        &state.db,
        state.clock.now(),
        &payments,
        &disputes,
        &account,
        &event,
    )
    .await?;
    if handled {
        // A payment's settle job may be due now.
        state.scheduler.wake();
    }
    let outcome = if handled { "handled" } else { "ignored" };
    Ok(HttpResponse::Ok().json(Received {
        received: true,
        outcome,
    }))
}

/// Handles one event (verified, or read back from Stripe's API); whether it concerned a
/// payment payd holds.
async fn handle(
    db: &Db,
    now: DateTime<Utc>,
    payments: &Payments,
    disputes: &Disputes,
    account: &processor_account::Model,
    event: &Value,
) -> Result<bool, ApiError> {
    let object = &event["data"]["object"];
    let kind = event["type"].as_str().unwrap_or("");
    let intent = match kind {
        k if k.starts_with("payment_intent.") => object["id"].as_str(),
        "charge.refunded"
        | "charge.captured"
        | "charge.refund.updated"
        | "refund.created"
        | "refund.updated"
        | "refund.failed" => object["payment_intent"].as_str(),
        k if k.starts_with("charge.dispute.") => object["payment_intent"].as_str(),
        _ => return Ok(false),
    };
    let Some(intent) = intent.filter(|i| i.starts_with("pi_")) else {
        return Ok(false);
    };
    let Some(payment) = find_payment(db, account, intent, object).await? else {
        tracing::info!(account = %account.id, event_type = kind, "a Stripe event about a payment payd does not hold");
        return Ok(false);
    };
    if kind.starts_with("charge.dispute.") {
        let created = event["created"]
            .as_i64()
            .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
            .unwrap_or_else(clock::wall_now);
        return follow_dispute(
            db,
            payments,
            disputes,
            account,
            &payment.id,
            object,
            created,
        )
        .await;
    }
    // A PaymentIntent made for the payment that the payment does not hold (an attempt payd
    // declared never reached, which reached Stripe after all): given back, by a job.
    let orphaned = kind.starts_with("payment_intent.")
        && orphan(&payment, object).map_err(|e| ApiError::internal(e.to_string()))?;
    if orphaned {
        let entity = format!("{}/{}/{}", account.id, intent, payment.id);
        store::due_now(db, ORPHAN_JOB, &entity, now)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        return Ok(true);
    }
    // Answered at once, whatever Stripe's API is doing: the sync the event prompts is the
    // payment's settle job, due now, which the scheduler runs (and runs again after a
    // failure) on whichever instance claims it.
    store::sync_soon(db, &payment.id, now)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(true)
}

/// Whether a PaymentIntent Stripe tells of is an orphan of `payment`: made for it (its
/// metadata says so) but neither the one it holds nor the one its pending authorization is
/// being recovered under. A pending operation that does not decode is an error: read as
/// none, it would give back the PaymentIntent an authorization is being recovered under.
fn orphan(payment: &payd_entity::payment::Model, pi: &Value) -> Result<bool, sea_orm::DbErr> {
    use crate::payments::intent::Intent;
    let id = pi["id"].as_str();
    if pi["metadata"]["payd_payment_id"].as_str() != Some(payment.id.as_str())
        || payment.processor_reference.as_deref() == id
    {
        return Ok(false);
    }
    let recovering = payment
        .pending_operation
        .as_ref()
        .is_some_and(|intent| match &intent.0 {
            Intent::Authorize { reference, .. } => {
                pi["metadata"]["payd_reference"].as_str() == Some(reference.as_str())
            }
            _ => false,
        });
    Ok(!recovering)
}

/// The job that gives back an orphan PaymentIntent (entity `{account}/{pi}/{payment}`).
pub const ORPHAN_JOB: &str = "stripe_orphan_release";

/// Gives back an orphan PaymentIntent: checked again against the payment as it now is (one
/// with an operation pending waits for it), then canceled or refunded at Stripe, and announced
/// to the operator (logged, `payd_stripe_orphans_total`).
async fn release_orphan(
    db: &Db,
    connections: &Connections,
    entity: &str,
    now: DateTime<Utc>,
) -> Outcome {
    let mut parts = entity.splitn(3, '/');
    let (Some(account_id), Some(intent), Some(payment_id)) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Outcome::Done;
    };
    let found = async {
        let account = processor_accounts::find_account(db, account_id).await?;
        let payment = match PaymentId::parse(payment_id) {
            Some(id) => store::find(db, &id).await?,
            None => None,
        };
        Ok::<_, sea_orm::DbErr>((account, payment))
    };
    let (account, payment) = match found.await {
        Ok((Some(a), Some(p))) if a.kind == AccountKind::Stripe && store::of_shop(&p, &a) => (a, p),
        Ok(_) => return Outcome::Done,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    if payment.processor_reference.as_deref() == Some(intent) {
        return Outcome::Done;
    }
    if payment.pending_operation.is_some() {
        return Outcome::RunAt(now + Duration::minutes(1));
    }
    let Some(processor) = connections.resolve(Some(&account)) else {
        return Outcome::Done;
    };
    match processor.release(intent, payment_id).await {
        Ok(Some(action)) => {
            tracing::warn!(account = %account.id, payment_id, payment_intent = intent, action,
                "a PaymentIntent made for a payment that does not hold it was given back");
            metrics::counter!("payd_stripe_orphans_total", "action" => action).increment(1);
            Outcome::Done
        }
        Ok(None) => Outcome::Done,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// The periodic job that reads each Stripe account's events back from Stripe.
pub const CATCH_UP_JOB: &str = "stripe_events_catch_up";
/// How far before where the last catch-up stopped the next one reads again: an event Stripe
/// lists a little late is not skipped (handling one twice changes nothing).
const CATCH_UP_OVERLAP_SECS: i64 = 60;

/// Registers the Stripe jobs: the release of orphan PaymentIntents, and the catch-up of
/// missed events: every `processors.stripe_events_catch_up_secs`,
/// each approved Stripe account's events since the last look are read back from
/// `GET /v1/events` and handled as if Stripe had delivered them, so an event whose delivery
/// failed (payd down for longer than Stripe retries, an endpoint misconfigured) still
/// reaches payd.
pub fn register_jobs(
    scheduler: &mut Scheduler,
    env: &Env<'_>,
    payments: &Payments,
    disputes: &Disputes,
) {
    let every =
        Duration::seconds(env.settings.processors.stripe_events_catch_up_secs.max(1) as i64);
    let (db, connections) = (env.db.clone(), env.connections.clone());
    let (orphan_db, orphan_connections, clock) =
        (db.clone(), connections.clone(), env.clock.clone());
    scheduler.register(ORPHAN_JOB, move |job: Job| {
        let (db, connections, now) = (orphan_db.clone(), orphan_connections.clone(), clock.now());
        async move { release_orphan(&db, &connections, &job.entity_id, now).await }
    });
    let (payments, disputes) = (payments.clone(), disputes.clone());
    scheduler.register_periodic(CATCH_UP_JOB, every, move |now| {
        let (db, connections) = (db.clone(), connections.clone());
        let (payments, disputes) = (payments.clone(), disputes.clone());
        async move { catch_up(&db, &connections, &payments, &disputes, now).await }
    });
}

/// One catch-up over every approved Stripe account. An account whose events cannot be read
/// now, or one of whose events fails, keeps its mark: the next catch-up reads them again.
async fn catch_up(
    db: &Db,
    connections: &Connections,
    payments: &Payments,
    disputes: &Disputes,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    for account in processor_accounts::stripe_accounts(db).await? {
        let Some(processor) = connections.resolve(Some(&account)) else {
            continue;
        };
        // A first look reads from when the account was added, at most a day back.
        let since = match account.events_read_until {
            Some(until) => until - CATCH_UP_OVERLAP_SECS,
            None => account.created_at.max(now - Duration::days(1)).timestamp(),
        };
        let (events, until) = match processor.events_since(since).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(account = %account.id, error = %e, "Stripe's events could not be read back");
                continue;
            }
        };
        let mut failed = false;
        for event in &events {
            if let Err(e) = handle(db, now, payments, disputes, &account, event).await {
                tracing::warn!(account = %account.id, event = %event["id"], error = %e.message,
                    "an event read back from Stripe could not be handled; read again next time");
                failed = true;
                break;
            }
        }
        let mark = until.max(account.events_read_until.unwrap_or(until));
        if !failed && Some(mark) != account.events_read_until {
            processor_accounts::set_events_read_until(db, &account.id, mark, now)
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    Ok(())
}

/// The payment of a PaymentIntent: by the `payd_payment_id` payd put in its metadata, or by
/// the PaymentIntent id payd recorded; only a payment this account served (its merchant, shop
/// and mode, and chosen by its attempt), so an account's events never reach another's.
async fn find_payment(
    db: &crate::commit::Db,
    account: &processor_account::Model,
    intent: &str,
    object: &Value,
) -> Result<Option<payd_entity::payment::Model>, ApiError> {
    let ours = |m: &payd_entity::payment::Model| store::served_by(m, account);
    let named = object["metadata"]["payd_payment_id"].as_str();
    if let Some(id) = named.and_then(PaymentId::parse) {
        if let Some(m) = store::find(db, &id).await?.filter(ours) {
            return Ok(Some(m));
        }
    }
    Ok(store::by_processor_reference(db, account, intent).await?)
}

/// What a payment's `force_sync` reads from Stripe beyond the PaymentIntent it holds, for the
/// shop's approved Stripe accounts in the payment's mode: the disputes Stripe holds against
/// it (`follow_cases`), and PaymentIntents made for it that it does not hold (`find_orphans`).
/// A Stripe that cannot be asked now leaves things as they are (logged), never fails the sync.
pub async fn follow_up(
    state: &AppState,
    payments: &Payments,
    disputes: &Disputes,
    connections: &Connections,
    payment: &payd_entity::payment::Model,
) -> Result<(), ApiError> {
    let accounts: Vec<processor_account::Model> =
        processor_accounts::accounts(&state.db, &payment.profile_id, payment.test_mode)
            .await?
            .into_iter()
            .filter(|a| {
                a.kind == AccountKind::Stripe
                    && a.approval == Approval::Approved
                    && store::of_shop(payment, a)
            })
            .collect();
    let now = clock::wall_now();
    if let Some(account) = accounts.iter().find(|a| store::served_by(payment, a)) {
        follow_cases(
            state,
            payments,
            disputes,
            connections,
            account,
            payment,
            now,
        )
        .await;
    }
    find_orphans(&state.db, connections, &accounts, payment, now).await
}

/// Follows every dispute Stripe holds against the payment the account serves, as Stripe lists
/// them now (`GET /v1/disputes?payment_intent=…`): a dispute whose events were missed is
/// opened and brought up to its status; one that cannot be followed is logged.
async fn follow_cases(
    state: &AppState,
    payments: &Payments,
    disputes: &Disputes,
    connections: &Connections,
    account: &processor_account::Model,
    payment: &payd_entity::payment::Model,
    now: DateTime<Utc>,
) {
    let (Some(intent), Some(processor)) = (
        &payment.processor_reference,
        connections.resolve(Some(account)),
    ) else {
        return;
    };
    let cases = match processor.cases(intent).await {
        Ok(cases) => cases,
        Err(e) => {
            tracing::warn!(payment_id = %payment.id, error = %e, "Stripe's disputes of a payment could not be listed");
            return;
        }
    };
    for case in cases {
        let db = &state.db;
        let followed = follow_dispute(db, payments, disputes, account, &payment.id, &case, now);
        if let Err(e) = followed.await {
            tracing::warn!(payment_id = %payment.id, dispute = %case["id"], error = %e.message,
                "a Stripe dispute listed on a sync could not be followed");
        }
    }
}

/// Looks again for the PaymentIntent of each of the payment's attempts that payd concluded
/// never reached Stripe (`processor_unavailable`, no PaymentIntent named): by its reference, in
/// the window it was sent in, never by sending it again. One found that succeeded or waits for
/// capture, and that the payment does not hold, is an orphan, given back by the orphan job.
async fn find_orphans(
    db: &Db,
    connections: &Connections,
    accounts: &[processor_account::Model],
    payment: &payd_entity::payment::Model,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    use crate::processors::model::ProcessorView::{Authorized, Captured};
    let attempts = store::attempts(db, &payment.id).await?;
    let gave_up = attempts.iter().filter(|a| {
        a.error_code.as_deref() == Some("processor_unavailable")
            && a.processor_reference
                .as_deref()
                .is_some_and(|r| !r.starts_with("pi_"))
    });
    for attempt in gave_up {
        let (Some(account), Some(reference)) = (
            accounts.iter().find(|a| a.name == attempt.processor),
            attempt.processor_reference.as_deref(),
        ) else {
            continue;
        };
        let Some(processor) = connections.resolve(Some(account)) else {
            continue;
        };
        match processor
            .recover(reference, attempt.created_at, None, now)
            .await
        {
            Ok(found) if matches!(found.view, Authorized { .. } | Captured { .. }) => {
                let Some(intent) = found
                    .reference
                    .filter(|pi| payment.processor_reference.as_ref() != Some(pi))
                else {
                    continue;
                };
                let entity = format!("{}/{}/{}", account.id, intent, payment.id);
                store::due_now(db, ORPHAN_JOB, &entity, now)
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(payment_id = %payment.id, reference, error = %e,
                    "an attempt given up on could not be looked for at Stripe");
            }
        }
    }
    Ok(())
}

/// Opens a payd dispute for a Stripe dispute of the payment (once: one Stripe dispute is one
/// payd dispute, and a payment Stripe holds several against has several), then brings it up
/// to the dispute's status as of `created` (the event's, or now for a dispute listed now);
/// whether it did.
async fn follow_dispute(
    db: &crate::commit::Db,
    payments: &Payments,
    disputes: &Disputes,
    account: &processor_account::Model,
    payment_id: &str,
    object: &Value,
    created: DateTime<Utc>,
) -> Result<bool, ApiError> {
    let case_id = object["id"].as_str().unwrap_or_default().to_owned();
    if !crate::processors::stripe::is_dispute_id(&case_id) {
        return Err(
            ApiError::invalid("invalid_event", "a dispute event without a dispute id")
                .param("data.object.id"),
        );
    }
    let stripe_status = object["status"].as_str().unwrap_or("");
    let Some((stage, status, rank)) = dispute_status(stripe_status) else {
        tracing::warn!(account = %account.id, dispute = %case_id, status = stripe_status,
            "a Stripe dispute in a status payd does not know; ignored");
        return Ok(false);
    };
    let at = |field: &Value| {
        field
            .as_i64()
            .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
    };
    let due_by = at(&object["evidence_details"]["due_by"]);
    // In Stripe's units of the dispute's currency (docs.stripe.com/currencies).
    let amount = crate::processors::stripe::units::from_stripe(
        object["amount"].as_i64().unwrap_or(0).max(0),
        object["currency"].as_str().unwrap_or_default(),
    );
    // Invariant: an event acts only on the dispute of the payment it is about (found above
    // among the payments this account served); a case id alone names nothing.
    let dispute = match disputes::store::by_case(db, &case_id).await? {
        Some(d) if d.payment_id == payment_id => d,
        Some(d) => {
            tracing::warn!(account = %account.id, dispute = %d.id, "a Stripe dispute event names a case of another payment; ignored");
            return Ok(false);
        }
        None => {
            let opening = CaseOpening {
                case_id: case_id.clone(),
                stage,
                reason: object["reason"].as_str().unwrap_or("general").to_owned(),
                amount,
                processor: account.name.clone(),
                due_by: due_by.unwrap_or(created + Duration::days(7)),
            };
            let command = Command::ImportCase(opening);
            let done = actor::run(payments, payment_id, None, command, None).await?;
            match done.dispute {
                Some(d) => d,
                // Opened meanwhile by the same event on another instance, or the payment has
                // nothing left to dispute.
                None => match disputes::store::by_case(db, &case_id).await? {
                    Some(d) if d.payment_id == payment_id => d,
                    _ => return Ok(false),
                },
            }
        }
    };
    // Ordered by how far the dispute has come, then by the event's second: two events of the
    // same second still apply in the dispute's own order.
    let followed = Followed {
        case_version: (rank << 40) | created.timestamp().max(0),
        stage,
        status,
        amount,
        note: None,
        due_by: (status == DisputeStatus::Opened)
            .then_some(due_by)
            .flatten(),
    };
    let exec = DisputeExec {
        access: None,
        command: DisputeCommand::Follow(followed),
        timeline: clock::current(),
    };
    disputes.send(&dispute.id, exec).await??;
    Ok(true)
}

/// payd's stage and status of a Stripe dispute status (docs.stripe.com/api/disputes/object,
/// `status`), with how far along the dispute it is: an inquiry (`warning_…`) is a
/// pre-dispute; evidence under review is `challenged`; `prevented` (the issuer stopped the
/// dispute before any money moved) and `charge_refunded` (the charge was refunded, which
/// closes it) end it `cancelled`. A status Stripe adds later is `None`: never read as opened.
fn dispute_status(status: &str) -> Option<(Stage, DisputeStatus, i64)> {
    Some(match status {
        "warning_needs_response" => (Stage::PreDispute, DisputeStatus::Opened, 0),
        "warning_under_review" => (Stage::PreDispute, DisputeStatus::Challenged, 1),
        "warning_closed" => (Stage::PreDispute, DisputeStatus::Cancelled, 4),
        "needs_response" => (Stage::Dispute, DisputeStatus::Opened, 2),
        "under_review" => (Stage::Dispute, DisputeStatus::Challenged, 3),
        "won" => (Stage::Dispute, DisputeStatus::Won, 4),
        "lost" => (Stage::Dispute, DisputeStatus::Lost, 4),
        "prevented" | "charge_refunded" => (Stage::Dispute, DisputeStatus::Cancelled, 4),
        _ => return None,
    })
}
