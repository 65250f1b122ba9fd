//! Request plumbing shared by every route: request ids, JSON error bodies for whatever actix
//! answers by itself, HTTP metrics, and the JSON body and query extractors that name the
//! offending field.

use std::time::{Duration, Instant};

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::header::{self, HeaderValue},
    middleware::Next,
    web::{self, Bytes},
    Error, FromRequest, HttpMessage, HttpRequest, ResponseError,
};
use futures_util::{future::LocalBoxFuture, StreamExt};
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::{
    error::{serde_field, ApiError, REQUEST_ID},
    ids::{new_id, Id},
};

/// The largest request body accepted, in bytes (app data).
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// One file's routes: its handlers registered on their paths, and the OpenAPI paths of the
/// same handlers (from their `#[utoipa::path]`). Written with [`routes!`]; a resource's
/// `mount` hands them to the service.
#[derive(Clone, Copy)]
pub struct Routes {
    pub configure: fn(&mut web::ServiceConfig),
    pub api: fn() -> utoipa::openapi::OpenApi,
}

/// A file's routes, written once: each path with its methods and their handlers. It makes the
/// file's `ROUTES`: one actix resource per path (so a method it lacks is 405 with `Allow`) and
/// the OpenAPI paths of exactly those handlers, so the document and the router cannot differ
/// by a handler.
macro_rules! routes {
    ($($path:literal => { $($method:ident: $handler:ident),+ $(,)? }),+ $(,)?) => {
        pub const ROUTES: $crate::http::Routes = {
            fn configure(cfg: &mut ::actix_web::web::ServiceConfig) {
                $(
                    cfg.service(
                        ::actix_web::web::resource($path)
                            $(.route(::actix_web::web::$method().to($handler)))+,
                    );
                )+
            }
            #[derive(::utoipa::OpenApi)]
            #[openapi(paths($($($handler),+),+))]
            struct Api;
            $crate::http::Routes {
                configure,
                api: <Api as ::utoipa::OpenApi>::openapi,
            }
        };
    };
}
pub(crate) use routes;

fn incoming_request_id(req: &ServiceRequest) -> Option<String> {
    let value = req.headers().get("x-request-id")?.to_str().ok()?;
    let sane = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    sane.then(|| value.to_owned())
}

/// The path segments that precede a credential: the segment after one of these is a secret
/// the caller holds (a share link's token), never to be logged. A route that takes a credential
/// in its path names its segment here (tests/api/log_hygiene.rs checks every such route).
pub const CREDENTIAL_SEGMENTS: &[&str] = &["invoice-links"];

/// A request path as logs may show it: each credential segment replaced by `[redacted]`.
pub fn redacted_path(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.split('/').any(|s| CREDENTIAL_SEGMENTS.contains(&s)) {
        return path.into();
    }
    let mut credential_next = false;
    let shown: Vec<&str> = path
        .split('/')
        .map(|segment| {
            let shown = if credential_next {
                "[redacted]"
            } else {
                segment
            };
            credential_next = CREDENTIAL_SEGMENTS.contains(&segment);
            shown
        })
        .collect();
    shown.join("/").into()
}

/// Gives every request an id (the caller's `x-request-id` if sane), a tracing span, the
/// response header, and a timeline (the base one, until authentication enters its key's).
pub async fn request_id(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = incoming_request_id(&req).unwrap_or_else(|| new_id("req"));
    let path = redacted_path(req.path());
    let span =
        tracing::info_span!("request", request_id = %id, method = %req.method(), path = %path);
    // The request runs on the base timeline until its key names a sandbox merchant's.
    let run = crate::clock::scoped(crate::clock::Timeline::default(), next.call(req));
    let mut res = REQUEST_ID.scope(id.clone(), run.instrument(span)).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), value);
    }
    Ok(res)
}

/// The address of `http.operator_listen`'s listener, when set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorListener(pub std::net::SocketAddr);

/// With `http.operator_listen` set, the operator's routes (`/metrics`, `/admin/…`) answer only
/// on that listener and every other route only on `listen`; the health checks and `/version`
/// answer on both. Anything else is the one 404.
pub async fn operator_split(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if let Some(Some(operator)) = req.app_data::<Option<OperatorListener>>() {
        let path = req.path();
        let on_operator = req.request().app_config().local_addr() == operator.0;
        let operators = path == "/metrics" || path == "/admin" || path.starts_with("/admin/");
        let both = path.starts_with("/health/") || path == "/version";
        if !both && operators != on_operator {
            return Err(ApiError::from_status(actix_web::http::StatusCode::NOT_FOUND).into());
        }
    }
    next.call(req).await
}

/// Replaces the body of any error answer that is not already JSON (actix's own 404, 405,
/// 413 …) with the one error body, keeping the answer's other headers (the `Allow` of a 405).
pub async fn json_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let res = next.call(req).await?;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if (status.is_client_error() || status.is_server_error()) && !is_json {
        let (req, original) = res.into_parts();
        let mut body = ApiError::from_status(status).error_response();
        let own: Vec<header::HeaderName> = body.headers().keys().cloned().collect();
        for (name, value) in original.headers() {
            if !own.contains(name) && name != header::CONTENT_LENGTH {
                body.headers_mut().append(name.clone(), value.clone());
            }
        }
        return Ok(ServiceResponse::new(req, body));
    }
    Ok(res.map_into_boxed_body())
}

/// The `method` label: one of a fixed set, whatever method the client sent (a label taken
/// from client input would let anyone grow `/metrics`, and the memory behind it, without
/// bound).
fn method_label(method: &actix_web::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// Counts requests and times them by route pattern (never by raw path: ids are unbounded).
pub async fn http_metrics(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let method = method_label(req.method());
    let res = next.call(req).await?;
    let route = res
        .request()
        .match_pattern()
        .unwrap_or_else(|| "unmatched".to_owned());
    let took = started.elapsed();
    let status = res.status().as_u16();
    access_log(&res, method, &route, status, took);
    let labels = [
        ("method", method.to_owned()),
        ("route", route),
        ("status", status.to_string()),
    ];
    metrics::counter!("payd_http_requests_total", &labels).increment(1);
    metrics::histogram!("payd_http_request_duration_seconds", &labels).record(took.as_secs_f64());
    Ok(res)
}

/// The access log: one line per request at `info`, target `payd::access` (`log.filter =
/// "info,payd::access=off"` turns it off): the method, the route pattern (never the raw path,
/// which holds ids and share-link tokens), the status, the latency and the caller's merchant;
/// the request id is the request span's. Never a key, a header or a body.
fn access_log<B>(res: &ServiceResponse<B>, method: &str, route: &str, status: u16, took: Duration) {
    let extensions = res.request().extensions();
    let merchant = extensions
        .get::<crate::auth::Caller>()
        .map_or("", |c| c.merchant_id.as_str());
    tracing::info!(
        target: "payd::access",
        method,
        route,
        status,
        latency_ms = took.as_secs_f64() * 1000.0,
        merchant_id = merchant,
        "request"
    );
}

/// Reads a whole body, refusing one over `limit` bytes (early, when Content-Length says so).
pub async fn read_body(
    req: &HttpRequest,
    payload: &mut Payload,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::payload_too_large(limit));
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::invalid("invalid_body", e.to_string()))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::payload_too_large(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

fn body_limit(req: &HttpRequest) -> usize {
    req.app_data::<BodyLimit>()
        .map(|l| l.0)
        .unwrap_or(1024 * 1024)
}

/// A JSON request body whose errors name the field. An empty body reads as `{}`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiJson<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let mut payload = payload.take();
        Box::pin(async move {
            let content_type = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            if let Some(ct) = content_type {
                let essence = ct.split(';').next().unwrap_or("").trim();
                if essence != "application/json" && !essence.ends_with("+json") {
                    return Err(ApiError::new(
                        actix_web::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        crate::error::ErrorType::InvalidRequest,
                        "unsupported_media_type",
                        format!("send the body as application/json, not {essence}"),
                    )
                    .param("Content-Type"));
                }
            }
            let bytes = read_body(&req, &mut payload, body_limit(&req)).await?;
            parse_json(&bytes).map(ApiJson)
        })
    }
}

/// Strips serde_json's " at line L column C" suffix, which says nothing to an API client.
fn without_position(message: &str) -> &str {
    message
        .rsplit_once(" at line ")
        .map(|(head, _)| head)
        .unwrap_or(message)
}

/// serde says `expected struct LineInput`, `expected enum Brand` or `expected i64`: a client
/// reads "an object", "one of the documented values" or "an integer", not payd's type names.
fn without_rust_names(message: &str) -> String {
    let mut out = without_type_names(message);
    for (rust, plain) in PRIMITIVES {
        let expected = format!("expected {rust}");
        let mut at = 0;
        while let Some(found) = out[at..].find(&expected) {
            let start = at + found;
            let end = start + expected.len();
            if out[end..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                at = end;
                continue;
            }
            out.replace_range(start..end, &format!("expected {plain}"));
            at = start + "expected ".len() + plain.len();
        }
    }
    out
}

/// Rust's number types as a client would name them.
const PRIMITIVES: [(&str, &str); 12] = [
    ("i8", "an integer"),
    ("i16", "an integer"),
    ("i32", "an integer"),
    ("i64", "an integer"),
    ("isize", "an integer"),
    ("u8", "a non-negative integer"),
    ("u16", "a non-negative integer"),
    ("u32", "a non-negative integer"),
    ("u64", "a non-negative integer"),
    ("usize", "a non-negative integer"),
    ("f32", "a number"),
    ("f64", "a number"),
];

/// `struct Name` and `enum Name` in a serde message.
fn without_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("struct ").or_else(|| rest.find("enum ")) {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let (word, replacement) = if tail.starts_with("struct ") {
            ("struct ", "an object")
        } else {
            ("enum ", "one of the documented values")
        };
        let after = &tail[word.len()..];
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        out.push_str(replacement);
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

/// Parses a JSON body, mapping every failure to a 400 that names the field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    // Every request body is an object: an array or a scalar is refused before serde names the
    // Rust type it expected.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') {
        return Err(ApiError::invalid(
            "invalid_json",
            "the body must be a JSON object",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::invalid(
                "invalid_json",
                format!("the body is not valid JSON: {inner}"),
            );
        }
        let message = without_rust_names(without_position(&inner.to_string()));
        let message = message.as_str();
        let field = serde_field(message);
        let param = match (path.as_str(), field) {
            (".", Some(f)) => Some(f.to_owned()),
            (".", None) => None,
            (p, Some(f)) if !p.ends_with(f) => Some(format!("{p}.{f}")),
            (p, _) => Some(p.to_owned()),
        };
        let code = if message.starts_with("missing field") {
            "parameter_missing"
        } else if message.starts_with("unknown field") {
            "parameter_unknown"
        } else {
            "parameter_invalid"
        };
        let mut err = ApiError::invalid(code, message.to_owned());
        err.param = param;
        err
    })?;
    de.end().map_err(|e| {
        ApiError::invalid("invalid_json", format!("the body is not valid JSON: {e}"))
    })?;
    Ok(value)
}

/// A query string whose errors name the parameter.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned> FromRequest for ApiQuery<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(parse_query(req.query_string()).map(ApiQuery))
    }
}

/// Parses a query string, mapping a failure to a 400 that names the parameter.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        let param = serde_field(&message)
            .map(str::to_owned)
            .or_else(|| (path != ".").then_some(path));
        let code = if message.starts_with("unknown field") {
            "parameter_unknown"
        } else {
            "parameter_invalid"
        };
        let mut err = ApiError::invalid(code, format!("invalid query string: {message}"));
        err.param = param;
        err
    })
}

/// Path errors (rare: our path segments are strings) in the one error shape.
pub fn path_config() -> web::PathConfig {
    web::PathConfig::default()
        .error_handler(|err, _req| ApiError::invalid("parameter_invalid", err.to_string()).into())
}

/// The id a path names, parsed: a value that is not an id of its kind answers 404 "no such
/// …" naming the parameter, before any lookup or actor.
pub struct PathId<T>(pub T);

impl<T: Id + 'static> FromRequest for PathId<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(path_id(req).map(PathId))
    }
}

/// The two ids a path names (`/products/{product_id}/prices/{price_id}`), each parsed as
/// [`PathId`] parses one: the first that is not an id of its kind answers 404 naming it.
pub struct PathIds<A, B>(pub A, pub B);

impl<A: Id + 'static, B: Id + 'static> FromRequest for PathIds<A, B> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let ids = path_id::<A>(req).and_then(|a| Ok(PathIds(a, path_id::<B>(req)?)));
        std::future::ready(ids)
    }
}

fn path_id<T: Id>(req: &HttpRequest) -> Result<T, ApiError> {
    req.match_info()
        .get(T::PARAM)
        .and_then(T::parse)
        .ok_or_else(ApiError::no_such::<T>)
}

impl From<crate::commit::CommitError> for ApiError {
    /// A lost race is 409 `concurrent_update` (retry); a refused change, the 409 of its
    /// [`Conflict`](crate::conflict::Conflict).
    #[track_caller]
    fn from(e: crate::commit::CommitError) -> Self {
        use crate::commit::CommitError;
        match e {
            CommitError::LostRace => ApiError::concurrent_update("object"),
            CommitError::Refused(c) => c.into(),
            CommitError::Db(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_segments_never_reach_a_log() {
        assert_eq!(
            redacted_path("/invoice-links/isl_secret"),
            "/invoice-links/[redacted]"
        );
        assert_eq!(
            redacted_path("/invoice-links/isl_secret/pdf"),
            "/invoice-links/[redacted]/pdf"
        );
        assert_eq!(redacted_path("/payments/pay_1"), "/payments/pay_1");
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        amount: i64,
        inner: Option<Inner>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        number: String,
    }

    fn err(body: &str) -> ApiError {
        parse_json::<Req>(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn json_errors_name_the_field() {
        let e = err("{}");
        assert_eq!(
            (e.code, e.param.as_deref()),
            ("parameter_missing", Some("amount"))
        );
        let e = err(r#"{"amount":"ten"}"#);
        assert_eq!(
            (e.code, e.param.as_deref()),
            ("parameter_invalid", Some("amount"))
        );
        let e = err(r#"{"amount":1,"amout":2}"#);
        assert_eq!(
            (e.code, e.param.as_deref()),
            ("parameter_unknown", Some("amout"))
        );
        let e = err(r#"{"amount":1,"inner":{"number":5}}"#);
        assert_eq!(e.param.as_deref(), Some("inner.number"));
        let e = err(r#"{"amount":1,"inner":{}}"#);
        assert_eq!(e.param.as_deref(), Some("inner.number"));
        let e = err(r#"{"amount":"#);
        assert_eq!((e.code, e.param.as_deref()), ("invalid_json", None));
        let e = err(r#"{"amount":1} x"#);
        assert_eq!(e.code, "invalid_json");
        let e = err(r#"{"amount":"ten"}"#);
        assert!(!e.message.contains("line"), "{}", e.message);
    }
}
