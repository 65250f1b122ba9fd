//! `GET /products/{product_id}/sales`.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{
    store,
    tally::{tally, Report},
};
use crate::{
    auth::SecretKey,
    error::ApiError,
    http::{ApiQuery, PathId},
    products,
    state::AppState,
};

crate::http::routes! {
    "/products/{product_id}/sales" => { get: product_sales },
}

/// The window of a sales report.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SalesQuery {
    /// From this time on (RFC 3339), inclusive.
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// Before this time (RFC 3339).
    #[serde(default)]
    pub to: Option<DateTime<Utc>>,
}

/// Units and amounts of a product sold and refunded, in all, per price and per day.
///
/// Sold is the captured share of the product's payment lines, counted on the day of the
/// payment's first capture; refunded is its line refunds that succeeded, counted on the day
/// they did. `from` (inclusive) and `to` (exclusive) bound the window. One currency per
/// report, the default price's: lines in others are left out. Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/products/{product_id}/sales", tag = "products",
    params(("product_id" = String, Path), SalesQuery),
    responses((status = 200, body = Report), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn product_sales(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
    ApiQuery(q): ApiQuery<SalesQuery>,
) -> Result<HttpResponse, ApiError> {
    if let (Some(from), Some(to)) = (q.from, q.to) {
        if from >= to {
            return Err(ApiError::invalid_param("to", "to must be after from"));
        }
    }
    let p = products::catalog::owned(&state.db, &caller.scope(), &id).await?;
    let prices = products::store::prices_of(&state.db, std::slice::from_ref(&p.id)).await?;
    let price_ids: Vec<String> = prices.iter().map(|x| x.id.to_string()).collect();
    // One currency per report: the default price's.
    let currency = p
        .default_price_id
        .as_ref()
        .and_then(|d| prices.iter().find(|x| &x.id == d))
        .or(prices.first())
        .map(|x| x.currency.clone());
    let (sold, refunded) = match &currency {
        Some(c) => store::lines(&state.db, &p.id, &price_ids, c).await?,
        None => (vec![], vec![]),
    };
    Ok(HttpResponse::Ok().json(tally(&p.id, currency, &sold, &refunded, q.from, q.to)))
}
