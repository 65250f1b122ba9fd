//! Handlers of the dispute routes. Changes go through the dispute's actor; reads go to the
//! store.

use actix_web::{web, HttpResponse};

use super::{
    actor::{Access, Command, DisputeError, Disputes, Done, Exec},
    api::{
        AttachEvidenceRequest, Dispute, Evidence, EvidenceList, EvidenceType, ListDisputesQuery,
        RemoveEvidenceRequest, RemovedEvidence, SubmitEvidenceRequest,
    },
    machine::{Refusal, Stage, Status},
    store,
};
use crate::{
    auth::{Caller, SecretKey},
    error::ApiError,
    fields::{check_text, parse_id},
    http::{ApiJson, ApiQuery, PathId},
    ids::DisputeId,
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/disputes/list" => { get: list_disputes },
    "/disputes/evidence" => { put: attach_evidence, delete: remove_evidence, post: submit_evidence },
    "/disputes/evidence/{dispute_id}" => { get: list_evidence },
    "/disputes/accept/{dispute_id}" => { post: accept_dispute },
    "/disputes/{dispute_id}" => { get: retrieve_dispute },
}

impl From<DisputeError> for ApiError {
    #[track_caller]
    fn from(e: DisputeError) -> Self {
        match e {
            DisputeError::NotFound => ApiError::not_found("dispute").param("dispute_id"),
            DisputeError::FileNotFound => ApiError::not_found("file").param("file_id"),
            DisputeError::EvidenceNotFound => ApiError::not_found("evidence").param("file_id"),
            DisputeError::TooMuchEvidence => {
                ApiError::invalid("evidence_limit", e.to_string()).param("file_id")
            }
            DisputeError::Refused(r @ Refusal::InvalidState(_)) => {
                ApiError::conflict("invalid_state", r.to_string())
            }
            DisputeError::Refused(r @ Refusal::FollowsCase(_)) => {
                ApiError::conflict("wallet_case", r.to_string())
            }
            DisputeError::Refused(r @ Refusal::FilesAtProcessor(_)) => {
                ApiError::invalid("processor_unsupported", r.to_string()).param("file_id")
            }
            DisputeError::Processor(p) => ApiError::processor(p.to_string()),
            DisputeError::Refused(r @ Refusal::NoEvidence) => {
                ApiError::invalid("evidence_required", r.to_string()).param("explanation")
            }
            DisputeError::LostRace => ApiError::concurrent_update("dispute"),
            DisputeError::Conflict(c) => c.into(),
            DisputeError::Db(e) => e.into(),
        }
    }
}

/// Runs a command through the dispute's actor, as this caller.
async fn exec(
    disputes: &Disputes,
    caller: &Caller,
    id: &DisputeId,
    command: Command,
) -> Result<Done, ApiError> {
    let access = Access {
        scope: caller.scope(),
    };
    Ok(disputes
        .send(
            id,
            Exec {
                access: Some(access),
                command,
                timeline: crate::clock::current(),
            },
        )
        .await??)
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &DisputeId,
) -> Result<payd_entity::dispute::Model, ApiError> {
    crate::owned::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(|| ApiError::not_found("dispute").param("dispute_id"))
}

/// List disputes, newest first.
///
/// The disputes of the key's merchant and mode, within the key's shop or the `profile_id`
/// asked for, filtered by payment, status, stage and creation time. Read only; needs a secret
/// key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/list", tag = "disputes", params(ListDisputesQuery),
    responses((status = 200, body = List<Dispute>)), security(("api_key" = [])))]
pub async fn list_disputes(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListDisputesQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::DisputeId>(&q.page_query())?;
    if let Some(s) = q.status.as_deref().filter(|s| Status::parse(s).is_none()) {
        return Err(ApiError::invalid_param(
            "status",
            format!("unknown status {s:?}"),
        ));
    }
    if let Some(s) = q.stage.as_deref().filter(|s| Stage::parse(s).is_none()) {
        return Err(ApiError::invalid_param(
            "stage",
            format!("unknown stage {s:?}"),
        ));
    }
    let shop = caller.scope().list_shop(q.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(|d| Dispute::render(&d))))
}

/// Retrieve a dispute.
///
/// The dispute as stored: its status, stage, amount, reason and evidence deadline. Read only;
/// needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/{dispute_id}", tag = "disputes",
    params(("dispute_id" = String, Path)),
    responses((status = 200, body = Dispute), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_dispute(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::DisputeId>,
) -> Result<HttpResponse, ApiError> {
    let d = owned(&state, &caller, &id).await?;
    Ok(HttpResponse::Ok().json(Dispute::render(&d)))
}

/// Accept a dispute: the buyer keeps the disputed amount.
///
/// Moves an `opened` dispute to `accepted`, which takes its amount from the shop's available
/// balance and from what the payment can still refund. A dispute that follows a wallet case is
/// acted on through the case instead; Stripe's own dispute is closed at Stripe first. Needs a
/// secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `wallet_case` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `dispute_accepted`.
#[utoipa::path(post, path = "/disputes/accept/{dispute_id}", tag = "disputes",
    params(("dispute_id" = String, Path)),
    responses((status = 200, body = Dispute), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody), (status = 502, description = "Stripe, which holds the dispute, did not take the answer", body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn accept_dispute(
    SecretKey(caller): SecretKey,
    disputes: web::Data<Disputes>,
    PathId(id): PathId<crate::ids::DisputeId>,
) -> Result<HttpResponse, ApiError> {
    let done = exec(&disputes, &caller, &id, Command::Accept).await?;
    Ok(HttpResponse::Ok().json(Dispute::render(&done.dispute)))
}

/// Attach an uploaded file to a dispute as evidence (again: changes its type).
///
/// Adds one of the merchant's files (`POST /files`) to an `opened` dispute's evidence with its
/// `evidence_type`; a dispute holds a bounded number of files. The dispute's status stays. A
/// dispute that follows a wallet case takes evidence through the case; Stripe's own dispute
/// takes none here (its explanation is submitted; files go in Stripe's Dashboard). Needs a
/// secret key.
///
/// Fails: `evidence_limit` (400), `processor_unsupported` (400), `resource_missing` (404), `invalid_state` (409), `wallet_case` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(put, path = "/disputes/evidence", tag = "disputes", request_body = AttachEvidenceRequest,
    responses((status = 200, body = Evidence), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn attach_evidence(
    SecretKey(caller): SecretKey,
    disputes: web::Data<Disputes>,
    ApiJson(req): ApiJson<AttachEvidenceRequest>,
) -> Result<HttpResponse, ApiError> {
    let evidence_type = match req.evidence_type.as_deref() {
        None => EvidenceType::Uncategorized,
        Some(t) => EvidenceType::parse(t).ok_or_else(|| {
            let all = EvidenceType::ALL.map(EvidenceType::as_str).join(", ");
            ApiError::invalid_param(
                "evidence_type",
                format!("unknown evidence_type {t:?}; one of {all}"),
            )
        })?,
    };
    if crate::ids::FileId::parse(&req.file_id).is_none() {
        return Err(ApiError::not_found("file").param("file_id"));
    }
    let command = Command::Attach {
        file_id: req.file_id,
        evidence_type,
    };
    let done = exec(&disputes, &caller, &parse_id(&req.dispute_id)?, command).await?;
    let (e, f) = done
        .attached
        .ok_or_else(|| ApiError::internal("attach made no evidence"))?;
    Ok(HttpResponse::Ok().json(Evidence::render(&e, &f)))
}

/// The evidence attached to a dispute.
///
/// Each file attached, with its evidence type. Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/evidence/{dispute_id}", tag = "disputes",
    params(("dispute_id" = String, Path)),
    responses((status = 200, body = EvidenceList), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_evidence(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::DisputeId>,
) -> Result<HttpResponse, ApiError> {
    let d = owned(&state, &caller, &id).await?;
    let data = store::evidence(&state.db, &d.id)
        .await?
        .iter()
        .map(|(e, f)| Evidence::render(e, f))
        .collect();
    Ok(HttpResponse::Ok().json(EvidenceList {
        data,
        has_more: false,
    }))
}

/// Remove a file from a dispute's evidence (the file itself stays).
///
/// Only while the dispute is `opened`; its status stays. Needs a secret key.
///
/// Fails: `processor_unsupported` (400), `resource_missing` (404), `invalid_state` (409), `wallet_case` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(delete, path = "/disputes/evidence", tag = "disputes", request_body = RemoveEvidenceRequest,
    responses((status = 200, body = RemovedEvidence), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn remove_evidence(
    SecretKey(caller): SecretKey,
    disputes: web::Data<Disputes>,
    ApiJson(req): ApiJson<RemoveEvidenceRequest>,
) -> Result<HttpResponse, ApiError> {
    let command = Command::Remove {
        file_id: req.file_id.clone(),
    };
    exec(&disputes, &caller, &parse_id(&req.dispute_id)?, command).await?;
    Ok(HttpResponse::Ok().json(RemovedEvidence {
        dispute_id: req.dispute_id,
        file_id: req.file_id,
        deleted: true,
    }))
}

/// Submit the attached evidence and an explanation: the dispute becomes `challenged`.
///
/// Once, from `opened`, with at least one file attached or an explanation. The processor
/// decides later, asynchronously: `won` or `lost`. A dispute that follows a wallet case is
/// answered through the case; Stripe's own dispute takes the explanation as its
/// `evidence[uncategorized_text]`, submitted at Stripe first. Needs a secret key.
///
/// Fails: `evidence_required` (400), `resource_missing` (404), `invalid_state` (409), `wallet_case` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `dispute_challenged`, `dispute_won`, `dispute_lost`.
#[utoipa::path(post, path = "/disputes/evidence", tag = "disputes", request_body = SubmitEvidenceRequest,
    responses((status = 200, body = Dispute), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody),
        (status = 502, description = "Stripe, which holds the dispute, did not take the answer", body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn submit_evidence(
    SecretKey(caller): SecretKey,
    disputes: web::Data<Disputes>,
    ApiJson(req): ApiJson<SubmitEvidenceRequest>,
) -> Result<HttpResponse, ApiError> {
    check_text("explanation", req.explanation.as_ref(), 20_000)?;
    let command = Command::Submit {
        explanation: req.explanation,
    };
    let done = exec(&disputes, &caller, &parse_id(&req.dispute_id)?, command).await?;
    Ok(HttpResponse::Ok().json(Dispute::render(&done.dispute)))
}
