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
            ImportError::Held(c) => {
                let mut held = ApiError::from(c).param("preview_id");
                held.message = message;
                held
            }
            ImportError::Commit(e) => e.into(),
            ImportError::Db(e) => e.into(),
        }
    }
}

/// The processor accounts of the shop and the catalog actions each supports.
///
/// Lists, for the request's shop, the sandbox catalog processor (`sandbox_catalog`, which
/// supports `import`) in test mode, then the shop's payment processor accounts, which support
/// no catalog actions. Needs a secret key and a shop (`x-profile-id` or a shop-bound key).
///
/// Fails: `shop_required` (400).
///
/// Events: none.
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
///
/// Compares the shop's catalog with the processor account's (`account`, by default the shop's
/// account that supports import), matching products by `external_id`, and keeps the plan under
/// a `preview_id`. A preview changes nothing in the catalog; an account that cannot import is
/// refused by name. Needs a secret key and a shop.
///
/// Fails: `shop_required` (400), `resource_missing` (404).
///
/// Events: none.
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

/// Apply a preview exactly as it was shown.
///
/// Applies the preview's creates, updates and archives in one commit. A preview of a catalog
/// that changed since is refused with `preview_stale`: preview again. One that would archive a
/// product or price that a bundle or an add-on group holds is refused whole. Applying a
/// preview twice, also at the same time, answers the first apply again and changes nothing.
/// Needs a secret key.
///
/// Fails: `resource_missing` (404), `preview_stale` (409), `product_in_use` (409), `price_in_use` (409).
///
/// Events: none.
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
