//! The one error body every non-2xx answer carries, and the mapping of lower-layer errors to it.
//!
//! `{"error": {"type", "code", "message", "param"?, "request_id"}}`. A 5xx body reveals
//! nothing internal; its cause and the place it was raised go to the log.

use std::panic::Location;

use actix_web::{http::StatusCode, HttpResponse, ResponseError};
use serde::Serialize;

tokio::task_local! {
    /// The id of the request being served, set by the request-id middleware.
    pub static REQUEST_ID: String;
}

/// The current request's id, or `-` outside a request.
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(|id| id.clone())
        .unwrap_or_else(|_| "-".to_owned())
}

pub mod codes;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    InvalidRequest,
    Authentication,
    Permission,
    NotFound,
    Conflict,
    PayloadTooLarge,
    RateLimited,
    Processor,
    /// 503: the service cannot take the request now (a full actor mailbox, shutting down).
    Unavailable,
    Internal,
}

impl ErrorType {
    /// The `type` an error body carries.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorType::InvalidRequest => "invalid_request",
            ErrorType::Authentication => "authentication",
            ErrorType::Permission => "permission",
            ErrorType::NotFound => "not_found",
            ErrorType::Conflict => "conflict",
            ErrorType::PayloadTooLarge => "payload_too_large",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::Processor => "processor",
            ErrorType::Unavailable => "unavailable",
            ErrorType::Internal => "internal",
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: ErrorType,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
    /// Seconds for a `Retry-After` header (429, 503).
    pub retry_after: Option<u32>,
    /// Set when the error is rendered outside its request's scope (it then also sets the
    /// `x-request-id` header itself).
    pub request_id: Option<String>,
    /// What went wrong inside, for the log only (boxed: errors travel in every `Result`).
    internal: Option<Box<Internal>>,
}

#[derive(Debug)]
struct Internal {
    cause: String,
    location: &'static Location<'static>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: BodyInner<'a>,
}

#[derive(Serialize)]
struct BodyInner<'a> {
    #[serde(rename = "type")]
    kind: ErrorType,
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<&'a str>,
    request_id: String,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: ErrorType,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        debug_assert!(
            codes::listed(code, status.as_u16(), kind),
            "error code `{code}` ({status}, {}) is not in error::codes::CODES: add its row, then PAYD_UPDATE_DOCS=1 cargo test --lib error::codes",
            kind.as_str()
        );
        Self {
            status,
            kind,
            code,
            message: message.into(),
            param: None,
            retry_after: None,
            request_id: None,
            internal: None,
        }
    }

    /// Names the request field (or header) the error is about.
    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// 400 `invalid_request`.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorType::InvalidRequest,
            code,
            message,
        )
    }

    /// 400 about one field.
    pub fn invalid_param(param: &str, message: impl Into<String>) -> Self {
        Self::invalid("parameter_invalid", message).param(param)
    }

    pub fn unauthenticated(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            ErrorType::Authentication,
            code,
            message,
        )
    }

    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorType::Permission, code, message)
    }

    /// 404 for an object that does not exist for this merchant and mode (or at all).
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorType::NotFound,
            "resource_missing",
            format!("no such {what}"),
        )
    }

    /// 404 for an id of kind `T` that names nothing here: "no such {noun}", naming its
    /// parameter.
    /// 502 `processor_error`: the processor failed or refused what payd sent it.
    pub fn processor(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            ErrorType::Processor,
            "processor_error",
            message,
        )
    }

    pub fn no_such<T: crate::ids::Id>() -> Self {
        Self::not_found(T::NOUN).param(T::PARAM)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, ErrorType::Conflict, code, message)
    }

    /// 410: what was asked for existed and is gone for good (purged by retention).
    pub fn gone(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, ErrorType::InvalidRequest, code, message)
    }

    /// 409 `limit_reached`: the merchant is at one of its configured bounds, named here.
    pub fn limit_reached(limit: &str, max: impl std::fmt::Display) -> Self {
        Self::conflict(
            "limit_reached",
            format!("this merchant has reached {limit} ({max}); the operator can raise it"),
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorType::PayloadTooLarge,
            "payload_too_large",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// 429 with `Retry-After: wait` seconds.
    pub fn rate_limited(code: &'static str, message: impl Into<String>, wait: u32) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorType::RateLimited,
            code,
            message,
        );
        e.retry_after = Some(wait);
        e
    }

    /// 409 `concurrent_update`: another writer changed `what` first. Sent again, the request
    /// decides on the new state (`Retry-After: 1`, so it is not stored under an
    /// `Idempotency-Key` either).
    pub fn concurrent_update(what: &str) -> Self {
        let mut e = Self::conflict(
            "concurrent_update",
            format!("the {what} was changed by another request; retry"),
        );
        e.retry_after = Some(1);
        e
    }

    pub fn overloaded() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Unavailable,
            "overloaded",
            "too many requests for this object are waiting; retry shortly",
        );
        e.retry_after = Some(1);
        e
    }

    /// 500. The cause is logged with the caller's location; the client sees nothing of it.
    #[track_caller]
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let mut e = Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorType::Internal,
            "internal_error",
            "an internal error occurred; the request id identifies it in the logs",
        );
        e.internal = Some(Box::new(Internal {
            cause: cause.to_string(),
            location: Location::caller(),
        }));
        e
    }

    /// The error body for a bare status (used for answers actix produced without a body).
    pub fn from_status(status: StatusCode) -> Self {
        let (kind, code, message) = match status.as_u16() {
            401 => (
                ErrorType::Authentication,
                "unauthenticated",
                "authentication required",
            ),
            403 => (ErrorType::Permission, "forbidden", "not allowed"),
            404 => (ErrorType::NotFound, "route_not_found", "no such route"),
            405 => (
                ErrorType::InvalidRequest,
                "method_not_allowed",
                "this route does not accept that method",
            ),
            406 => (
                ErrorType::InvalidRequest,
                "not_acceptable",
                "not acceptable",
            ),
            408 => (
                ErrorType::InvalidRequest,
                "request_timeout",
                "the request took too long",
            ),
            409 => (ErrorType::Conflict, "conflict", "conflict"),
            413 => (
                ErrorType::PayloadTooLarge,
                "payload_too_large",
                "the request body is too large",
            ),
            415 => (
                ErrorType::InvalidRequest,
                "unsupported_media_type",
                "send the body as application/json",
            ),
            429 => (ErrorType::RateLimited, "rate_limited", "too many requests"),
            503 => (
                ErrorType::Unavailable,
                "unavailable",
                "the service is unavailable",
            ),
            s if s >= 500 => (
                ErrorType::Internal,
                "internal_error",
                "an internal error occurred",
            ),
            _ => (
                ErrorType::InvalidRequest,
                "invalid_request",
                "the request is invalid",
            ),
        };
        Self::new(status, kind, code, message)
    }

    pub fn body_bytes(&self) -> Vec<u8> {
        let body = Body {
            error: BodyInner {
                kind: self.kind,
                code: self.code,
                message: &self.message,
                param: self.param.as_deref(),
                request_id: self.request_id.clone().unwrap_or_else(current_request_id),
            },
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        // An unavailable database is logged once per outage (`telemetry::database_outage`),
        // not once per request it fails.
        if self.status.is_server_error() && self.code != "database_unavailable" {
            tracing::error!(
                code = %self.code,
                cause = self.internal.as_ref().map_or("-", |i| i.cause.as_str()),
                at = %self.internal.as_ref().map(|i| i.location.to_string()).unwrap_or_default(),
                "request failed"
            );
        }
        let mut res = HttpResponse::build(self.status);
        res.content_type("application/json");
        if let Some(secs) = self.retry_after {
            res.insert_header(("retry-after", secs.to_string()));
        }
        if let Some(id) = &self.request_id {
            res.insert_header(("x-request-id", id.as_str()));
        }
        res.body(self.body_bytes())
    }
}

impl From<crate::conflict::Conflict> for ApiError {
    /// The answer to a change refused inside its commit: a bound is 409 `limit_reached`
    /// naming its setting; the others name their condition.
    fn from(c: crate::conflict::Conflict) -> Self {
        use crate::conflict::Conflict;
        let message = c.to_string();
        match c {
            Conflict::Bound { setting, max } => ApiError::limit_reached(setting, max),
            Conflict::ActiveMandate => ApiError::conflict(
                "active_mandate",
                "the customer has an active mandate; revoke it before deleting the customer",
            ),
            Conflict::PaymentRefunded => {
                ApiError::conflict("payment_refunded", message).param("payment_id")
            }
            Conflict::InsufficientBalance => {
                ApiError::invalid("insufficient_balance", message).param("amount")
            }
            Conflict::ProductHasSales => ApiError::conflict("product_has_sales", message),
            Conflict::ProductInUse => {
                ApiError::conflict("product_in_use", message).param("product_id")
            }
            Conflict::PriceInUse => ApiError::conflict("price_in_use", message).param("price_id"),
            Conflict::EventMissing => ApiError::no_such::<crate::ids::EventId>(),
            Conflict::DeliveriesMade => ApiError::concurrent_update("event"),
        }
    }
}

impl From<sea_orm::DbErr> for ApiError {
    /// A database that cannot be reached (or written) is 503 `database_unavailable` with
    /// `Retry-After`: the client may send the same request again, with the same
    /// `Idempotency-Key`. Any other database error is a bug: 500.
    #[track_caller]
    fn from(e: sea_orm::DbErr) -> Self {
        if !database_unavailable(&e) {
            return ApiError::internal(format!("database: {e}"));
        }
        crate::telemetry::database_outage(&e);
        let mut unavailable = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Unavailable,
            "database_unavailable",
            "the database cannot be reached now; retry shortly (with the same Idempotency-Key)",
        );
        unavailable.retry_after = Some(2);
        unavailable
    }
}

/// Whether an error says the database cannot be reached or written, rather than that a
/// statement was wrong: no connection within the acquire timeout, a connection lost mid-way,
/// PostgreSQL's connection-exception, shutdown and read-only states, SQLite's full, read-only
/// or failing disk.
pub fn database_unavailable(e: &sea_orm::DbErr) -> bool {
    use sea_orm::{sqlx::Error as Sqlx, DbErr, RuntimeErr};
    match e {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => true,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            match &**e {
                Sqlx::Io(_)
                | Sqlx::Tls(_)
                | Sqlx::Protocol(_)
                | Sqlx::PoolTimedOut
                | Sqlx::PoolClosed
                | Sqlx::WorkerCrashed => true,
                Sqlx::Database(db) => {
                    let code = db.code().unwrap_or_default();
                    // PostgreSQL: class 08 (connection exception), 57P01–57P03 (shutdown),
                    // 25006 (a read-only transaction: a standby, a demoted primary, or
                    // `default_transaction_read_only`; "cannot execute … during recovery").
                    let postgres =
                        code.starts_with("08") || code.starts_with("57P0") || code == "25006";
                    // SQLite (primary code of an extended one): READONLY 8, IOERR 10, FULL 13,
                    // CANTOPEN 14.
                    let sqlite = code
                        .parse::<i64>()
                        .is_ok_and(|n| matches!(n & 0xff, 8 | 10 | 13 | 14));
                    postgres || sqlite
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether PostgreSQL rolled the transaction back to break a deadlock (`40P01`) or a
/// serialization failure (`40001`): nothing of it was written, and running it again may
/// succeed.
pub fn transaction_conflict(e: &sea_orm::DbErr) -> bool {
    use sea_orm::{sqlx::Error as Sqlx, DbErr, RuntimeErr};
    match e {
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            matches!(&**e, Sqlx::Database(db) if matches!(db.code().as_deref(), Some("40P01" | "40001")))
        }
        _ => false,
    }
}

/// Pulls the field name out of a serde message such as "missing field `amount`".
pub fn serde_field(message: &str) -> Option<&str> {
    ["missing field `", "unknown field `", "duplicate field `"]
        .iter()
        .find_map(|lead| message.split_once(lead))
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(field, _)| field)
}

/// Why an actor gave no answer, apart from its own load error: for a domain error that
/// orchestrates several actors (`wallet::follow`), which keeps its actors' errors as they are.
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    #[error("the actor's mailbox is full")]
    Overloaded,
    #[error("the actor died twice")]
    Died,
}

impl Unanswered {
    /// An actor's failure split: its load error, or why there was no answer.
    pub fn split<E>(e: payd_actors::ActorError<E>) -> Result<E, Unanswered> {
        match e {
            payd_actors::ActorError::Load(e) => Ok(e),
            payd_actors::ActorError::Overloaded => Err(Unanswered::Overloaded),
            payd_actors::ActorError::Died => Err(Unanswered::Died),
        }
    }

    /// An actor's failure as the sender's error `T`: its load error converted, or why there
    /// was no answer. The body of every `From<ActorError<E>>` of an error that sends to actors.
    pub fn fold<E: Into<T>, T: From<Unanswered>>(e: payd_actors::ActorError<E>) -> T {
        match Self::split(e) {
            Ok(e) => e.into(),
            Err(unanswered) => unanswered.into(),
        }
    }
}

impl From<Unanswered> for ApiError {
    #[track_caller]
    fn from(e: Unanswered) -> Self {
        match e {
            Unanswered::Overloaded => ApiError::overloaded(),
            Unanswered::Died => ApiError::internal("the actor died twice"),
        }
    }
}

/// An actor's answer failure: its load error as that error maps, a full mailbox as 503
/// `overloaded`, an actor that died twice as a 500.
impl<E: Into<ApiError>> From<payd_actors::ActorError<E>> for ApiError {
    #[track_caller]
    fn from(e: payd_actors::ActorError<E>) -> Self {
        Unanswered::fold(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_field_finds_the_name() {
        assert_eq!(
            serde_field("missing field `amount` at line 1"),
            Some("amount")
        );
        assert_eq!(
            serde_field("unknown field `amout`, expected one of `amount`"),
            Some("amout")
        );
        assert_eq!(serde_field("invalid type: string"), None);
    }

    #[test]
    fn internal_errors_reveal_nothing() {
        let e = ApiError::internal("password=hunter2 in a connection string");
        let body = String::from_utf8(e.body_bytes()).unwrap();
        assert!(!body.contains("hunter2"));
        assert!(body.contains("\"type\":\"internal\""));
    }
}

/// The error body every non-2xx answer carries.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    #[schema(value_type = ErrorType)]
    r#type: String,
    /// A stable snake_case code: each is in docs/errors.md with its status and what to do.
    #[schema(schema_with = codes::schema)]
    code: String,
    message: String,
    /// The request field or header the error is about.
    param: Option<String>,
    request_id: String,
}
