//! Handlers of the catalog import routes and of the provider accounts; what they do is in
//! `import.rs`.

use actix_web::{web, HttpResponse};

use super::import::{
    self, Applied, ApplyRequest, ImportError, Preview, PreviewRequest, ProviderAccounts,
};
use crate::{auth::SecretKey, error::ApiError, http::ApiJson, state::AppState};

crate::http::routes! {
    "/products/import/preview" => { post: preview_import },
    "/products/import/apply" => { post: apply_import },
    "/products/provider-accounts" => { get: provider_accounts },
}

impl From<ImportError> for ApiError {
    #[track_caller]
    fn from(e: ImportError) -> Self {
        let message = e.to_string();
        match e {
            ImportError::NoSuchAccount => ApiError::not_found("processor account").param("account"),
            ImportError::NoImporter | ImportError::CannotImport(_) => {
                ApiError::invalid_param("account", message)
            }
            ImportError::NoSuchPreview => ApiError::not_found("preview").param("preview_id"),
            ImportError::Stale { .. } => {
                ApiError::conflict("preview_stale", message).param("preview_id")
            }
            ImportError::Held(code) => ApiError::conflict(code, message).param("preview_id"),
            ImportError::Commit(e) => e.into(),
            ImportError::Db(e) => e.into(),
        }
    }
}

/// The processor accounts of the shop and the catalog actions each supports.
#[utoipa::path(get, path = "/products/provider-accounts", tag = "products",
    responses((status = 200, body = ProviderAccounts), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn provider_accounts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let shop = caller.require_shop()?;
    Ok(HttpResponse::Ok().json(import::provider_accounts(&state.db, &caller, shop).await?))
}

/// Preview an import: what it would create, update or archive, by external id.
#[utoipa::path(post, path = "/products/import/preview", tag = "products",
    request_body(content = PreviewRequest, description = "optional"),
    responses((status = 201, body = Preview), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn preview_import(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<PreviewRequest>,
) -> Result<HttpResponse, ApiError> {
    let (shop, max) = (
        caller.require_shop()?,
        state.settings.limits.max_products_per_shop,
    );
    let preview = import::preview(&state.db, &caller, shop, &req, max, state.clock.now()).await?;
    Ok(HttpResponse::Created().json(preview))
}

/// Apply a preview exactly as it was shown. A preview of a catalog that changed since is 409
/// `preview_stale`; applying one twice answers the first apply again and changes nothing.
#[utoipa::path(post, path = "/products/import/apply", tag = "products", request_body = ApplyRequest,
    responses((status = 200, body = Applied), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn apply_import(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<ApplyRequest>,
) -> Result<HttpResponse, ApiError> {
    let max = state.settings.limits.max_products_per_shop;
    let json = import::apply_preview(&state.db, &caller, &req, max, state.clock.now()).await?;
    // Stored as JSON when first applied: answered as stored, byte for byte.
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(json))
}
