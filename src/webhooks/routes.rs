//! A shop's webhook endpoint: set its URL (the secret is shown once), rotate the secret
//! (the old one keeps signing for 24 hours), and read its settings.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use payd_entity::webhook_endpoint;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::{
    api::{Endpoint, PutEndpointRequest},
    signer::new_secret,
    store,
};
use crate::{
    accounts,
    auth::{Caller, ShopKey},
    commit::{self, Change, Write},
    error::ApiError,
    http::ApiJson,
    idempotency,
    ids::ProfileId,
    outbound::Policy,
    state::AppState,
};

crate::http::routes! {
    "/account/shops/{profile_id}/webhook" => { get: get_endpoint, put: put_endpoint },
    "/account/shops/{profile_id}/webhook/rotate" => { post: rotate_secret },
}

/// Checks a URL merchants give (webhook endpoints, remote processors): http(s), a host, no
/// credentials, and no host the outbound policy refuses before any lookup (a numeric address
/// in any spelling, `localhost`). Host names are judged again at every connect
/// (`outbound`): what they resolve to may change.
pub fn check_url(raw: &str, policy: &Policy) -> Result<String, ApiError> {
    let bad = |why: &str| ApiError::invalid("invalid_url", why.to_owned()).param("url");
    let url = raw.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| bad("the URL must start with http:// or https://"))?;
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("the URL is too long or contains spaces"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        // Kept in the URL they would be stored, listed and logged; the signature authenticates.
        return Err(bad(
            "the URL must not carry credentials (user:password@); requests are signed instead",
        ));
    }
    let host_port = authority;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return Err(bad("the URL has no host"));
    }
    if policy.refuses_host(host) {
        return Err(bad(
            "the host is not a public address (loopback, private, link-local and other reserved addresses are refused in every spelling)",
        ));
    }
    Ok(url.to_owned())
}

/// The shop's endpoint of the caller's mode: a key never reads or changes the other mode's.
async fn find(
    state: &AppState,
    caller: &Caller,
    profile: &ProfileId,
) -> Result<Option<webhook_endpoint::Model>, ApiError> {
    Ok(webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::ProfileId.eq(profile.as_str()))
        .filter(webhook_endpoint::Column::TestMode.eq(caller.test_mode()))
        .one(&state.db)
        .await?)
}

/// The shop's webhook endpoint of the key's mode (without its secret).
///
/// Its URL, whether it is enabled, its `max_per_second` and its `health`. Read only; needs a
/// secret key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/webhook", tag = "webhooks",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Endpoint), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn get_endpoint(
    ShopKey(caller, profile): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let m = find(&state, &caller, &profile)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    Ok(HttpResponse::Ok().json(Endpoint::of(&m, false)))
}

/// Set the URL of the shop's endpoint of the key's mode.
///
/// Each mode has its own endpoint, which receives only that mode's events. The first call
/// creates it and shows its signing secret, once; later calls change the URL, `enabled` and
/// the rate (enabling a paused endpoint sends what waited). A URL must be `https://` or
/// `http://` to a host payd may reach. Audited when the URL changes. Needs a secret key that
/// reaches the shop.
///
/// Fails: `invalid_url` (400), `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(put, path = "/account/shops/{profile_id}/webhook", tag = "webhooks",
    params(("profile_id" = String, Path)), request_body = PutEndpointRequest,
    responses((status = 200, body = Endpoint), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_endpoint(
    ShopKey(caller, profile): ShopKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<PutEndpointRequest>,
) -> Result<HttpResponse, ApiError> {
    let policy = Policy::from_settings(
        state.settings.webhooks.allow_private_urls,
        &state.settings.security,
    );
    let put = store::EndpointPut {
        merchant_id: caller.merchant_id.clone(),
        profile_id: profile.clone(),
        url: check_url(&req.url, &policy)?,
        enabled: req.enabled,
        max_per_second: req.max_per_second()?,
        test_mode: caller.test_mode(),
    };
    let now = state.clock.base();
    let audit = url_changed(&caller, &profile, now);
    let (m, created) = store::put_endpoint(&state.db, &state.keyring, put, audit, now).await?;
    if created.resumed {
        // What waited is due now (or when its schedule says).
        state.wake.now();
    }
    Ok(HttpResponse::Ok().json(Endpoint::of(&m, created.created)))
}

/// The audit entry of the endpoint's URL set to `url` by the caller.
fn url_changed<'a>(
    caller: &'a Caller,
    profile: &'a ProfileId,
    now: DateTime<Utc>,
) -> impl Fn(&str) -> Write + 'a {
    move |url| {
        let audit = accounts::store::Audit {
            merchant_id: &caller.merchant_id,
            actor: Some(&caller.key_id),
            action: accounts::store::Action::WebhookEndpointUrlChanged,
            target_id: profile.as_str(),
            details: serde_json::json!({"url": url, "test_mode": caller.test_mode()}),
        };
        accounts::store::audited(audit, now)
    }
}

/// Issue a new signing secret for the shop's endpoint of the key's mode.
///
/// The new secret is shown once; the old one keeps signing beside it for 24 hours. Audited.
/// Needs a secret key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/account/shops/{profile_id}/webhook/rotate", tag = "webhooks",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Endpoint), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn rotate_secret(
    ShopKey(caller, profile): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let existing = find(&state, &caller, &profile)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    let now = state.clock.base();
    let secret = new_secret();
    let (m, rotate) = store::rotated(existing, state.keyring.seal(&secret), now);
    let audit = accounts::store::Audit {
        merchant_id: &caller.merchant_id,
        actor: Some(&caller.key_id),
        action: accounts::store::Action::WebhookEndpointSecretRotated,
        target_id: profile.as_str(),
        details: serde_json::json!({"previous_secret_expires_at": m.previous_secret_expires_at,
            "test_mode": caller.test_mode()}),
    };
    let change = Change::at(now)
        .write(rotate)
        .write(accounts::store::audited(audit, now));
    commit::commit(&state.db, change).await?;
    let shown = webhook_endpoint::Model { secret, ..m };
    Ok(idempotency::one_time_secret(
        HttpResponse::Ok().json(Endpoint::of(&shown, true)),
    ))
}

#[cfg(test)]
mod tests {
    use super::check_url;
    use crate::outbound::Policy;

    #[test]
    fn urls_are_checked() {
        let public = Policy::default();
        assert!(check_url("https://shop.example/hooks", &public).is_ok());
        for bad in [
            "https://user:secret@shop.example/hooks",
            "https://token@shop.example/hooks",
            "ftp://x",
            "https://",
            "http://10.0.0.1/x",
            "http://127.0.0.1:9000/",
            "http://[::1]/",
            "http://localhost/",
            "http://169.254.169.254/",
            "http://192.168.1.5/",
            "http://127.1:9000/",
            "http://2130706433:9000/",
            "http://0x7f.1:9000/",
            "http://0177.0.0.1:9000/",
            "http://[::ffff:127.0.0.1]:9000/",
            "http://[::ffff:7f00:1]:9000/",
            "http://localhost.:9000/",
            "http://LOCALHOST:9000/",
            "http://0.0.0.0:9000/",
        ] {
            assert!(check_url(bad, &public).is_err(), "{bad}");
        }
        let sandbox = Policy {
            allow_private: true,
            ..Policy::default()
        };
        assert!(check_url("http://127.0.0.1:9000/", &sandbox).is_ok());
    }
}
