//! A shop's balance and its ledger entries.

use actix_web::{web, HttpResponse};

use super::{
    api::{Balance, BalanceTransaction, ListTransactionsQuery},
    machine::Kind,
    store,
};
use crate::{
    auth::ShopKey,
    error::ApiError,
    http::ApiQuery,
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/account/shops/{profile_id}/balance" => { get: get_balance },
    "/account/shops/{profile_id}/balance-transactions" => { get: list_balance_transactions },
}

/// A shop's balance per currency in the key's mode.
///
/// `available` (what payouts can take) and `pending` (what payouts hold), each the sum of the
/// shop's ledger entries; refunds can take `available` below zero. Read only; needs a secret
/// key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/balance", tag = "payouts",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Balance), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn get_balance(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let sums = store::balances(&state.db, shop.as_str(), caller.test_mode()).await?;
    Ok(HttpResponse::Ok().json(Balance::of(shop.as_str(), caller.test_mode(), sums)))
}

/// A shop's ledger entries, newest first.
///
/// The immutable entries the balance is the sum of (`capture`, `refund`, `payout` …), filtered
/// by `type`, `source_id`, currency and creation time. Read only; needs a secret key that
/// reaches the shop.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/balance-transactions", tag = "payouts",
    params(("profile_id" = String, Path), ListTransactionsQuery),
    responses((status = 200, body = List<BalanceTransaction>), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_balance_transactions(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListTransactionsQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::BalanceTransactionId>(&q.page_query())?;
    if let Some(k) = q.kind.as_deref().filter(|k| Kind::parse(k).is_none()) {
        return Err(ApiError::invalid_param(
            "type",
            format!("unknown type {k:?}"),
        ));
    }
    let list = store::list(&state.db, shop.as_str(), caller.test_mode(), &q, &page).await?;
    Ok(HttpResponse::Ok().json(list.map(|m| BalanceTransaction::render(&m))))
}
