//! `Idempotency-Key` on every POST: the first answer is stored per merchant, mode, scope and
//! key for a day and replayed byte for byte; the same key with another request is a 409, and
//! so is a retry while the first is still running.
//!
//! It is a middleware, so routes get it by being mounted under it. It runs after the caller
//! is authenticated and never lets a key see what it could not get by asking itself:
//!
//! - the scope is the calling key's kind and bound shop (`secret:*`, `publishable:prof_…`), so
//!   a publishable key or a key of another shop never meets a secret key's answers, and each
//!   gets the 401/403 its own request earns;
//! - answers that a retry should be allowed to change (401, 403, 429, 5xx, and any answer with
//!   `Retry-After`) are not stored: the key is released instead, so a refused request never
//!   claims it;
//! - an answer that carries a one-time secret (a new API key, a webhook secret) is marked by
//!   its route with [`OneTimeSecret`] and replayed only to the API key that made the request;
//! - an upload (`POST /files`) is fingerprinted without its body, which is streamed to
//!   storage and never held here: the same key replays the first upload's answer;
//! - read-only routes that take a POST body (`POST …/list`, `POST /events/{merchant_id}`)
//!   store nothing.
//!
//! Invariant: a key's request runs at most once. It runs in a task of its own, so the request
//! deadline or a closed connection does not cut it off before its answer is stored; its lock is
//! renewed while it runs, so a key is taken over only when the instance running it died. A
//! request that committed a change before its answer was lost (a 5xx, a database gone before
//! the answer was stored, an instance gone) left its key a recovery point ([`crate::recovery`]):
//! the retry that takes the key over resumes from that object instead of running again.

use actix_web::{
    body::{self, BoxBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::{header, Method, StatusCode},
    middleware::Next,
    web, Error, HttpMessage, HttpRequest, HttpResponse,
};
use chrono::{DateTime, Duration, Utc};
use payd_entity::idempotency_key::{self, Entity as Keys};
use sea_orm::{
    sea_query::Expr, ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
    QueryFilter, TryInsertResult,
};
use sha2::{Digest, Sha256};

use crate::stored::Json;
use crate::{
    auth::{self, Caller},
    error::ApiError,
    http::read_body,
    recovery::{KeyState, RequestKey, Resume},
    state::AppState,
};

pub const HEADER: &str = "idempotency-key";
/// Response headers stored with the body and replayed.
const REPLAYED_HEADERS: [header::HeaderName; 2] = [header::CONTENT_TYPE, header::LOCATION];

/// Put in a response's extensions by a route whose answer shows a secret once: the answer is
/// replayed only to the API key that asked for it.
#[derive(Debug, Clone, Copy)]
pub struct OneTimeSecret;

/// Marks `res` as carrying a one-time secret.
pub fn one_time_secret(mut res: HttpResponse) -> HttpResponse {
    res.extensions_mut().insert(OneTimeSecret);
    res
}

/// Read-only routes that take their query as a POST body: nothing to protect, nothing stored.
fn read_only(path: &str) -> bool {
    path.ends_with("/list")
        || path
            .strip_prefix("/events/")
            .is_some_and(|rest| !rest.trim_end_matches('/').contains('/'))
}

/// Routes whose body is streamed to storage (`POST /files`).
fn streamed(path: &str) -> bool {
    path == "/files"
}

/// The key a request runs under, for the commits of its effect to name their object as its
/// recovery point; `None` without an `Idempotency-Key`.
pub fn request_key(req: &HttpRequest) -> Option<RequestKey> {
    req.extensions().get::<RequestKey>().cloned()
}

/// The object of kind `T` (a payment, a refund, …) a retried request resumes from: the first
/// run committed a change to it and its answer was lost. `None` for a first run, a retry of
/// one that changed nothing, or a recovery point of another kind.
pub fn resumed<T: crate::ids::Id>(req: &HttpRequest) -> Option<T> {
    req.extensions()
        .get::<Resume>()
        .and_then(|r| T::parse(&r.0))
}

/// What to do with a request that carries a key.
#[derive(Debug)]
pub enum Begin {
    /// The key is ours now: run the request, or resume from the object its first run changed.
    Proceed { resume: Option<String> },
    /// Answered before: send this again.
    Replay(Box<idempotency_key::Model>),
    /// Used before for a different request.
    Reused,
    /// The first request with this key is still running.
    InUse,
}

fn parse_key(raw: &header::HeaderValue) -> Result<String, ApiError> {
    let key = raw.to_str().unwrap_or("");
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::invalid_param(
            "Idempotency-Key",
            "the Idempotency-Key header must be 1 to 255 visible ASCII characters",
        ));
    }
    Ok(key.to_owned())
}

fn fingerprint(req: &ServiceRequest, body: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [
        req.method().as_str().as_bytes(),
        req.path().as_bytes(),
        req.query_string().as_bytes(),
        req.headers()
            .get("x-profile-id")
            .map(|v| v.as_bytes())
            .unwrap_or_default(),
    ] {
        h.update(part);
        h.update([0u8]);
    }
    // A JSON body counts as what it says, not how it is spelled: a client that serializes the
    // same request again (other key order, other whitespace) gets the first answer.
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => {
            let mut canonical = Vec::with_capacity(body.len());
            write_canonical(&json, &mut canonical);
            h.update(canonical);
        }
        Err(_) => h.update(body),
    }
    hex::encode(h.finalize())
}

/// `value` as compact JSON with every object's keys sorted.
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match value {
        Value::Object(fields) => {
            let mut fields: Vec<_> = fields.iter().collect();
            fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (name, field)) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(name).unwrap_or_default());
                out.push(b':');
                write_canonical(field, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

/// The request's fingerprint. An upload goes to storage as it arrives and is never held
/// here: its fingerprint leaves the body out (a retried upload's form boundary differs
/// anyway); any other body is read (within the size limit) and put back for the route.
async fn request_print(req: &mut ServiceRequest, state: &AppState) -> Result<String, ApiError> {
    if streamed(req.path()) {
        return Ok(fingerprint(req, &[]));
    }
    let mut payload = req.take_payload();
    let limit = state.settings.http.max_body_bytes;
    let body = read_body(req.request(), &mut payload, limit).await?;
    let print = fingerprint(req, &body);
    req.set_payload(Payload::from(body));
    Ok(print)
}

/// `(code, message)` of the 409s of a key that cannot run this request.
const SECRET_FOR_ANOTHER: (&str, &str) = (
    "idempotency_key_reused",
    "this Idempotency-Key's answer holds a one-time secret and is replayed only to the API key \
     that made the request",
);
const REUSED: (&str, &str) = (
    "idempotency_key_reused",
    "this Idempotency-Key was used with a different request",
);
const IN_USE: (&str, &str) = (
    "idempotency_key_in_use",
    "a request with this Idempotency-Key is still being processed; retry to get its answer",
);

fn key_conflict((code, message): (&'static str, &str)) -> ApiError {
    ApiError::conflict(code, message).param("Idempotency-Key")
}

/// The middleware.
pub async fn idempotency(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(raw) = req
        .headers()
        .get(HEADER)
        .filter(|_| req.method() == Method::POST && !read_only(req.path()))
        .cloned()
    else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let key = match parse_key(&raw) {
        Ok(key) => key,
        Err(e) => return Ok(req.error_response(e)),
    };
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(req.error_response(ApiError::internal("AppState missing")));
    };
    let caller = match auth::authenticate(req.request(), &state).await {
        Ok(caller) => caller,
        // The caller could not be told (the database is unavailable): answered here, never
        // passed on, or the route might authenticate a moment later and run the request
        // without its key — a second payment for a retried one.
        Err(e) if e.status.is_server_error() => return Ok(req.error_response(e)),
        // Without a valid key there is no merchant to scope the key to: the route answers 401.
        Err(_) => return Ok(next.call(req).await?.map_into_boxed_body()),
    };
    let print = match request_print(&mut req, &state).await {
        Ok(print) => print,
        Err(e) => return Ok(req.error_response(e)),
    };

    let store = KeyStore::new(&state, &caller, key);
    let begun = match store.begin(&state.db, &print).await {
        Ok(b) => b,
        Err(e) => return Ok(req.error_response(ApiError::from(e))),
    };
    let resume = match begun {
        Begin::Proceed { resume } => resume,
        Begin::Replay(row)
            if row
                .owner_key_id
                .as_deref()
                .is_none_or(|owner| owner == caller.key_id.as_str()) =>
        {
            return Ok(match replay(&row) {
                Ok(replayed) => req.into_response(replayed),
                Err(e) => req.error_response(ApiError::from(e)),
            });
        }
        Begin::Replay(_) => return Ok(req.error_response(key_conflict(SECRET_FOR_ANOTHER))),
        Begin::Reused => return Ok(req.error_response(key_conflict(REUSED))),
        Begin::InUse => {
            let mut e = key_conflict(IN_USE);
            e.retry_after = Some(1);
            return Ok(req.error_response(e));
        }
    };
    req.extensions_mut().insert(store.key.clone());
    if let Some(object) = resume {
        req.extensions_mut().insert(Resume(object));
    }

    // The request runs to its end in a task of its own: a client that stops waiting (the
    // request deadline, a closed connection) does not stop it, so its answer is stored under
    // the key and a retry replays it instead of running the request a second time. Meanwhile
    // its lock is renewed, so no retry takes the key over while it runs.
    let caller_key = caller.key_id.to_string();
    let run = async move {
        let res = tokio::select! {
            res = next.call(req) => res?,
            () = store.hold(&state) => unreachable!("holding a key never ends"),
        };
        finish(&state, &store, &caller_key, res).await
    };
    actix_rt::spawn(crate::clock::scoped(crate::clock::current(), run))
        .await
        .unwrap_or_else(|e| Err(ApiError::internal(format!("idempotent request: {e}")).into()))
}

/// Stores (or releases) the key with the request's answer, and returns the answer.
async fn finish(
    state: &web::Data<AppState>,
    store: &KeyStore,
    caller_key: &str,
    res: ServiceResponse<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let (req, res) = res.into_parts();
    let status = res.status();
    let owner = res
        .extensions()
        .contains::<OneTimeSecret>()
        .then_some(caller_key);
    let (mut head, res_body) = res.into_parts();
    let bytes = match body::to_bytes(res_body).await {
        Ok(b) => b,
        Err(_) => {
            let _ = store.release(&state.db).await;
            return Ok(ServiceResponse::new(
                req,
                HttpResponse::from_error(ApiError::internal("response body could not be read")),
            ));
        }
    };
    // An answer that asks for a retry (`Retry-After`: a lost race, an operation still pending
    // at the processor) is not the request's outcome: the retry must run, not replay it.
    let keep = !(status.is_server_error()
        || status == StatusCode::UNAUTHORIZED
        || status == StatusCode::FORBIDDEN
        || status == StatusCode::TOO_MANY_REQUESTS
        || head.headers().contains_key(header::RETRY_AFTER));
    let text = std::str::from_utf8(&bytes).ok().filter(|_| keep);
    let saved = match text {
        Some(text) => {
            store
                .complete(&state.db, status, head.headers(), text, owner)
                .await
        }
        None => match store.release(&state.db).await {
            // The database is gone (the answer is most likely its 503): the key is released as
            // soon as it answers again, not when its lock lapses.
            Err(e) if crate::error::database_unavailable(&e) => {
                release_later(state.clone(), store.clone());
                Ok(())
            }
            other => other,
        },
    };
    if let Err(e) = saved {
        // The answer stands; only its replay is lost, and the key is released after its lock.
        tracing::warn!(error = %e, "could not store the idempotent answer");
    }
    head.headers_mut().remove(header::CONTENT_LENGTH);
    Ok(ServiceResponse::new(
        req,
        head.set_body(BoxBody::new(bytes)),
    ))
}

/// Releases a key whose release the database refused, as soon as it answers again: tried
/// every half second until the key's lock would have lapsed anyway (bounded).
fn release_later(state: web::Data<AppState>, store: KeyStore) {
    let tries = (store.lock.num_milliseconds() / 500).max(1);
    actix_rt::spawn(async move {
        for _ in 0..tries {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            if store.release(&state.db).await.is_ok() {
                return;
            }
        }
    });
}

/// The answer stored under the key, as it was sent.
fn replay(row: &idempotency_key::Model) -> Result<HttpResponse, sea_orm::DbErr> {
    let status = row
        .response_status
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let mut res = HttpResponse::build(status);
    let headers = row.response_headers.clone().unwrap_or_default().0;
    for (name, value) in headers {
        res.insert_header((name, value));
    }
    res.insert_header(("idempotent-replayed", "true"));
    Ok(res.body(row.response_body.clone().unwrap_or_default()))
}

/// One key's row, addressed by merchant, mode, scope and key.
#[derive(Clone)]
struct KeyStore {
    key: RequestKey,
    now: DateTime<Utc>,
    ttl: Duration,
    lock: Duration,
}

impl KeyStore {
    fn new(state: &AppState, caller: &Caller, key: String) -> Self {
        let cfg = &state.settings.idempotency;
        Self {
            key: RequestKey {
                merchant_id: caller.merchant_id.to_string(),
                mode: caller.mode,
                scope: format!(
                    "{}:{}",
                    caller.kind.as_str(),
                    caller.bound_profile.as_ref().map_or("*", |p| p.as_str())
                ),
                key,
            },
            now: state.clock.base(),
            ttl: Duration::hours(cfg.ttl_hours as i64),
            lock: Duration::seconds(cfg.lock_secs as i64),
        }
    }

    fn this(&self) -> sea_orm::Condition {
        self.key.this()
    }

    /// Renews the key's lock while its request runs, a third of the lock at a time; never
    /// returns. The lock lapses only when its owner is gone (the instance died).
    async fn hold(&self, state: &AppState) {
        let every = std::time::Duration::from_secs((self.lock.num_seconds() as u64 / 3).max(1));
        loop {
            tokio::time::sleep(every).await;
            let renewed = Keys::update_many()
                .col_expr(
                    idempotency_key::Column::LockedUntil,
                    Expr::value(state.clock.base() + self.lock),
                )
                .filter(self.this())
                .filter(idempotency_key::Column::State.eq(KeyState::InFlight))
                .exec(&state.db)
                .await;
            if let Err(e) = renewed {
                tracing::warn!(error = %e, "could not renew an idempotency key's lock");
            }
        }
    }

    async fn begin(&self, db: &impl ConnectionTrait, print: &str) -> Result<Begin, DbErr> {
        // Two rounds: the second follows the removal of an expired row.
        for _ in 0..2 {
            let row = idempotency_key::ActiveModel {
                merchant_id: Set(self.key.merchant_id.clone()),
                mode: Set(self.key.mode),
                scope: Set(self.key.scope.clone()),
                key: Set(self.key.key.clone()),
                fingerprint: Set(print.to_owned()),
                state: Set(KeyState::InFlight),
                response_status: Set(None),
                response_headers: Set(None),
                response_body: Set(None),
                owner_key_id: Set(None),
                created_at: Set(self.now),
                locked_until: Set(self.now + self.lock),
                recovery_point: Set(None),
            };
            let inserted = Keys::insert(row)
                .on_conflict_do_nothing()
                .exec_without_returning(db)
                .await?;
            if matches!(inserted, TryInsertResult::Inserted(n) if n > 0) {
                return Ok(Begin::Proceed { resume: None });
            }
            let Some(existing) = Keys::find().filter(self.this()).one(db).await? else {
                continue;
            };
            if existing.created_at + self.ttl <= self.now {
                Keys::delete_many()
                    .filter(self.this())
                    .filter(idempotency_key::Column::CreatedAt.eq(existing.created_at))
                    .exec(db)
                    .await?;
                continue;
            }
            if existing.fingerprint != print {
                return Ok(Begin::Reused);
            }
            if existing.state == KeyState::Completed {
                return Ok(Begin::Replay(Box::new(existing)));
            }
            if existing.locked_until > self.now {
                return Ok(Begin::InUse);
            }
            // The holder died before answering, or its answer was not kept: take the key over
            // (and resume from what it changed), unless someone else just did.
            let taken = Keys::update_many()
                .col_expr(
                    idempotency_key::Column::LockedUntil,
                    Expr::value(self.now + self.lock),
                )
                .filter(self.this())
                .filter(idempotency_key::Column::State.eq(KeyState::InFlight))
                .filter(idempotency_key::Column::LockedUntil.eq(existing.locked_until))
                .exec(db)
                .await?;
            return Ok(if taken.rows_affected == 1 {
                Begin::Proceed {
                    resume: existing.recovery_point,
                }
            } else {
                Begin::InUse
            });
        }
        Ok(Begin::InUse)
    }

    async fn complete(
        &self,
        db: &impl ConnectionTrait,
        status: StatusCode,
        headers: &header::HeaderMap,
        body: &str,
        owner: Option<&str>,
    ) -> Result<(), DbErr> {
        let kept: Vec<(&str, &str)> = REPLAYED_HEADERS
            .iter()
            .filter_map(|name| {
                let value = headers.get(name)?.to_str().ok()?;
                Some((name.as_str(), value))
            })
            .collect();
        Keys::update_many()
            .col_expr(
                idempotency_key::Column::State,
                Expr::value(KeyState::Completed),
            )
            .col_expr(
                idempotency_key::Column::ResponseStatus,
                Expr::value(i32::from(status.as_u16())),
            )
            .col_expr(
                idempotency_key::Column::ResponseHeaders,
                Expr::value(Json(kept)),
            )
            .col_expr(idempotency_key::Column::ResponseBody, Expr::value(body))
            .col_expr(idempotency_key::Column::OwnerKeyId, Expr::value(owner))
            .filter(self.this())
            .exec(db)
            .await?;
        Ok(())
    }

    /// Gives the key up after an answer that is not kept. A request that changed nothing
    /// leaves no trace; one that committed a change keeps its row and recovery point, unlocked,
    /// for the retry to resume from.
    async fn release(&self, db: &impl ConnectionTrait) -> Result<(), DbErr> {
        let deleted = Keys::delete_many()
            .filter(self.this())
            .filter(idempotency_key::Column::State.eq(KeyState::InFlight))
            .filter(idempotency_key::Column::RecoveryPoint.is_null())
            .exec(db)
            .await?;
        if deleted.rows_affected == 0 {
            Keys::update_many()
                .col_expr(idempotency_key::Column::LockedUntil, Expr::value(self.now))
                .filter(self.this())
                .filter(idempotency_key::Column::State.eq(KeyState::InFlight))
                .exec(db)
                .await?;
        }
        Ok(())
    }
}

/// The scheduled job that drops keys past their retention window (one for the deployment).
pub const PURGE_JOB: &str = "idempotency_purge";

/// Registers [`PURGE_JOB`]: hourly, keys older than `ttl` are deleted.
pub fn register_purge(
    scheduler: &mut crate::scheduler::Scheduler,
    db: &crate::commit::Db,
    ttl: Duration,
) {
    let db = db.clone();
    scheduler.register_periodic(PURGE_JOB, Duration::hours(1), move |now| {
        let db = db.clone();
        async move { purge_expired(&db, now, ttl).await.map(drop) }
    });
}

/// Deletes keys older than the retention window; run by the scheduler.
pub async fn purge_expired(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    ttl: Duration,
) -> Result<u64, DbErr> {
    let res = Keys::delete_many()
        .filter(idempotency_key::Column::CreatedAt.lt(now - ttl))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}
