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
    Ok(Case::render(c, dispute.map(|d| d.id)))
}

/// List the wallet processor's cases against the caller's payments, newest first.
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
        Case::render(&c, dispute.map(|d| d.id.clone()))
    })))
}

/// Import the wallet processor's cases: open or update the dispute that follows each.
/// Importing again changes nothing and announces nothing.
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

/// A case's history, oldest first: status changes, messages, offers, evidence, and who did
/// each.
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
        case_type: c.case_type,
        status: c.status,
        data,
    }))
}

/// Take an action on a case; one the case does not allow now is 409 naming its status.
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
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id))))
}

/// Sandbox: the buyer opens a case at the wallet processor against a captured payment.
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
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id))))
}

/// Sandbox: the buyer escalates a case to its next stage.
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
    Ok(HttpResponse::Ok().json(Case::render(&c, dispute.map(|d| d.id))))
}
