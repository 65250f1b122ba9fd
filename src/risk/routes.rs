//! A shop's risk: the operator assesses it on demand; the merchant reads its records.

use actix_web::{web, HttpResponse};

use super::{
    api::{AssessRequest, RiskRecord, ShopRisk},
    assess::{Assessor, Trigger},
    store,
};
use crate::{
    auth::{Admin, ShopKey},
    error::ApiError,
    http::{ApiJson, ApiQuery, PathId},
    ids::ProfileId,
    pagination::{ListQuery, Page},
    settings::DeploymentMode,
    state::AppState,
};

crate::http::routes! {
    "/admin/shops/{profile_id}/risk/assess" => { post: assess_shop },
    "/account/shops/{profile_id}/risk" => { get: shop_risk },
}

/// Assess a shop's risk now (the operator).
///
/// Writes an assessment as the next record of the shop's chain, in the mode `test_mode` names
/// (by default test on a sandbox deployment, live otherwise), and answers it.
/// `shop_risk_band_escalated` is sent when its band rose from the previous assessment's. Needs
/// the admin key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `shop_risk_band_escalated`.
#[utoipa::path(post, path = "/admin/shops/{profile_id}/risk/assess", tag = "admin",
    params(("profile_id" = String, Path)), request_body(content = AssessRequest, description = "optional"),
    responses((status = 200, body = RiskRecord), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn assess_shop(
    _: Admin,
    state: web::Data<AppState>,
    assessor: web::Data<Assessor>,
    PathId(id): PathId<ProfileId>,
    ApiJson(req): ApiJson<AssessRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = store::shop(&state.db, &id)
        .await?
        .ok_or_else(ApiError::no_such::<ProfileId>)?;
    let test_mode = req
        .test_mode
        .unwrap_or(state.settings.mode == DeploymentMode::Sandbox);
    let row = assessor.assess(&shop, test_mode, Trigger::Operator).await?;
    Ok(HttpResponse::Ok().json(RiskRecord::render(&row)))
}

/// A shop's risk in the key's mode: its band, its latest assessment and its history.
///
/// The band of the latest assessment (`low` before any), that assessment, and a page of the
/// shop's assessments, newest first. Read only; needs a secret key that reaches the shop.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/risk", tag = "account",
    params(("profile_id" = String, Path), ListQuery),
    responses((status = 200, body = ShopRisk), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn shop_risk(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::RiskAssessmentId>(&q)?;
    let test_mode = caller.test_mode();
    let latest = store::latest(&state.db, shop.as_str(), test_mode).await?;
    let history = store::list(&state.db, shop.as_str(), test_mode, &page).await?;
    Ok(HttpResponse::Ok().json(ShopRisk {
        profile_id: shop.into_string(),
        band: latest
            .as_ref()
            .map_or("low", |l| l.band.as_str())
            .to_owned(),
        latest: latest.as_ref().map(RiskRecord::render),
        history: history.map(|m| RiskRecord::render(&m)),
    }))
}
