//! A strict Stripe for the Stripe processor's tests: localstripe keeps the state (PaymentIntents,
//! charges, refunds), and this layer between payd and it answers the way Stripe's documentation
//! says Stripe answers where localstripe is lenient. Each rule names the page it follows.
//!
//! Besides the rules, a test can make Stripe fail as it really fails (`Fault`): a 500 after
//! the charge was made, an answer later than payd's timeout, 429 with `Stripe-Should-Retry`, a
//! refund that fails a day after it succeeded. Every request payd sent is kept (`seen`), so a
//! test can count them and check their parameters against Stripe's published API.

#![allow(dead_code)]

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::Duration,
};

use actix_web::{http::Method, web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::{
    client,
    stripe::{connect_via, LocalStripe, SECRET_KEY},
    stripe_api::StripeApi,
    Merchant, TestApp,
};

/// A way Stripe fails, injected once.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The next POST to `path` is carried out (the charge is made), then answered 500; the
    /// 500 is what Stripe keeps under its idempotency key (docs.stripe.com/idempotency: "including
    /// 500 errors").
    ServerErrorAfter { path: String },
    /// The next POST to `path` is answered 500 and not carried out; the 500 is kept under its
    /// key as well, so the same request sent again gets it again.
    ServerErrorBefore { path: String },
    /// The next POST to `path` is carried out and answered after `delay`.
    LateAnswer { path: String, delay: Duration },
    /// The next `times` requests to `path` are answered 429 `lock_timeout`, not carried out,
    /// with this `Stripe-Should-Retry` (docs.stripe.com/rate-limits).
    RateLimited {
        path: String,
        times: u32,
        should_retry: Option<bool>,
    },
}

/// A request payd sent.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub params: Vec<(String, String)>,
    pub key: Option<String>,
    /// The `Stripe-Version` it pinned.
    pub version: Option<String>,
    /// The secret key it was sent with (`Authorization: Bearer …`).
    pub bearer: Option<String>,
}

/// An idempotency key's first request and Stripe's stored answer to it.
enum Stored {
    Running,
    Done {
        request: (String, Vec<(String, String)>),
        status: u16,
        body: Vec<u8>,
    },
}

pub struct Strict {
    target: String,
    /// Whether the account may send raw card numbers (docs.stripe.com/testing, "raw card data
    /// APIs": an account must be enabled for them; Stripe.js and test PaymentMethods need not).
    pub raw_cards: std::sync::atomic::AtomicBool,
    keys: Mutex<HashMap<String, Stored>>,
    faults: Mutex<VecDeque<Fault>>,
    /// Refunds that failed after they succeeded (a closed card), with the reason.
    failed_refunds: Mutex<HashMap<String, String>>,
    /// PaymentIntents Stripe canceled itself, their authorization's window closed
    /// (`cancellation_reason: automatic`, which localstripe does not set).
    lapsed: Mutex<std::collections::HashSet<String>>,
    /// Disputes Stripe holds (localstripe models none): what `GET /v1/disputes` lists.
    disputes: Mutex<Vec<Value>>,
    /// Events Stripe made, oldest first (localstripe lists none): what `GET /v1/events` lists.
    events: Mutex<Vec<Value>>,
    /// The card number behind each PaymentMethod made here.
    numbers: Mutex<HashMap<String, String>>,
    /// The `return_url` of each PaymentIntent confirmed with one: its 3-D Secure is Stripe's
    /// redirect (`next_action.redirect_to_url`), which localstripe does not model.
    returns: Mutex<HashMap<String, String>>,
    /// The `setup_future_usage` of each PaymentIntent confirmed with one.
    usages: Mutex<HashMap<String, String>>,
    /// The PaymentIntents whose PaymentMethod was attached to their customer on success.
    attached: Mutex<std::collections::HashSet<String>>,
    /// PaymentIntents whose 3-D Secure the buyer failed (their `last_payment_error`).
    unauthenticated: Mutex<std::collections::HashSet<String>>,
    /// PaymentIntents of off-session charges declined `authentication_required`, with the
    /// PaymentMethod tried: until confirmed again, Stripe shows them `requires_payment_method`
    /// with that decline (localstripe holds them unconfirmed).
    awaiting: Mutex<HashMap<String, String>>,
    /// The card behind each token Stripe.js made in a browser (`POST /v1/tokens`, which
    /// carries the card as the buyer typed it: number, expiry, CVC).
    tokens: Mutex<HashMap<String, Vec<(String, String)>>>,
    seen: Mutex<Vec<Seen>>,
    /// Stripe's published API for the pinned version, when installed.
    api: Option<StripeApi>,
}

/// The strict layer's address (`base`, what payd's account names as `api_base`) over a
/// localstripe, whose own API (`get`, `post`) the tests read state through.
pub struct StrictStripe {
    pub base: String,
    ls: LocalStripe,
    pub strict: web::Data<Strict>,
    server: actix_web::dev::ServerHandle,
}

impl std::ops::Deref for StrictStripe {
    type Target = LocalStripe;
    fn deref(&self) -> &LocalStripe {
        &self.ls
    }
}

/// Stripe's test PaymentMethods (docs.stripe.com/testing, "Test cards": PaymentMethods), with
/// the card localstripe models for each.
const TEST_METHODS: [(&str, &str); 5] = [
    ("pm_card_visa", "4242424242424242"),
    ("pm_card_mastercard", "5555555555554444"),
    ("pm_card_chargeDeclined", "4000000000000002"),
    (
        "pm_card_chargeDeclinedInsufficientFunds",
        "4000000000009995",
    ),
    ("pm_card_authenticationRequired", "4000000000003220"),
];

/// Stripe's test cards that ask for 3-D Secure on every payment (docs.stripe.com/testing#regulatory-cards).
const AUTHENTICATED: [&str; 1] = ["4000000000003220"];

/// Stripe's decline test cards (docs.stripe.com/testing#declined-payments): a confirm is
/// declined with 402, the PaymentIntent named in the error. localstripe lets them succeed.
const DECLINES: [(&str, &str, &str); 6] = [
    ("4000000000000002", "card_declined", "generic_decline"),
    ("4000000000009995", "card_declined", "insufficient_funds"),
    ("4000000000009987", "card_declined", "lost_card"),
    ("4000000000009979", "card_declined", "stolen_card"),
    ("4000000000000069", "expired_card", "expired_card"),
    ("4000000000000127", "incorrect_cvc", "incorrect_cvc"),
];

impl StrictStripe {
    /// localstripe behind the strict layer, or `None` when localstripe is not installed (see
    /// `LocalStripe::start`). Raw card numbers are allowed, as for an account enabled for them.
    pub async fn start() -> Option<Self> {
        let ls = LocalStripe::start().await?;
        let strict = web::Data::new(Strict {
            target: ls.base.clone(),
            raw_cards: true.into(),
            keys: Mutex::default(),
            faults: Mutex::default(),
            failed_refunds: Mutex::default(),
            lapsed: Mutex::default(),
            disputes: Mutex::default(),
            events: Mutex::default(),
            numbers: Mutex::default(),
            tokens: Mutex::default(),
            returns: Mutex::default(),
            usages: Mutex::default(),
            attached: Mutex::default(),
            unauthenticated: Mutex::default(),
            awaiting: Mutex::default(),
            seen: Mutex::default(),
            api: StripeApi::load(),
        });
        let data = strict.clone();
        let server = actix_web::HttpServer::new(move || {
            actix_web::App::new()
                .app_data(data.clone())
                .default_service(web::to(handle))
        })
        .workers(2)
        .bind("127.0.0.1:0")
        .expect("a loopback port");
        let base = format!("http://{}", server.addrs()[0]);
        let server = server.run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Some(Self {
            base,
            ls,
            strict,
            server: handle,
        })
    }

    /// Adds a Stripe account behind the strict layer to the merchant's shop, its events sent
    /// by localstripe to payd; the account's id.
    pub async fn connect(&self, app: &TestApp, m: &Merchant) -> String {
        connect_via(app, m, &self.ls, &self.base, json!({})).await
    }

    /// Stripe can no longer be reached: the layer stops listening and localstripe stops.
    pub async fn stop(self) {
        self.server.stop(false).await;
    }

    pub fn inject(&self, fault: Fault) {
        self.strict.faults.lock().unwrap().push_back(fault);
    }

    /// The refund fails now, after it succeeded (docs.stripe.com/refunds#failed-refunds: a
    /// refund can fail after it succeeded, when the card is closed).
    pub fn fail_refund(&self, id: &str, reason: &str) {
        self.strict
            .failed_refunds
            .lock()
            .unwrap()
            .insert(id.to_owned(), reason.to_owned());
    }

    /// Whether parameters are checked against Stripe's published API description.
    pub fn checks_parameters(&self) -> bool {
        self.strict.api.is_some()
    }

    /// Stripe now holds this dispute (a `dispute` object): listed by `GET /v1/disputes`,
    /// replacing one of the same id.
    pub fn hold_dispute(&self, dispute: Value) {
        let mut held = self.strict.disputes.lock().unwrap();
        held.retain(|d| d["id"] != dispute["id"]);
        held.push(dispute);
    }

    /// The dispute Stripe holds under `id`, as it now is.
    pub fn dispute(&self, id: &str) -> Option<Value> {
        let held = self.strict.disputes.lock().unwrap();
        held.iter().find(|d| d["id"] == id).cloned()
    }

    /// Stripe cancels the PaymentIntent itself, its authorization left uncaptured past the
    /// card's window (docs.stripe.com/payments/place-a-hold-on-a-payment-method): canceled,
    /// with `cancellation_reason: automatic`.
    pub async fn lapse(&self, id: &str) {
        let (status, pi) = self
            .ls
            .post(&format!("/v1/payment_intents/{id}/cancel"), &[])
            .await;
        assert_eq!(status, 200, "{pi}");
        self.strict.lapsed.lock().unwrap().insert(id.to_owned());
    }

    /// Stripe made this event (whether or not it was delivered): listed by `GET /v1/events`.
    pub fn made_event(&self, event: Value) {
        self.strict.events.lock().unwrap().push(event);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.strict.seen.lock().unwrap().clone()
    }

    /// The card tokens Stripe.js made in a buyer's browser.
    pub fn tokens_made(&self) -> usize {
        self.strict.tokens.lock().unwrap().len()
    }

    /// The POSTs payd sent to `path`.
    pub fn posts_to(&self, path: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.method == "POST" && s.path == path)
            .count()
    }
}

fn error(status: u16, kind: &str, code: &str, message: &str, param: Option<&str>) -> HttpResponse {
    let mut e = json!({"error": {"type": kind, "code": code, "message": message}});
    if let Some(p) = param {
        e["error"]["param"] = json!(p);
    }
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
        .content_type("application/json")
        .json(e)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn handle(req: HttpRequest, body: web::Bytes, s: web::Data<Strict>) -> HttpResponse {
    let path = req.path().to_owned();
    let post = req.method() == Method::POST;
    let params: Vec<(String, String)> = if post {
        form_urlencoded::parse(&body).into_owned().collect()
    } else {
        form_urlencoded::parse(req.query_string().as_bytes())
            .into_owned()
            .collect()
    };
    // What a buyer's browser asks of Stripe, not payd: Stripe.js itself (localstripe's
    // stand-in, whose requests then come here), and the card token it makes.
    if let Some(answer) = from_browser(&s, &req, &path, &params).await {
        return answer;
    }
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let version = req
        .headers()
        .get("stripe-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bearer = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    s.seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        path: path.clone(),
        params: params.clone(),
        key: key.clone(),
        version,
        bearer,
    });
    // docs.stripe.com/error-codes#parameter-unknown: a parameter the endpoint does not take
    // is refused, as the API description for the pinned version says.
    if let Some(why) = s
        .api
        .as_ref()
        .and_then(|api| api.refuses(req.method().as_str(), &path, &params))
    {
        return error(
            400,
            "invalid_request_error",
            "parameter_unknown",
            &why,
            None,
        );
    }
    // docs.stripe.com/rate-limits: a 429 did nothing; it is not kept under the key.
    if let Some(retry) = take_rate_limit(&s, &path) {
        let mut res = error(
            429,
            "invalid_request_error",
            "lock_timeout",
            "This object cannot be accessed right now because another API request or Stripe process is currently accessing it.",
            None,
        );
        if let Some(retry) = retry {
            res.headers_mut().insert(
                actix_web::http::header::HeaderName::from_static("stripe-should-retry"),
                actix_web::http::header::HeaderValue::from_static(if retry {
                    "true"
                } else {
                    "false"
                }),
            );
        }
        return res;
    }
    if !post {
        return get(&req, &path, params, &s).await;
    }
    // docs.stripe.com/idempotency: a key's first answer is kept and given again to the same
    // request; the same key with other parameters is refused; while the first request runs,
    // another under its key gets 409.
    let Some(key) = key else {
        return forward(&s, &req, &path, &params).await.into_response();
    };
    let request = (path.clone(), sorted(&params));
    {
        let mut keys = s.keys.lock().unwrap();
        match keys.get(&key) {
            Some(Stored::Running) => {
                return error(
                    409,
                    "idempotency_error",
                    "idempotency_key_in_use",
                    "There is currently another in-progress request using this Idempotent Key.",
                    None,
                )
            }
            Some(Stored::Done {
                request: first,
                status,
                body,
            }) => {
                if *first != request {
                    return error(
                        400,
                        "idempotency_error",
                        "",
                        "Keys for idempotent requests can only be used with the same parameters they were first used with.",
                        None,
                    );
                }
                return HttpResponse::build(
                    actix_web::http::StatusCode::from_u16(*status).unwrap(),
                )
                .content_type("application/json")
                .insert_header(("idempotent-replayed", "true"))
                .body(body.clone());
            }
            None => {
                keys.insert(key.clone(), Stored::Running);
            }
        }
    }
    let answer = post_strictly(&s, &req, &path, &params).await;
    // "Results are only saved if an API endpoint started executing": a request refused by
    // validation (400) is not kept.
    let stored = (answer.status != 400).then(|| Stored::Done {
        request,
        status: answer.status,
        body: answer.body.clone(),
    });
    match stored {
        Some(done) => s.keys.lock().unwrap().insert(key, done),
        None => s.keys.lock().unwrap().remove(&key),
    };
    if let Some(delay) = answer.late {
        actix_web::rt::time::sleep(delay).await;
    }
    answer.into_response()
}

fn sorted(params: &[(String, String)]) -> Vec<(String, String)> {
    let mut p = params.to_vec();
    p.sort();
    p
}

fn take_rate_limit(s: &Strict, path: &str) -> Option<Option<bool>> {
    let mut faults = s.faults.lock().unwrap();
    let i = faults
        .iter()
        .position(|f| matches!(f, Fault::RateLimited { path: p, .. } if p == path))?;
    let Fault::RateLimited {
        times,
        should_retry,
        ..
    } = &mut faults[i]
    else {
        return None;
    };
    let retry = *should_retry;
    *times -= 1;
    if *times == 0 {
        faults.remove(i);
    }
    Some(retry)
}

fn take_fault(s: &Strict, path: &str) -> Option<Fault> {
    let mut faults = s.faults.lock().unwrap();
    let i = faults.iter().position(|f| match f {
        Fault::ServerErrorAfter { path: p }
        | Fault::ServerErrorBefore { path: p }
        | Fault::LateAnswer { path: p, .. } => p == path,
        Fault::RateLimited { .. } => false,
    })?;
    faults.remove(i)
}

struct Answer {
    status: u16,
    body: Vec<u8>,
    late: Option<Duration>,
}

impl Answer {
    fn json(status: u16, v: Value) -> Self {
        Answer {
            status,
            body: serde_json::to_vec(&v).unwrap(),
            late: None,
        }
    }

    fn into_response(self) -> HttpResponse {
        HttpResponse::build(actix_web::http::StatusCode::from_u16(self.status).unwrap())
            .content_type("application/json")
            .body(self.body)
    }
}

fn refusal(code: &str, message: &str, param: Option<&str>) -> Answer {
    let mut e =
        json!({"error": {"type": "invalid_request_error", "code": code, "message": message}});
    if let Some(p) = param {
        e["error"]["param"] = json!(p);
    }
    Answer::json(400, e)
}

/// Sends the request on to localstripe.
async fn forward(s: &Strict, req: &HttpRequest, path: &str, params: &[(String, String)]) -> Answer {
    forward_as(s, req, req.method().clone(), path, params).await
}

/// Sends a request with `req`'s headers and this method on to localstripe.
async fn forward_as(
    s: &Strict,
    req: &HttpRequest,
    method: Method,
    path: &str,
    params: &[(String, String)],
) -> Answer {
    let url = format!("{}{path}", s.target);
    let post = method == Method::POST;
    let mut sent = client().request(method, url);
    for (name, value) in req.headers() {
        if !matches!(name.as_str(), "host" | "content-length" | "idempotency-key") {
            sent = sent.insert_header((name.clone(), value.clone()));
        }
    }
    let mut res = if post {
        sent.send_form(&params).await
    } else {
        sent.query(&params).unwrap().send().await
    }
    .expect("localstripe answers");
    let body = res.body().limit(1 << 22).await.expect("a body").to_vec();
    Answer {
        status: res.status().as_u16(),
        body,
        late: None,
    }
}

async fn ls_get(s: &Strict, req: &HttpRequest, path: &str) -> Value {
    let a = forward_get(s, req, path).await;
    serde_json::from_slice(&a.body).unwrap_or(Value::Null)
}

async fn forward_get(s: &Strict, req: &HttpRequest, path: &str) -> Answer {
    let mut sent = client().get(format!("{}{path}", s.target));
    if let Some(auth) = req.headers().get("authorization") {
        sent = sent.insert_header(("authorization", auth.clone()));
    }
    let mut res = sent.send().await.expect("localstripe answers");
    let body = res.body().limit(1 << 22).await.expect("a body").to_vec();
    Answer {
        status: res.status().as_u16(),
        body,
        late: None,
    }
}

/// A buyer's browser's request: Stripe.js (`GET /js.stripe.com/v3/`), or the card token it
/// makes (`POST /v1/tokens`, docs.stripe.com/api/tokens/create_card), answered with the CORS
/// header Stripe's API sends a page; `None` for payd's own requests.
async fn from_browser(
    s: &Strict,
    req: &HttpRequest,
    path: &str,
    params: &[(String, String)],
) -> Option<HttpResponse> {
    if path.starts_with("/js.stripe.com/") {
        let a = forward_get(s, req, path).await;
        return Some(
            HttpResponse::build(actix_web::http::StatusCode::from_u16(a.status).unwrap())
                .content_type("text/javascript; charset=utf-8")
                .body(a.body),
        );
    }
    if let Some(pi) = path.strip_prefix("/3ds/") {
        return Some(three_d_secure(s, req, pi, params).await);
    }
    if path != "/v1/tokens" || req.method() != Method::POST {
        return None;
    }
    let a = forward(s, req, path, params).await;
    let made: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
    if let Some(id) = made["id"].as_str() {
        let card: Vec<(String, String)> = params
            .iter()
            .filter(|(k, _)| k.starts_with("card["))
            .cloned()
            .collect();
        s.tokens.lock().unwrap().insert(id.to_owned(), card);
    }
    Some(
        HttpResponse::build(actix_web::http::StatusCode::from_u16(a.status).unwrap())
            .content_type("application/json")
            .insert_header(("access-control-allow-origin", "*"))
            .body(a.body),
    )
}

/// A PaymentIntent as Stripe shows it after a confirm with `return_url`
/// (docs.stripe.com/payments/3d-secure/authentication-flow): while it `requires_action`, its
/// `next_action` is `redirect_to_url` to Stripe's 3-D Secure page (here, the layer's `/3ds/…`);
/// once the buyer failed it, `last_payment_error` says so.
///
/// And one confirmed with `setup_future_usage` (docs.stripe.com/payments/save-during-payment)
/// shows it, and its PaymentMethod is attached to its customer once it succeeded or waits for
/// capture: never before, never when declined.
async fn as_stripe_shows(s: &Strict, req: &HttpRequest, pi: &mut Value) {
    let Some(id) = pi["id"].as_str().map(str::to_owned) else {
        return;
    };
    let tried = s.awaiting.lock().unwrap().get(&id).cloned();
    if let (Some(method), Some("requires_confirmation")) = (tried, pi["status"].as_str()) {
        pi["status"] = json!("requires_payment_method");
        pi["payment_method"] = Value::Null;
        pi["last_payment_error"] = json!({"type": "card_error",
            "code": "authentication_required", "decline_code": "authentication_required",
            "message": "Your card was declined. This transaction requires authentication.",
            "payment_method": {"id": method, "object": "payment_method"}});
    }
    let usage = s.usages.lock().unwrap().get(&id).cloned();
    if let Some(usage) = usage {
        pi["setup_future_usage"] = json!(usage);
        let approved = matches!(
            pi["status"].as_str(),
            Some("succeeded" | "requires_capture")
        );
        let method = pi["payment_method"].as_str().map(str::to_owned);
        let customer = pi["customer"].as_str().map(str::to_owned);
        if let (true, Some(method), Some(customer)) = (approved, method, customer) {
            if s.attached.lock().unwrap().insert(id.clone()) {
                let path = format!("/v1/payment_methods/{method}/attach");
                let form = [("customer".to_owned(), customer)];
                let done = forward_as(s, req, Method::POST, &path, &form).await;
                assert_eq!(done.status, 200, "{}", String::from_utf8_lossy(&done.body));
            }
        }
    }
    let Some(back) = s.returns.lock().unwrap().get(&id).cloned() else {
        return;
    };
    if pi["status"] == "requires_action" {
        let host = req.connection_info().host().to_owned();
        pi["next_action"] = json!({"type": "redirect_to_url",
            "redirect_to_url": {"url": format!("http://{host}/3ds/{id}"), "return_url": back}});
    }
    if s.unauthenticated.lock().unwrap().contains(&id) && pi["last_payment_error"].is_null() {
        pi["last_payment_error"] = json!({"type": "card_error",
            "code": "payment_intent_authentication_failure",
            "message": "The provided PaymentMethod has failed authentication."});
    }
}

/// Stripe's 3-D Secure page for a PaymentIntent: `GET` shows the buyer two buttons, `POST`
/// (`result=complete` or `fail`) authenticates it (localstripe's `_authenticate`) and sends
/// the buyer back to the `return_url` with `payment_intent` and `redirect_status`, as Stripe
/// does.
async fn three_d_secure(
    s: &Strict,
    req: &HttpRequest,
    pi: &str,
    params: &[(String, String)],
) -> HttpResponse {
    let Some(back) = s.returns.lock().unwrap().get(pi).cloned() else {
        return HttpResponse::NotFound().finish();
    };
    if req.method() != Method::POST {
        return HttpResponse::Ok().content_type("text/html").body(format!(
            "<!doctype html><title>3D Secure</title><form method=post action=/3ds/{pi}>\
             <button id=complete name=result value=complete>Complete authentication</button>\
             <button id=fail name=result value=fail>Fail authentication</button></form>"
        ));
    }
    let success = param(params, "result") == Some("complete");
    // The buyer's browser carries no key: Stripe's page acts for the account.
    let auth = ("authorization", format!("Bearer {SECRET_KEY}"));
    let mut got = client()
        .get(format!("{}/v1/payment_intents/{pi}", s.target))
        .insert_header(auth.clone())
        .send()
        .await
        .expect("localstripe answers");
    let intent: Value = got.json().await.unwrap_or(Value::Null);
    let secret = intent["client_secret"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let form = [("client_secret", secret), ("success", success.to_string())];
    let done = client()
        .post(format!(
            "{}/v1/payment_intents/{pi}/_authenticate",
            s.target
        ))
        .insert_header(auth)
        .send_form(&form)
        .await
        .expect("localstripe answers");
    assert_eq!(done.status(), 200, "_authenticate");
    if !success {
        s.unauthenticated.lock().unwrap().insert(pi.to_owned());
    }
    let status = if success { "succeeded" } else { "failed" };
    HttpResponse::SeeOther()
        .insert_header((
            "location",
            format!("{back}&payment_intent={pi}&redirect_status={status}"),
        ))
        .finish()
}

/// A PaymentMethod of the card a Stripe test PaymentMethod (`pm_card_visa`) stands for, made
/// at localstripe now: its id, or `None` for an id that is not a test PaymentMethod.
async fn test_method(s: &Strict, req: &HttpRequest, id: &str) -> Option<String> {
    let (_, number) = TEST_METHODS.iter().find(|(test, _)| *test == id)?;
    let made = forward_as(
        s,
        req,
        Method::POST,
        "/v1/payment_methods",
        &[
            ("type".into(), "card".into()),
            ("card[number]".into(), (*number).into()),
            ("card[exp_month]".into(), "12".into()),
            ("card[exp_year]".into(), "2040".into()),
            ("card[cvc]".into(), "123".into()),
        ],
    )
    .await;
    let made: Value = serde_json::from_slice(&made.body).unwrap_or(Value::Null);
    let made = made["id"].as_str()?.to_owned();
    s.numbers
        .lock()
        .unwrap()
        .insert(made.clone(), (*number).into());
    Some(made)
}

/// Stripe's unit rules for an amount (docs.stripe.com/currencies): ISK is two-decimal with
/// `00` decimals; a three-decimal currency's last digit is 0.
fn unit_refusal(amount: &str, currency: &str, param: &str) -> Option<Answer> {
    let amount: i64 = amount.parse().ok()?;
    let currency = currency.to_ascii_uppercase();
    let bad = match currency.as_str() {
        "ISK" => amount % 100 != 0,
        "BHD" | "JOD" | "KWD" | "OMR" | "TND" => amount % 10 != 0,
        _ => false,
    };
    bad.then(|| {
        refusal(
            "amount_invalid",
            &format!("Invalid {param} for {currency}: Stripe's unit for it does not hold it"),
            Some(param),
        )
    })
}

async fn post_strictly(
    s: &Strict,
    req: &HttpRequest,
    path: &str,
    params: &[(String, String)],
) -> Answer {
    let mut params = params.to_vec();
    // localstripe returns the charge in full unasked; `expand[]` is Stripe's way of asking
    // (docs.stripe.com/expand), and the card's `capture_before` is set here, five days on, as
    // a network with a shorter window than payd's seven days would set it.
    let expand_charge = param(&params, "expand[]") == Some("latest_charge");
    params.retain(|(k, _)| k != "expand[]");
    // localstripe refuses `return_url` and `setup_future_usage`: kept here, for Stripe's 3-D
    // Secure redirect and its saving of the card when the payment succeeds. It refuses
    // `statement_descriptor_suffix` too, which changes nothing else: the tests read it in
    // `seen`.
    let return_url = param(&params, "return_url").map(str::to_owned);
    let usage = param(&params, "setup_future_usage").map(str::to_owned);
    params.retain(|(k, _)| {
        !matches!(
            k.as_str(),
            "return_url" | "setup_future_usage" | "statement_descriptor_suffix"
        )
    });
    let segments: Vec<&str> = path.trim_start_matches("/v1/").split('/').collect();
    match segments.as_slice() {
        ["payment_methods"]
            if param(&params, "card[number]").is_some()
                && !s.raw_cards.load(std::sync::atomic::Ordering::SeqCst) =>
        {
            return refusal(
                "",
                "Sending credit card numbers directly to the Stripe API is generally unsafe. To enable raw card data APIs, see https://support.stripe.com/questions/enabling-access-to-raw-card-data-apis.",
                None,
            );
        }
        ["payment_intents"] => {
            // docs.stripe.com/testing: the test PaymentMethods stand for test cards.
            if let Some(pm) = param(&params, "payment_method").map(str::to_owned) {
                if let Some(id) = test_method(s, req, &pm).await {
                    for p in params.iter_mut().filter(|(k, _)| k == "payment_method") {
                        p.1 = id.clone();
                    }
                }
            }
            let currency = param(&params, "currency").unwrap_or("usd").to_owned();
            if let Some(refused) =
                unit_refusal(param(&params, "amount").unwrap_or("0"), &currency, "amount")
            {
                return refused;
            }
            // docs.stripe.com/testing#declined-payments: the decline cards are declined at
            // confirm, 402, the PaymentIntent named in the error.
            let number = param(&params, "payment_method")
                .and_then(|pm| s.numbers.lock().unwrap().get(pm).cloned());
            // docs.stripe.com/payments/save-during-payment ("Charge the saved payment method
            // later"): an off-session charge the card's issuer wants authenticated fails with
            // `authentication_required`, the buyer being absent.
            let off_session = param(&params, "off_session") == Some("true");
            let needs_buyer = off_session
                && number
                    .as_deref()
                    .is_some_and(|n| AUTHENTICATED.contains(&n));
            let declined = if needs_buyer {
                Some(&("", "authentication_required", "authentication_required"))
            } else {
                number
                    .as_deref()
                    .and_then(|n| DECLINES.iter().find(|(d, _, _)| *d == n))
            };
            if let Some((_, code, decline)) = declined {
                let unconfirmed: Vec<(String, String)> = params
                    .iter()
                    .filter(|(k, _)| k != "confirm" && k != "off_session")
                    .cloned()
                    .collect();
                let made = forward(s, req, path, &unconfirmed).await;
                let mut pi: Value = serde_json::from_slice(&made.body).unwrap_or(Value::Null);
                if let (true, Some(id), Some(method)) = (
                    needs_buyer,
                    pi["id"].as_str(),
                    param(&params, "payment_method"),
                ) {
                    let (id, method) = (id.to_owned(), method.to_owned());
                    s.awaiting.lock().unwrap().insert(id, method);
                    as_stripe_shows(s, req, &mut pi).await;
                }
                return Answer::json(
                    402,
                    json!({"error": {"type": "card_error", "code": code, "decline_code": decline,
                        "message": "Your card was declined.", "payment_intent": pi}}),
                );
            }
        }
        // docs.stripe.com/api/payment_methods/create: `card[token]` makes a PaymentMethod of
        // a card token (localstripe takes only the card itself: the token's card is given).
        ["payment_methods"] if param(&params, "card[token]").is_some() => {
            let token = param(&params, "card[token]").unwrap_or_default().to_owned();
            let Some(card) = s.tokens.lock().unwrap().get(&token).cloned() else {
                return refusal(
                    "resource_missing",
                    &format!("No such token: '{token}'"),
                    Some("card[token]"),
                );
            };
            params.retain(|(k, _)| k != "card[token]");
            params.extend(card);
            let number = param(&params, "card[number]")
                .unwrap_or_default()
                .to_owned();
            let made = forward(s, req, path, &params).await;
            let pm: Value = serde_json::from_slice(&made.body).unwrap_or(Value::Null);
            if let Some(id) = pm["id"].as_str() {
                s.numbers.lock().unwrap().insert(id.to_owned(), number);
            }
            return made;
        }
        ["payment_methods", pm, "attach"] => {
            // A test PaymentMethod attaches as a new PaymentMethod of its card.
            if let Some(id) = test_method(s, req, pm).await {
                let path = format!("/v1/payment_methods/{id}/attach");
                return forward(s, req, &path, &params).await;
            }
        }
        ["payment_intents", id, "capture"] => {
            // docs.stripe.com/payments/multicapture: `final_capture=false` only for a
            // PaymentIntent confirmed with `request_multicapture`, which payd never asks.
            if param(&params, "final_capture") == Some("false") {
                return refusal(
                    "",
                    "This PaymentIntent was not confirmed with multicapture.",
                    Some("final_capture"),
                );
            }
            let pi = ls_get(s, req, &format!("/v1/payment_intents/{id}")).await;
            if let Some(amount) = param(&params, "amount_to_capture") {
                if let Some(refused) = unit_refusal(
                    amount,
                    pi["currency"].as_str().unwrap_or("usd"),
                    "amount_to_capture",
                ) {
                    return refused;
                }
            }
            if pi["status"] != "requires_capture" {
                return unexpected_state(&pi);
            }
        }
        // docs.stripe.com/api/payment_intents/confirm: an off-session charge declined
        // `authentication_required` is confirmed again with the buyer there, on its
        // PaymentMethod; its 3-D Secure is then Stripe's redirect (the 3220 card asks for it).
        ["payment_intents", id, "confirm"] => {
            let pi = ls_get(s, req, &format!("/v1/payment_intents/{id}")).await;
            if !matches!(
                pi["status"].as_str(),
                Some("requires_payment_method" | "requires_confirmation")
            ) {
                return unexpected_state(&pi);
            }
            if let Some(back) = &return_url {
                s.returns
                    .lock()
                    .unwrap()
                    .insert((*id).to_owned(), back.clone());
            }
            // localstripe confirms only with the PaymentMethod it holds, and takes none named:
            // the one the declined attempt was made with, which Stripe names in
            // `last_payment_error.payment_method`.
            let tried = s.awaiting.lock().unwrap().remove(*id);
            if let Some(method) = param(&params, "payment_method") {
                assert_eq!(
                    Some(method),
                    tried.as_deref(),
                    "the strict layer confirms again only the PaymentMethod declined"
                );
            }
            params.retain(|(k, _)| k != "payment_method");
        }
        ["payment_intents", id, "cancel"] => {
            // docs.stripe.com/api/payment_intents/cancel: only a PaymentIntent not yet
            // succeeded or canceled can be canceled.
            let pi = ls_get(s, req, &format!("/v1/payment_intents/{id}")).await;
            if matches!(pi["status"].as_str(), Some("succeeded" | "canceled")) {
                return unexpected_state(&pi);
            }
        }
        ["refunds"] => {
            if let (Some(amount), Some(pi)) =
                (param(&params, "amount"), param(&params, "payment_intent"))
            {
                let pi = ls_get(s, req, &format!("/v1/payment_intents/{pi}")).await;
                if let Some(refused) =
                    unit_refusal(amount, pi["currency"].as_str().unwrap_or("usd"), "amount")
                {
                    return refused;
                }
            }
        }
        // Stripe's own disputes, which localstripe does not model: held here.
        ["disputes", id, "close"] => return dispute_answer(s, id, &params, Dispute::Close),
        ["disputes", id] => return dispute_answer(s, id, &params, Dispute::Update),
        _ => {}
    }
    let fault = take_fault(s, path);
    if let Some(Fault::ServerErrorBefore { .. }) = fault {
        return Answer::json(
            500,
            json!({"error": {"type": "api_error", "message": "An unknown error occurred"}}),
        );
    }
    let mut answer = forward(s, req, path, &params).await;
    if expand_charge && answer.status == 200 {
        let mut pi: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        if pi["status"] == "requires_capture" && pi["latest_charge"].is_object() {
            let created = pi["created"].as_i64().unwrap_or(0);
            pi["latest_charge"]["payment_method_details"]["card"]["capture_before"] =
                json!(created + 5 * 86_400);
            answer.body = serde_json::to_vec(&pi).unwrap();
        }
    }
    if segments.len() == 3 && segments[2] == "confirm" && answer.status == 200 {
        let mut pi: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        as_stripe_shows(s, req, &mut pi).await;
        answer.body = serde_json::to_vec(&pi).unwrap();
    }
    if let ("/v1/payment_intents", 200) = (path, answer.status) {
        let mut pi: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        if let Some(id) = pi["id"].as_str().map(str::to_owned) {
            if let Some(back) = &return_url {
                s.returns.lock().unwrap().insert(id.clone(), back.clone());
            }
            if let Some(usage) = &usage {
                s.usages.lock().unwrap().insert(id, usage.clone());
            }
        }
        as_stripe_shows(s, req, &mut pi).await;
        answer.body = serde_json::to_vec(&pi).unwrap();
    }
    if path == "/v1/payment_methods" && answer.status == 200 {
        let made: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        if let (Some(id), Some(number)) = (made["id"].as_str(), param(&params, "card[number]")) {
            s.numbers.lock().unwrap().insert(id.into(), number.into());
        }
    }
    match fault {
        Some(Fault::ServerErrorAfter { .. }) => Answer::json(
            500,
            json!({"error": {"type": "api_error", "message": "An unknown error occurred"}}),
        ),
        Some(Fault::LateAnswer { delay, .. }) => {
            answer.late = Some(delay);
            answer
        }
        _ => answer,
    }
}

/// What is asked of a dispute Stripe holds.
enum Dispute {
    Close,
    Update,
}

/// docs.stripe.com/api/disputes/close: "the status of the dispute will change from
/// `needs_response` to `lost`"; docs.stripe.com/api/disputes/update: the evidence is merged
/// into the dispute's and, with `submit` (true unless false), sent to the bank at once
/// (`under_review`). Both only while the dispute awaits the merchant's response (its
/// `warning_` form too: an inquiry); after, Stripe refuses (400).
fn dispute_answer(s: &Strict, id: &str, params: &[(String, String)], asked: Dispute) -> Answer {
    let mut held = s.disputes.lock().unwrap();
    let Some(d) = held.iter_mut().find(|d| d["id"] == id) else {
        return Answer::json(
            404,
            json!({"error": {"type": "invalid_request_error", "code": "resource_missing",
                "message": format!("No such dispute: '{id}'"), "param": "dispute"}}),
        );
    };
    let status = d["status"].as_str().unwrap_or_default().to_owned();
    let warning = status.starts_with("warning_");
    if !status.ends_with("needs_response") {
        return refusal(
            "",
            &format!("This dispute is {status} and can no longer be changed."),
            None,
        );
    }
    match asked {
        Dispute::Close => {
            d["status"] = json!(if warning { "warning_closed" } else { "lost" });
        }
        Dispute::Update => {
            for (k, v) in params {
                if let Some(field) = k
                    .strip_prefix("evidence[")
                    .and_then(|f| f.strip_suffix(']'))
                {
                    d["evidence"][field] = json!(v);
                }
            }
            if param(params, "submit") != Some("false") {
                d["status"] = json!(if warning {
                    "warning_under_review"
                } else {
                    "under_review"
                });
                let count = d["evidence_details"]["submission_count"]
                    .as_i64()
                    .unwrap_or(0);
                d["evidence_details"]["submission_count"] = json!(count + 1);
                d["evidence_details"]["has_evidence"] = json!(true);
            }
        }
    }
    Answer::json(200, d.clone())
}

fn unexpected_state(pi: &Value) -> Answer {
    refusal(
        "payment_intent_unexpected_state",
        &format!(
            "This PaymentIntent's status is {}, which does not allow this action.",
            pi["status"].as_str().unwrap_or("unknown")
        ),
        None,
    )
}

/// A GET: refunds that failed later read as failed; a list of PaymentIntents by `created`
/// (which localstripe does not filter) is filtered here.
async fn get(
    req: &HttpRequest,
    path: &str,
    mut params: Vec<(String, String)>,
    s: &Strict,
) -> HttpResponse {
    let bound = |name: &str| -> Option<i64> {
        params
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse().ok())
    };
    let (since, until) = (bound("created[gte]"), bound("created[lte]"));
    if path == "/v1/events" {
        return events(s, &params, since);
    }
    // A test PaymentMethod is retrieved as a PaymentMethod of its card.
    if let Some(id) = path.strip_prefix("/v1/payment_methods/") {
        if let Some(made) = test_method(s, req, id).await {
            let a = forward_get(s, req, &format!("/v1/payment_methods/{made}")).await;
            return a.into_response();
        }
    }
    if path == "/v1/disputes" {
        let intent = param(&params, "payment_intent").map(str::to_owned);
        let held: Vec<Value> = s
            .disputes
            .lock()
            .unwrap()
            .iter()
            .filter(|d| intent.is_none() || d["payment_intent"].as_str() == intent.as_deref())
            .cloned()
            .collect();
        return HttpResponse::Ok().json(json!({"object": "list", "url": "/v1/disputes",
            "data": held, "has_more": false}));
    }
    if path == "/v1/payment_intents" && (since.is_some() || until.is_some()) {
        return created_between(s, req, &params, since, until).await;
    }
    params.retain(|(k, _)| !k.starts_with("created["));
    let answer = forward(s, req, path, &params).await;
    let Ok(mut v) = serde_json::from_slice::<Value>(&answer.body) else {
        return answer.into_response();
    };
    let failed = s.failed_refunds.lock().unwrap().clone();
    let lapsed = s.lapsed.lock().unwrap().clone();
    let reason = |pi: &mut Value| {
        if pi["id"].as_str().is_some_and(|id| lapsed.contains(id)) {
            pi["cancellation_reason"] = json!("automatic");
        }
    };
    let mark = |r: &mut Value| {
        if let Some(reason) = r["id"].as_str().and_then(|id| failed.get(id)) {
            r["status"] = json!("failed");
            r["failure_reason"] = json!(reason);
        }
    };
    if path.starts_with("/v1/payment_intents/") {
        reason(&mut v);
        as_stripe_shows(s, req, &mut v).await;
    } else if path.starts_with("/v1/refunds/") {
        mark(&mut v);
    } else if path == "/v1/refunds" {
        v["data"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .for_each(mark);
    }
    HttpResponse::build(actix_web::http::StatusCode::from_u16(answer.status).unwrap())
        .content_type("application/json")
        .json(v)
}

/// A list of PaymentIntents by `created` (docs.stripe.com/api/payment_intents/list), which
/// localstripe does not filter: all of localstripe's, newest first, filtered here, then paged
/// by `limit` and `starting_after` as Stripe pages.
async fn created_between(
    s: &Strict,
    req: &HttpRequest,
    params: &[(String, String)],
    since: Option<i64>,
    until: Option<i64>,
) -> HttpResponse {
    let mut all: Vec<Value> = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..100 {
        let mut query = vec![("limit".to_owned(), "100".to_owned())];
        if let Some(a) = &after {
            query.push(("starting_after".into(), a.clone()));
        }
        let page = forward(s, req, "/v1/payment_intents", &query).await;
        let page: Value = serde_json::from_slice(&page.body).unwrap_or(Value::Null);
        let data = page["data"].as_array().cloned().unwrap_or_default();
        after = data
            .last()
            .and_then(|pi| pi["id"].as_str())
            .map(str::to_owned);
        all.extend(data);
        if page["has_more"] != json!(true) || after.is_none() {
            break;
        }
    }
    all.retain(|pi| {
        let created = pi["created"].as_i64().unwrap_or(0);
        since.is_none_or(|s| created >= s) && until.is_none_or(|u| created <= u)
    });
    for pi in &mut all {
        as_stripe_shows(s, req, pi).await;
    }
    page_of(&all, params, "/v1/payment_intents")
}

/// `GET /v1/events` (docs.stripe.com/api/events/list): the events made, newest first, of the
/// `types[]` asked for, created since `since`, paged by `limit` and `starting_after`.
fn events(s: &Strict, params: &[(String, String)], since: Option<i64>) -> HttpResponse {
    let types: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k.starts_with("types["))
        .map(|(_, v)| v.as_str())
        .collect();
    let mut all: Vec<Value> = s.events.lock().unwrap().clone();
    all.reverse();
    all.retain(|e| {
        since.is_none_or(|t| e["created"].as_i64().unwrap_or(0) >= t)
            && (types.is_empty() || types.contains(&e["type"].as_str().unwrap_or("")))
    });
    page_of(&all, params, "/v1/events")
}

/// One page of a list, newest first, as Stripe pages: `limit` objects after `starting_after`.
fn page_of(all: &[Value], params: &[(String, String)], url: &str) -> HttpResponse {
    let start = match param(params, "starting_after") {
        Some(id) => all
            .iter()
            .position(|o| o["id"] == id)
            .map_or(all.len(), |i| i + 1),
        None => 0,
    };
    let limit: usize = param(params, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(10);
    let page: Vec<Value> = all.iter().skip(start).take(limit).cloned().collect();
    let has_more = start + page.len() < all.len();
    HttpResponse::Ok().json(json!({"object": "list", "url": url, "data": page,
        "has_more": has_more}))
}
