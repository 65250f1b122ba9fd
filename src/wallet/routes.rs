//! Handlers of the wallet case routes and of the sandbox wallet processor's triggers. Reads go
//! to the processor's records; changes go through `follow`, which moves the case at the
//! processor and then its dispute through the dispute's actor.

use actix_web::{web, HttpResponse};

use super::{
    api::{
        ActionRequest, Actions, AllowedAction, Case, History, HistoryEntry, ImportReport,
        ImportRequest, ListCasesQuery, OpenCaseRequest,
    },
    follow::{self, FollowError, WalletDeps},
    machine::{self, CaseType},
    processor::{self, WalletError},
    store,
};
use crate::{
    auth::{self, SecretKey},
    disputes,
    error::ApiError,
    fields::check_text,
    http::{ApiJson, ApiQuery, PathId},
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/disputes/wallet/cases" => { get: list_cases },
    "/disputes/wallet/import" => { post: import_cases },
    "/disputes/wallet/cases/{case_id}" => { get: retrieve_case },
    "/disputes/wallet/cases/{case_id}/history" => { get: case_history },
    "/disputes/wallet/cases/{case_id}/actions" => { get: case_actions, post: take_action },
    "/sandbox/wallet/cases" => { post: sandbox_open_case },
    "/sandbox/wallet/cases/{case_id}/withdraw" => { post: sandbox_withdraw_case },
    "/sandbox/wallet/cases/{case_id}/escalate" => { post: sandbox_escalate_case },
}

impl From<WalletError> for ApiError {
    #[track_caller]
    fn from(e: WalletError) -> Self {
        match e {
            WalletError::NotFound => ApiError::not_found("case").param("case_id"),
            WalletError::Refused(r @ machine::Refusal::OfferTooLarge { .. }) => {
                ApiError::invalid("amount_exceeds_case", r.to_string()).param("amount")
            }
            WalletError::Refused(r) => ApiError::conflict("invalid_state", r.to_string()),
            WalletError::TooManyEntries => {
                ApiError::limit_reached("case history entries", processor::MAX_ENTRIES)
            }
            WalletError::LostRace => ApiError::concurrent_update("case"),
            WalletError::Conflict(c) => c.into(),
            WalletError::Db(e) => e.into(),
        }
    }
}

impl From<FollowError> for ApiError {
    #[track_caller]
    fn from(e: FollowError) -> Self {
        let message = e.to_string();
        match e {
            FollowError::NoSuchPayment => ApiError::no_such::<crate::ids::PaymentId>(),
            FollowError::NoSuchFile => ApiError::not_found("file").param("file_ids"),
            FollowError::NoSuchListedCase(_) => ApiError::not_found("case").param("case_ids"),
            FollowError::NothingToDispute => {
                ApiError::conflict("nothing_to_dispute", message).param("payment_id")
            }
            FollowError::ExceedsDisputable { .. } => {
                ApiError::invalid("amount_exceeds_disputable", message).param("amount")
            }
            FollowError::CaseExists(_) => {
                ApiError::conflict("case_exists", message).param("payment_id")
            }
            FollowError::AlreadyDisputed => {
                ApiError::conflict("already_disputed", message).param("payment_id")
            }
            FollowError::Case(e) => e.into(),
            FollowError::Payment(e) => e.into(),
            FollowError::Dispute(e) => e.into(),
            FollowError::Unanswered(e) => e.into(),
            FollowError::Db(e) => e.into(),
        }
    }
}

/// The case as shown, with the dispute that follows it.
async fn render(state: &AppState, c: &payd_entity::wallet_case::Model) -> Result<Case, ApiError> {
    let dispute = disputes::store::by_case(&state.db, &c.id).await?;
    Ok(Case::render(c, dispute.map(|d| d.id.into())))
}

/// List the wallet processor's cases against the caller's payments, newest first.
///
/// The cases of the key's merchant and mode, within the key's shop or the `profile_id` asked
/// for, filtered by payment, status, case type and creation time, each with the dispute that
/// follows it once imported. Read only; needs a secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/wallet/cases", tag = "wallet cases", params(ListCasesQuery),
    responses((status = 200, body = List<Case>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_cases(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListCasesQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::CaseId>(&q.page_query())?;
    q.check_filters()?;
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
    let ids: Vec<String> = list.data.iter().map(|c| c.id.clone()).collect();
    let followed = disputes::store::by_cases(&state.db, &ids).await?;
    Ok(HttpResponse::Ok().json(list.map(|c| {
        let dispute = followed
            .iter()
            .find(|d| d.case_id.as_deref() == Some(c.id.as_str()));
        Case::render(&c, dispute.map(|d| d.id.to_string()))
    })))
}

/// Import the wallet processor's cases: open or update the dispute that follows each.
///
/// Every case of the caller's scope by default (a page at a time: `has_more`, `last_case_id`),
/// or those `case_ids` names. Each case's dispute is opened through its payment's actor at the
/// case's stage, or brought up to the case's status. Importing again changes nothing and
/// announces nothing. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `dispute_opened`, `dispute_challenged`, `dispute_won`, `dispute_lost`, `dispute_accepted`, `dispute_cancelled`.
#[utoipa::path(post, path = "/disputes/wallet/import", tag = "wallet cases",
    request_body(content = ImportRequest, description = "optional: every case of the caller's scope by default"),
    responses((status = 200, body = ImportReport), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn import_cases(
    SecretKey(caller): SecretKey,
    wallet: web::Data<WalletDeps>,
    ApiJson(req): ApiJson<ImportRequest>,
) -> Result<HttpResponse, ApiError> {
    let scope = caller.scope();
    let shop = scope.list_shop(req.profile_id.as_deref())?;
    let report = follow::import(&wallet, &scope, shop.as_deref(), &req.parse()?).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// Retrieve a case.
///
/// The case at the wallet processor, with the dispute that follows it once imported. Read
/// only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/wallet/cases/{case_id}", tag = "wallet cases",
    params(("case_id" = String, Path)),
    responses((status = 200, body = Case), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_case(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
) -> Result<HttpResponse, ApiError> {
    let c = follow::owned(&wallet, &caller.scope(), &id).await?;
    Ok(HttpResponse::Ok().json(render(&state, &c).await?))
}

/// A case's history, oldest first.
///
/// Status changes, messages, offers and evidence, and who did each. Read only; needs a secret
/// key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/wallet/cases/{case_id}/history", tag = "wallet cases",
    params(("case_id" = String, Path)),
    responses((status = 200, body = History), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn case_history(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
) -> Result<HttpResponse, ApiError> {
    let c = follow::owned(&wallet, &caller.scope(), &id).await?;
    let data = store::history(&state.db, &c.id)
        .await?
        .iter()
        .map(HistoryEntry::render)
        .collect::<Result<_, _>>()?;
    Ok(HttpResponse::Ok().json(History {
        data,
        has_more: false,
    }))
}

/// The actions the case allows now, from its status and stage.
///
/// Each action the seller may take now, with the fields it requires and takes. Read only;
/// needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/disputes/wallet/cases/{case_id}/actions", tag = "wallet cases",
    params(("case_id" = String, Path)),
    responses((status = 200, body = Actions), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn case_actions(
    SecretKey(caller): SecretKey,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
) -> Result<HttpResponse, ApiError> {
    let c = follow::owned(&wallet, &caller.scope(), &id).await?;
    let data = machine::allowed(&store::case_of(&c))
        .into_iter()
        .map(AllowedAction::of)
        .collect();
    Ok(HttpResponse::Ok().json(Actions {
        case_id: c.id,
        case_type: c.case_type.to_string(),
        status: c.status.to_string(),
        data,
    }))
}

/// Take an action on a case; one the case does not allow now is 409 naming its status.
///
/// The seller's action (accept the claim, make an offer, provide evidence, send a message,
/// appeal, escalate, acknowledge a return) moves the case at the processor; its dispute is
/// then opened if the case was not imported yet, and follows the case. The processor's review
/// decides the case later, asynchronously, and the dispute follows. Evidence files must be the
/// merchant's; a case holds a bounded number of history entries. Needs a secret key.
///
/// Fails: `amount_not_positive` (400), `amount_too_large` (400), `amount_exceeds_case` (400), `resource_missing` (404), `invalid_state` (409), `limit_reached` (409), `concurrent_update` (409).
///
/// Events: `dispute_opened`, `dispute_challenged`, `dispute_accepted`, `dispute_won`, `dispute_lost`.
#[utoipa::path(post, path = "/disputes/wallet/cases/{case_id}/actions", tag = "wallet cases",
    params(("case_id" = String, Path)), request_body = ActionRequest,
    responses((status = 200, body = Case), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn take_action(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
    ApiJson(req): ApiJson<ActionRequest>,
) -> Result<HttpResponse, ApiError> {
    let req = req.parse(state.settings.limits.max_amount)?;
    let (c, dispute) = follow::act(&wallet, &caller.scope(), &id, req).await?;
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id.into()))))
}

/// Sandbox: the buyer opens a case at the wallet processor against a captured payment.
///
/// An `INQUIRY` or a `CHARGEBACK` for `amount` (by default all that is captured and not
/// refunded), one case per payment, and none on a payment disputed otherwise. No dispute is
/// opened until the case is imported or acted on. Only a test key of a sandbox deployment: 404
/// otherwise.
///
/// Fails: `amount_exceeds_disputable` (400), `resource_missing` (404), `nothing_to_dispute` (409), `case_exists` (409), `already_disputed` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/sandbox/wallet/cases", tag = "sandbox", request_body = OpenCaseRequest,
    responses((status = 201, body = Case), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_open_case(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    ApiJson(req): ApiJson<OpenCaseRequest>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let case_type = match CaseType::parse(&req.case_type) {
        Some(t @ (CaseType::Inquiry | CaseType::Chargeback)) => t,
        _ => {
            return Err(ApiError::invalid_param(
                "case_type",
                format!(
                    "unknown case_type {:?}; INQUIRY or CHARGEBACK",
                    req.case_type
                ),
            ))
        }
    };
    let reason = check_text("reason", Some(&req.reason), 500)?.unwrap_or_default();
    if reason.trim().is_empty() {
        return Err(ApiError::invalid_param(
            "reason",
            "reason must not be empty",
        ));
    }
    let c = follow::open(
        &wallet,
        &caller.scope(),
        &req.payment_id,
        case_type,
        reason,
        req.amount,
    )
    .await?;
    Ok(HttpResponse::Created().json(Case::render(&c, None)))
}

/// Sandbox: the buyer withdraws a case (its dispute ends `cancelled`).
///
/// The case is resolved as withdrawn; the dispute of an imported case follows it. Only a test
/// key of a sandbox deployment: 404 otherwise.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `dispute_cancelled`.
#[utoipa::path(post, path = "/sandbox/wallet/cases/{case_id}/withdraw", tag = "sandbox",
    params(("case_id" = String, Path)),
    responses((status = 200, body = Case), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_withdraw_case(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let (c, dispute) = follow::buyer(&wallet, &caller.scope(), &id, false).await?;
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id.into()))))
}

/// Sandbox: the buyer escalates a case to its next stage.
///
/// The dispute of an imported case moves to the later stage, announced again with its status's
/// event. Only a test key of a sandbox deployment: 404 otherwise.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `dispute_opened`, `dispute_challenged`.
#[utoipa::path(post, path = "/sandbox/wallet/cases/{case_id}/escalate", tag = "sandbox",
    params(("case_id" = String, Path)),
    responses((status = 200, body = Case), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_escalate_case(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    wallet: web::Data<WalletDeps>,
    PathId(id): PathId<crate::ids::CaseId>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let (c, dispute) = follow::buyer(&wallet, &caller.scope(), &id, true).await?;
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id.into()))))
}
