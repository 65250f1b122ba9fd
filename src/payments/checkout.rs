//! The hosted checkout: a server-rendered page where the buyer enters a card, retries after a
//! decline, passes a 3-D Secure challenge and sees the outcome. The payment's `client_secret`
//! is the buyer's only credential, and it opens that one payment and nothing else.

use actix_web::{web, HttpResponse};
use payd_entity::payment;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    actor::{run, Access, Command, Payments},
    api::{LastError, Payment},
    store,
};
use crate::{
    auth::keys::Scope,
    error::ApiError,
    fields::display_amount,
    http::{html, ApiJson, ApiQuery, PathId},
    processors::{card::parse_card, CardInput, SecretCard},
    state::AppState,
};

/// The checkout page.
#[derive(askama::Template)]
#[template(path = "checkout.html", config = "src/templates/askama.toml")]
struct CheckoutPage<'a> {
    shop_name: &'a str,
    description: Option<&'a str>,
    amount: i64,
    display_amount: String,
    currency: &'a str,
    payment_id: &'a str,
    client_secret: &'a str,
    /// What the page's script starts from (as `GET …/status` answers).
    status: CheckoutStatus,
}

/// The sandbox 3-D Secure challenge page.
#[derive(askama::Template)]
#[template(path = "challenge.html", config = "src/templates/askama.toml")]
struct ChallengePage<'a> {
    /// Whether the payment waits for the challenge (only then are its answers offered).
    waiting: bool,
    /// The payment's status, in words.
    status: String,
    display_amount: String,
    currency: &'a str,
    payment_id: &'a str,
    client_secret: &'a str,
}

crate::http::routes! {
    "/checkout/{payment_id}" => { get: page },
    "/checkout/{payment_id}/status" => { get: status },
    "/checkout/{payment_id}/confirm" => { post: confirm },
    "/checkout/{payment_id}/challenge" => { get: challenge_page, post: complete_challenge },
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SecretQuery {
    pub client_secret: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutConfirmRequest {
    pub client_secret: String,
    pub card: CardInput,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChallengeResult {
    Approve,
    Reject,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChallengeRequest {
    pub client_secret: String,
    pub result: ChallengeResult,
}

/// What the buyer's page sees of a payment.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckoutStatus {
    pub payment_id: String,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub test_mode: bool,
    pub last_error: Option<LastError>,
    /// Where to send the buyer next (the challenge page), if anywhere.
    pub next_action_url: Option<String>,
    pub return_url: Option<String>,
}

impl CheckoutStatus {
    fn of(m: &payment::Model, public_url: &str) -> Result<Self, sea_orm::DbErr> {
        let p = Payment::render(m, public_url)?;
        Ok(Self {
            next_action_url: (p.status == "requires_customer_action")
                .then(|| super::api::challenge_path(&p.payment_id, &p.client_secret)),
            payment_id: p.payment_id,
            status: p.status,
            amount: p.amount,
            currency: p.currency,
            test_mode: p.test_mode,
            last_error: p.last_error,
            return_url: p.return_url,
        })
    }
}

/// The payment behind a client_secret; any mismatch reads as "no such payment".
async fn by_secret(state: &AppState, id: &str, secret: &str) -> Result<payment::Model, ApiError> {
    let not_found = ApiError::no_such::<crate::ids::PaymentId>;
    let m = store::find(&state.db, id).await?.ok_or_else(not_found)?;
    if !super::actor::same_secret(&m.client_secret, secret) {
        return Err(not_found());
    }
    Ok(m)
}

/// Runs the buyer's command and answers with the checkout status.
async fn as_buyer(
    state: &AppState,
    payments: &Payments,
    m: &payment::Model,
    client_secret: String,
    command: Command,
) -> Result<HttpResponse, ApiError> {
    let m = run(
        payments,
        &m.id,
        Some(buyer(m, client_secret)),
        command,
        None,
    )
    .await?
    .payment;
    Ok(HttpResponse::Ok().json(CheckoutStatus::of(&m, &state.public_url)?))
}

fn buyer(m: &payment::Model, secret: String) -> Access {
    Access {
        scope: Scope {
            merchant_id: m.merchant_id.clone(),
            test_mode: m.test_mode,
            profile_id: Some(m.profile_id.clone()),
        },
        client_secret: Some(secret),
    }
}

/// The checkout page.
#[utoipa::path(get, path = "/checkout/{payment_id}", tag = "checkout",
    params(("payment_id" = String, Path), SecretQuery),
    responses((status = 200, description = "the hosted checkout page", content_type = "text/html")))]
pub async fn page(
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<SecretQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    let status = CheckoutStatus::of(&m, &state.public_url)?;
    // The buyer sees whom they pay, and for what.
    let shop = match (
        crate::ids::MerchantId::parse(&m.merchant_id),
        crate::ids::ProfileId::parse(&m.profile_id),
    ) {
        (Some(merchant), Some(profile)) => {
            crate::auth::store::find_profile(&state.db, &merchant, &profile).await?
        }
        _ => None,
    };
    html(&CheckoutPage {
        shop_name: shop.as_ref().map_or("", |p| p.name.as_str()),
        description: m.description.as_deref(),
        amount: m.amount,
        display_amount: display_amount(m.amount, &m.currency),
        currency: &m.currency,
        payment_id: &m.id,
        client_secret: &m.client_secret,
        status,
    })
}

/// The payment's status as the buyer's page sees it.
#[utoipa::path(get, path = "/checkout/{payment_id}/status", tag = "checkout",
    params(("payment_id" = String, Path), SecretQuery),
    responses((status = 200, body = CheckoutStatus)))]
pub async fn status(
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<SecretQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    Ok(HttpResponse::Ok().json(CheckoutStatus::of(&m, &state.public_url)?))
}

/// The buyer pays with a card.
#[utoipa::path(post, path = "/checkout/{payment_id}/confirm", tag = "checkout",
    params(("payment_id" = String, Path)), request_body = CheckoutConfirmRequest,
    responses((status = 200, body = CheckoutStatus), (status = 400, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)))]
pub async fn confirm(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<CheckoutConfirmRequest>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &req.client_secret).await?;
    let card = parse_card(
        &req.card,
        "card",
        state.clock.now(),
        &state.settings.security.key_pepper,
        &m.merchant_id,
        m.test_mode,
    )?;
    let command = Command::Confirm {
        card: Some(card),
        secret: Some(SecretCard::from(&req.card)),
        return_url: None,
    };
    as_buyer(&state, &payments, &m, req.client_secret, command).await
}

/// The sandbox 3-D Secure challenge page.
#[utoipa::path(get, path = "/checkout/{payment_id}/challenge", tag = "checkout",
    params(("payment_id" = String, Path), SecretQuery),
    responses((status = 200, description = "the challenge page", content_type = "text/html")))]
pub async fn challenge_page(
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<SecretQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    html(&ChallengePage {
        waiting: m.status == super::machine::Status::RequiresCustomerAction.as_str(),
        status: m.status.replace('_', " "),
        display_amount: display_amount(m.amount, &m.currency),
        currency: &m.currency,
        payment_id: &m.id,
        client_secret: &m.client_secret,
    })
}

/// The buyer passes or fails the challenge.
#[utoipa::path(post, path = "/checkout/{payment_id}/challenge", tag = "checkout",
    params(("payment_id" = String, Path)), request_body = ChallengeRequest,
    responses((status = 200, body = CheckoutStatus), (status = 409, body = crate::error::ErrorBody)))]
pub async fn complete_challenge(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<ChallengeRequest>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &req.client_secret).await?;
    let command = Command::CompleteChallenge {
        approve: req.result == ChallengeResult::Approve,
    };
    as_buyer(&state, &payments, &m, req.client_secret, command).await
}

#[cfg(test)]
mod tests {
    use askama::Template;

    use super::*;

    /// Each value is escaped for where it lands: text in the page, a string the script reads,
    /// a link's query. A value that closes the script, quotes or tags changes none of them.
    #[test]
    fn the_pages_escape_each_value_for_its_place() {
        let hostile = "x\"</script><script>alert(1)</script>&'";
        let status = CheckoutStatus {
            payment_id: "pay_1".into(),
            status: "declined".into(),
            amount: 100,
            currency: "EUR".into(),
            test_mode: true,
            last_error: None,
            next_action_url: None,
            return_url: Some(hostile.into()),
        };
        let page = CheckoutPage {
            shop_name: hostile,
            description: Some(hostile),
            amount: 100,
            display_amount: "1.00".into(),
            currency: "EUR",
            payment_id: "pay_1",
            client_secret: hostile,
            status,
        }
        .render()
        .unwrap();
        assert_eq!(page.matches("<script>").count(), 1, "{page}");
        assert_eq!(page.matches("</script>").count(), 1, "{page}");
        assert!(
            page.contains("<p id=\"description\">x&#34;&#60;/script&#62;"),
            "{page}"
        );
        assert!(
            page.contains(r#"var secret = "x\"\u003c/script\u003e\u003cscript\u003ealert(1)"#),
            "{page}"
        );
        let challenge = ChallengePage {
            waiting: false,
            status: "succeeded".into(),
            display_amount: "1.00".into(),
            currency: "EUR",
            payment_id: "pay_1",
            client_secret: "a&b c",
        }
        .render()
        .unwrap();
        assert!(
            challenge.contains("href=\"/checkout/pay_1?client_secret=a%26b%20c\""),
            "{challenge}"
        );
        assert!(!challenge.contains("id=\"approve\""), "{challenge}");
    }
}
