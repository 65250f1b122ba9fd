//! The hosted checkout: a server-rendered page where the buyer enters a card, retries after a
//! decline, passes a 3-D Secure challenge and sees the outcome. The payment's `client_secret`
//! is the buyer's only credential, and it opens that one payment and nothing else.

use actix_web::{http::header, web, HttpRequest, HttpResponse};
use payd_entity::payment;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    actor::{challenge, first_account, run, Access, Command, Payments},
    api::{LastError, Payment, SentCard, StripeMethodInput},
    create, store,
};
use crate::{
    auth::keys::Scope,
    error::ApiError,
    http::{ApiJson, ApiQuery, PathId},
    pages::{
        embed, html_framed,
        text::{self, Locale, Text, Words},
        Chrome, POLICY,
    },
    processors::{card::parse_card, CardInput, Challenge, SecretCard},
    settings::Settings,
    state::AppState,
};

/// The checkout page.
#[derive(askama::Template)]
#[template(path = "checkout.html", config = "src/templates/askama.toml")]
struct CheckoutPage<'a> {
    chrome: Chrome,
    text: &'static Text,
    shop_name: &'a str,
    /// Whether the shop has a logo.
    logo: bool,
    client_secret: &'a str,
    description: Option<&'a str>,
    lines: Vec<PageLine>,
    amount: i64,
    /// The amount as the buyer's language writes it (`€45.99`, `45,99 €`).
    display_amount: String,
    currency: &'a str,
    /// The Pay button's words, with the amount.
    pay_label: String,
    payment_id: &'a str,
    test_mode: bool,
    /// The Stripe.js script the page loads when a Stripe account takes the card.
    stripe_js: Option<&'a str>,
    /// What the page's script starts from.
    data: CheckoutData<'a>,
}

/// A product line as the page lists it: name × quantity, amount.
struct PageLine {
    name: String,
    quantity: i64,
    amount: String,
}

/// The checkout script's data (the page's JSON block).
#[derive(Serialize)]
struct CheckoutData<'a> {
    payment_id: &'a str,
    client_secret: &'a str,
    pay_label: &'a str,
    /// As `GET …/status` answers.
    status: CheckoutStatus,
    text: &'static Text,
    accent: Option<&'a Accent>,
    /// The merchant's page framing this one (payd.js), which the page posts its status to.
    embed_origin: Option<&'a str>,
    /// Set when a Stripe account takes the card: Stripe.js takes it in the page, and the page
    /// hands payd only the token Stripe made.
    stripe: Option<StripeData>,
}

/// What the page's Stripe.js is started with.
#[derive(Serialize)]
struct StripeData {
    publishable_key: String,
    processor_account_id: String,
}

/// The sandbox 3-D Secure challenge page; for a processor that runs 3-D Secure on its own
/// page (Stripe's), the page where the buyer of an off-session charge goes on to it.
#[derive(askama::Template)]
#[template(path = "challenge.html", config = "src/templates/askama.toml")]
struct ChallengePage<'a> {
    chrome: Chrome,
    text: &'static Text,
    shop_name: &'a str,
    logo: bool,
    title: String,
    /// Whether the payment waits for the challenge (only then are its answers offered).
    waiting: bool,
    /// Whether the bank's own page follows (`Challenge::Started`): one button, to go on there.
    at_bank: bool,
    /// What became of the payment, when it no longer waits for the challenge.
    closed: String,
    payment_id: &'a str,
    client_secret: &'a str,
    data: ChallengeData<'a>,
}

/// The challenge script's data.
#[derive(Serialize)]
struct ChallengeData<'a> {
    payment_id: &'a str,
    client_secret: &'a str,
    text: &'static Text,
    accent: Option<&'a Accent>,
    /// The merchant's page framing this one: the checkout page it goes back to keeps it.
    embed_origin: Option<&'a str>,
}

crate::http::routes! {
    "/checkout/{payment_id}" => { get: page },
    "/checkout/{payment_id}/status" => { get: status },
    "/checkout/{payment_id}/confirm" => { post: confirm },
    "/checkout/{payment_id}/challenge" => { get: challenge_page, post: complete_challenge },
    "/checkout/{payment_id}/challenge/return" => { get: challenge_return },
    "/checkout/{payment_id}/logo" => { get: logo },
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SecretQuery {
    pub client_secret: String,
}

/// A buyer page's query: the payment's secret, and the origin of the merchant's page that
/// frames it (docs/embedded-checkout.md).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    pub client_secret: String,
    /// The embedding page's origin, one of the shop's `embed_origins` (`/js/payd.js` adds it):
    /// the page then tells that origin, and only it, the payment's status by `postMessage`.
    pub embed_origin: Option<String>,
}

/// The buyer's card: typed into payd's page (`card`), or taken by Stripe.js on it (`stripe`).
/// Exactly one of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckoutConfirmRequest {
    pub client_secret: String,
    #[serde(default)]
    pub card: Option<CardInput>,
    #[serde(default)]
    pub stripe: Option<StripeMethodInput>,
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
            next_action_url: (m.status == super::machine::Status::RequiresCustomerAction)
                .then(|| super::api::challenge_path(&p.payment_id, &p.client_secret)),
            payment_id: p.payment_id,
            status: p.status,
            amount: p.amount,
            currency: p.currency,
            test_mode: p.test_mode,
            last_error: p.last_error.map(super::api::for_buyer),
            return_url: p.return_url,
        })
    }
}

/// The payment behind a client_secret; any mismatch reads as "no such payment".
async fn by_secret(state: &AppState, id: &str, secret: &str) -> Result<payment::Model, ApiError> {
    let not_found = ApiError::no_such::<crate::ids::PaymentId>;
    let id = crate::ids::PaymentId::parse(id).ok_or_else(not_found)?;
    let m = store::find(&state.db, &id).await?.ok_or_else(not_found)?;
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
        Some(buyer(m, client_secret)?),
        command,
        None,
    )
    .await?
    .payment;
    Ok(HttpResponse::Ok().json(CheckoutStatus::of(&m, &state.public_url)?))
}

/// A buyer's access to the payment `m`: its merchant, mode and shop, with its client secret.
fn buyer(m: &payment::Model, secret: String) -> Result<Access, sea_orm::DbErr> {
    Ok(Access {
        scope: Scope {
            merchant_id: m.merchant_id.clone(),
            test_mode: m.test_mode,
            profile_id: Some(m.profile_id.clone()),
        },
        client_secret: Some(secret),
    })
}

/// The checkout page, in the payment's `locale` or the buyer's language.
///
/// An HTML page where the buyer enters a card, retries after a decline and sees the outcome;
/// when the payment would go first to a Stripe account with a publishable key, Stripe.js takes
/// the card in the page. The payment's `client_secret` in the query is the only credential (a
/// wrong one reads as no such payment). Opening it changes nothing.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/checkout/{payment_id}", tag = "checkout",
    params(("payment_id" = String, Path), PageQuery),
    responses((status = 200, description = "the hosted checkout page", content_type = "text/html")))]
pub async fn page(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    req: HttpRequest,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    let shop = shop_look(&state, &m).await?;
    let embed_origin = embed::embed_origin(q.embed_origin.as_deref(), &shop.embed_origins)?;
    let stripe = stripe_form(&payments, &m).await?;
    let js_url = &state.settings.processors.stripe_js_url;
    let locale = buyer_locale(&req, &m);
    let display_amount = locale.amount(m.amount, &m.currency);
    let pay_label = Text::with_amount(locale.text().pay, &display_amount);
    let status = CheckoutStatus::of(&m, &state.public_url)?;
    let mut page = checkout_page(&m, &shop, locale, &pay_label, display_amount, status)?;
    page.stripe_js = stripe.is_some().then_some(js_url.as_str());
    page.data.embed_origin = embed_origin;
    page.data.stripe = stripe;
    let policy = match page.stripe_js {
        Some(_) => stripe_policy(&state.settings),
        None => POLICY.to_owned(),
    };
    html_framed(&page, &policy, &shop.embed_origins)
}

/// The checkout page of a payment in `locale`, without Stripe.js and not embedded.
fn checkout_page<'a>(
    m: &'a payment::Model,
    shop: &'a ShopLook,
    locale: Locale,
    pay_label: &'a str,
    display_amount: String,
    status: CheckoutStatus,
) -> Result<CheckoutPage<'a>, ApiError> {
    let text = locale.text();
    let lines = super::api::lines_of(m)
        .into_iter()
        .map(|l| PageLine {
            name: l.name,
            quantity: l.quantity,
            amount: locale.amount(l.amount, &m.currency),
        })
        .collect();
    Ok(CheckoutPage {
        chrome: Chrome::new(locale.as_str(), Some("checkout.js")),
        text,
        shop_name: &shop.name,
        logo: shop.logo,
        client_secret: &m.client_secret,
        description: m.description.as_deref(),
        lines,
        amount: m.amount,
        display_amount,
        currency: &m.currency,
        pay_label: pay_label.to_owned(),
        payment_id: &m.id,
        test_mode: m.test_mode,
        stripe_js: None,
        data: CheckoutData {
            payment_id: &m.id,
            client_secret: &m.client_secret,
            pay_label,
            status,
            text,
            accent: shop.accent.as_ref(),
            embed_origin: None,
            stripe: None,
        },
    })
}

/// Stripe.js's part of the page, when the payment would go first to a Stripe account that has
/// a publishable key (routed as the page opens: the card's brand is not known yet).
async fn stripe_form(
    payments: &Payments,
    m: &payment::Model,
) -> Result<Option<StripeData>, ApiError> {
    let first = first_account(payments.deps(), m).await?;
    Ok(first.and_then(|(account, processor)| {
        processor.browser_key().map(|publishable_key| StripeData {
            publishable_key,
            processor_account_id: account.id,
        })
    }))
}

/// The page's policy with Stripe.js (docs.stripe.com/security/guide#content-security-policy):
/// its script and frames from Stripe.js's origin and `https://hooks.stripe.com` (3-D Secure),
/// its requests to Stripe's API; for a stand-in on a loopback address (a test server), that
/// address for all three. Still no inline script or style.
fn stripe_policy(settings: &Settings) -> String {
    let js = crate::settings::stripe_js_origin(&settings.processors.stripe_js_url)
        .unwrap_or_else(|| "https://js.stripe.com".into());
    let (frames, api) = if js == "https://js.stripe.com" {
        (
            format!("{js} https://*.js.stripe.com https://hooks.stripe.com"),
            crate::processors::stripe::API_BASE.to_owned(),
        )
    } else {
        (js.clone(), js.clone())
    };
    format!(
        "default-src 'none'; script-src 'self' {js}; style-src 'self'; img-src 'self'; \
         connect-src 'self' {api}; frame-src {frames}; form-action 'self'; base-uri 'none'"
    )
}

/// The language a buyer's page speaks: the payment's `locale`, else the best of the buyer's
/// `Accept-Language`.
fn buyer_locale(req: &HttpRequest, m: &payment::Model) -> Locale {
    let accept = req
        .headers()
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok());
    text::choose(m.locale, accept)
}

/// How the page shows the shop the buyer pays: its branding, else its name.
struct ShopLook {
    name: String,
    /// Whether the shop has a logo (served by `GET /checkout/{payment_id}/logo`).
    logo: bool,
    accent: Option<Accent>,
    /// The origins that may frame its buyer pages.
    embed_origins: Vec<String>,
}

/// The shop's accent colour and the text colour on it, for the page's script to apply.
#[derive(Serialize)]
struct Accent {
    color: String,
    text: &'static str,
}

/// The shop a payment is for.
async fn shop_of(
    state: &AppState,
    m: &payment::Model,
) -> Result<Option<payd_entity::profile::Model>, ApiError> {
    match (
        crate::ids::MerchantId::parse(&m.merchant_id),
        crate::ids::ProfileId::parse(&m.profile_id),
    ) {
        (Some(merchant), Some(profile)) => {
            Ok(crate::auth::store::find_profile(&state.db, &merchant, &profile).await?)
        }
        _ => Ok(None),
    }
}

async fn shop_look(state: &AppState, m: &payment::Model) -> Result<ShopLook, ApiError> {
    let shop = shop_of(state, m).await?;
    let Some(shop) = shop else {
        return Ok(ShopLook {
            name: String::new(),
            logo: false,
            accent: None,
            embed_origins: Vec::new(),
        });
    };
    Ok(ShopLook {
        embed_origins: crate::accounts::api::embed_origins_of(&shop),
        name: shop.display_name.unwrap_or(shop.name),
        logo: shop.logo_file_id.is_some(),
        // Its contrast against white was checked when it was set: white text on it.
        accent: shop.accent_color.map(|color| Accent {
            color,
            text: "#ffffff",
        }),
    })
}

/// The logo of the shop a payment is for (its branding's `logo_file_id`), for its pages.
///
/// The image's bytes, with the payment's `client_secret` as the credential; cached privately
/// for 5 minutes. A shop without a logo answers 404.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/checkout/{payment_id}/logo", tag = "checkout",
    params(("payment_id" = String, Path), SecretQuery),
    responses((status = 200, description = "the image", content_type = "image/png"),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn logo(
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<SecretQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    let none = || ApiError::not_found("logo");
    let shop = shop_of(&state, &m).await?;
    let logo = shop.and_then(|s| s.logo_file_id);
    let file_id = logo
        .and_then(|id| crate::ids::FileId::parse(&id))
        .ok_or_else(none)?;
    let (file, bytes) = crate::files::store::read_all(&state.db, &file_id)
        .await?
        .filter(|(f, _)| f.merchant_id == m.merchant_id)
        .ok_or_else(none)?;
    Ok(HttpResponse::Ok()
        .content_type(file.content_type)
        .insert_header(("cache-control", "private, max-age=300"))
        .body(bytes))
}

/// The payment's status as the buyer's page sees it.
///
/// Status, amount, currency, `last_error` in the buyer's words, `next_action_url` (the
/// challenge page, while the payment waits for 3-D Secure) and the shop's `return_url`. The
/// `client_secret` in the query is the credential; read from the store, it asks no processor.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
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
///
/// Confirms the payment as `POST /payments/{payment_id}/confirm` does, with the card typed in
/// (`card`) or the PaymentMethod Stripe.js made (`stripe`): exactly one of them. The
/// `client_secret` in the body is the credential. It answers the checkout status: a decline is
/// not an error, a payment waiting for 3-D Secure names the challenge page in
/// `next_action_url`, and a `processing` one announces its outcome later.
///
/// Fails: `payment_method_unusable` (400), `processor_unsupported` (400), `invalid_card_number` (400), `invalid_expiry_month` (400), `invalid_expiry_year` (400), `invalid_cvc` (400), `resource_missing` (404), `invalid_state` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_failed`, `payment_processing`, `action_required`, `mandate_active`, `payment_expired`.
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
    let sent = match (&req.card, &req.stripe) {
        (Some(card), None) => {
            let stored = parse_card(
                card,
                "card",
                state.clock.now(),
                &state.settings.security.key_pepper,
                &m.merchant_id,
                m.test_mode,
            )?;
            SentCard::Entered(stored, SecretCard::from(card))
        }
        (None, Some(stripe)) => SentCard::Stripe {
            method: stripe.method()?,
            account: stripe.processor_account_id.clone(),
        },
        _ => {
            return Err(ApiError::invalid_param(
                "card",
                "send one of card and stripe",
            ))
        }
    };
    let shop = (m.merchant_id.as_str(), m.profile_id.as_str());
    let (card, secret) = create::card_sent(payments.deps(), shop, m.test_mode, sent).await?;
    let command = Command::Confirm {
        card: Some(card),
        secret,
        return_url: None,
    };
    as_buyer(&state, &payments, &m, req.client_secret, command).await
}

/// The 3-D Secure challenge page, in the buyer's language.
///
/// The sandbox's challenge, answered with `POST /checkout/{payment_id}/challenge`. For a
/// Stripe payment, 303 to Stripe's 3-D Secure page (which sends the buyer back to
/// `…/challenge/return`), or, for an off-session charge the bank wants authenticated, a page
/// whose button takes the buyer on to it. The `client_secret` in the query is the credential;
/// opening the page changes nothing.
///
/// Fails: `resource_missing` (404), `processor_error` (502).
///
/// Events: none.
#[utoipa::path(get, path = "/checkout/{payment_id}/challenge", tag = "checkout",
    params(("payment_id" = String, Path), PageQuery),
    responses((status = 200, description = "the challenge page", content_type = "text/html"),
        (status = 303, description = "to the processor's 3-D Secure page"),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn challenge_page(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    req: HttpRequest,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    let shop = shop_look(&state, &m).await?;
    let embed_origin = embed::embed_origin(q.embed_origin.as_deref(), &shop.embed_origins)?;
    // Stripe's own page, or the buyer's "continue" first (an off-session charge): a link
    // opened by a mail scanner starts nothing.
    let at_bank = match challenge(payments.deps(), &m).await? {
        Challenge::At(url) => return Ok(see_other(url)),
        Challenge::Started => true,
        Challenge::Here => false,
    };
    let locale = buyer_locale(&req, &m);
    let text = locale.text();
    let page = ChallengePage {
        chrome: Chrome::new(locale.as_str(), Some("challenge.js")),
        text,
        shop_name: &shop.name,
        logo: shop.logo,
        title: Text::with_amount(text.challenge_title, &locale.amount(m.amount, &m.currency)),
        waiting: m.status == super::machine::Status::RequiresCustomerAction,
        at_bank,
        closed: Text::with_status(text.challenge_closed, &m.status.as_str().replace('_', " ")),
        payment_id: &m.id,
        client_secret: &m.client_secret,
        data: ChallengeData {
            payment_id: &m.id,
            client_secret: &m.client_secret,
            text,
            accent: shop.accent.as_ref(),
            embed_origin,
        },
    };
    html_framed(&page, POLICY, &shop.embed_origins)
}

/// Where a processor's 3-D Secure page (Stripe's) sends the buyer back.
///
/// payd reads the challenge's outcome from the processor and records it on the payment, then
/// sends the buyer (303) to the checkout page, which tells the outcome and goes on to the
/// shop's `return_url`, or lets the buyer try another card. A payment settled already (by
/// Stripe's event), or a processor that cannot be asked now, is left as it is, for the event
/// or the settle job; the buyer is sent on all the same. The `client_secret` in the query is
/// the credential.
///
/// Fails: `resource_missing` (404).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_failed`, `payment_processing`, `action_required`, `mandate_active`.
#[utoipa::path(get, path = "/checkout/{payment_id}/challenge/return", tag = "checkout",
    params(("payment_id" = String, Path), SecretQuery),
    responses((status = 303, description = "to the checkout page"), (status = 404, body = crate::error::ErrorBody)))]
pub async fn challenge_return(
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<SecretQuery>,
) -> Result<HttpResponse, ApiError> {
    let m = by_secret(&state, &id, &q.client_secret).await?;
    // The challenge's outcome is what the processor now holds (for Stripe, the PaymentIntent
    // read back, its decline's code included). One already settled (by Stripe's event), or a
    // processor that cannot be asked now, leaves the payment as it is: the page shows it, and
    // the event or the settle job settles it.
    let read = run(
        &payments,
        &m.id,
        Some(buyer(&m, q.client_secret.clone())?),
        Command::CompleteChallenge { approve: true },
        None,
    )
    .await;
    if let Err(e) = read {
        tracing::info!(payment_id = %m.id, error = %e, "a payment back from 3-D Secure was not changed");
    }
    Ok(see_other(super::api::buyer_path(
        &m.id,
        "",
        &q.client_secret,
    )))
}

/// The buyer's browser sent on to `url` (303): never cached, and no referrer (the page's URL
/// holds the payment's `client_secret`).
fn see_other(url: String) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url))
        .insert_header(("cache-control", "no-store"))
        .insert_header(("referrer-policy", "no-referrer"))
        .finish()
}

/// The buyer passes or fails the 3-D Secure challenge.
///
/// Sends the buyer's answer (`approve` or `reject`) for a payment that is
/// `requires_customer_action`; the processor's answer moves it on as a confirm's would
/// (`succeeded`, `requires_capture`, `declined`, `failed` …). Where the bank's own page
/// follows, `approve` goes on to it: the answer's `next_action_url` leads there. The
/// `client_secret` in the body is the credential.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_failed`, `payment_processing`, `action_required`, `mandate_active`.
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

    /// Each value is escaped for where it lands: text in the page, a string in the script's
    /// JSON block, a link's query. A value that closes the script, quotes or tags changes none
    /// of them, and the page carries no inline script or style: only the JSON block and its
    /// own script by URL with an integrity hash.
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
        let text = Locale::En.text();
        let page = CheckoutPage {
            chrome: Chrome::new("en", Some("checkout.js")),
            text,
            shop_name: hostile,
            logo: true,
            client_secret: hostile,
            description: Some(hostile),
            lines: vec![PageLine {
                name: hostile.into(),
                quantity: 2,
                amount: "€1.00".into(),
            }],
            amount: 100,
            display_amount: "€1.00".into(),
            currency: "EUR",
            pay_label: "Pay €1.00".into(),
            payment_id: "pay_1",
            test_mode: true,
            stripe_js: None,
            data: CheckoutData {
                payment_id: "pay_1",
                client_secret: hostile,
                pay_label: "Pay €1.00",
                status,
                text,
                accent: Some(&Accent {
                    color: "#3a4ccf".into(),
                    text: "#ffffff",
                }),
                embed_origin: Some("https://shop.example"),
                stripe: None,
            },
        }
        .render()
        .unwrap();
        assert_eq!(page.matches("<script").count(), 2, "{page}");
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(page.contains("<script type=\"application/json\" id=\"page-data\">"));
        assert!(
            page.contains("<script src=\"/assets/checkout.js?v="),
            "{page}"
        );
        assert!(page.contains(" integrity=\"sha384-"), "{page}");
        assert!(!page.contains("<style"), "{page}");
        assert!(
            page.contains(r#"logo?client_secret=x%22%3C/script%3E%3Cscript%3E"#),
            "{page}"
        );
        assert!(page.contains(r#"alt="x&#34;&#60;/script&#62;"#), "{page}");
        assert!(
            page.contains(r##""accent":{"color":"#3a4ccf","text":"#ffffff"}"##),
            "{page}"
        );
        assert!(!page.contains(" style="), "{page}");
        assert!(
            page.contains("<p id=\"description\">x&#34;&#60;/script&#62;"),
            "{page}"
        );
        assert!(
            page.contains(r#""client_secret":"x\"\u003c/script\u003e\u003cscript\u003ealert(1)"#),
            "{page}"
        );
    }

    /// The challenge page's link back to the checkout carries the secret URL-encoded; a page
    /// whose payment is no longer waiting offers no approval.
    #[test]
    fn the_challenge_page_links_back_with_its_secret_encoded() {
        let text = Locale::En.text();
        let challenge = ChallengePage {
            chrome: Chrome::new("en", Some("challenge.js")),
            text,
            shop_name: "Shop",
            logo: false,
            title: "Confirm".into(),
            waiting: false,
            at_bank: false,
            closed: "It is succeeded.".into(),
            payment_id: "pay_1",
            client_secret: "a&b c",
            data: ChallengeData {
                payment_id: "pay_1",
                client_secret: "a&b c",
                text,
                accent: None,
                embed_origin: None,
            },
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
