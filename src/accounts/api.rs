//! Request and response types of the account and admin routes.

use chrono::{DateTime, Utc};
use payd_entity::{api_key, audit_entry, merchant, profile};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::keys::{Caller, KeyKind, Mode},
    error::ApiError,
    fields::parse_id,
    ids::{FileId, ProfileId},
};

/// A display name: trimmed, 1 to 200 characters.
pub fn parse_name(param: &str, raw: &str) -> Result<String, ApiError> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::invalid_param(
            param,
            format!("{param} must be 1 to 200 characters"),
        ));
    }
    Ok(name.to_owned())
}

/// Which keys a new merchant gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestedMode {
    /// Sandbox keys (`snd_`, `pk_snd_`); always allowed.
    Sandbox,
    /// Live keys (`prd_`, `pk_prd_`); only when the deployment runs in production mode.
    Production,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMerchantRequest {
    /// 1 to 200 characters, not only spaces.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
    #[serde(default)]
    pub mode: Option<RequestedMode>,
}

/// A merchant as the operator sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct MerchantSummary {
    pub merchant_id: String,
    pub name: String,
    pub created: DateTime<Utc>,
    /// When the operator suspended it (its keys are refused); none while it is in good standing.
    pub suspended_at: Option<DateTime<Utc>>,
}

impl From<merchant::Model> for MerchantSummary {
    fn from(m: merchant::Model) -> Self {
        Self {
            merchant_id: m.id.into(),
            name: m.name,
            created: m.created_at,
            suspended_at: m.suspended_at,
        }
    }
}

/// Keys the operator issues to an existing merchant.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueKeysRequest {
    /// `production` (live keys; the default on a production deployment) or `sandbox`.
    #[serde(default)]
    pub mode: Option<RequestedMode>,
}

/// A secret and a publishable key just made for a merchant, not bound to a shop. Shown only
/// here.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedKeys {
    pub merchant_id: String,
    pub secret_key: String,
    pub publishable_key: String,
    pub test_mode: bool,
}

/// The unrevoked API keys hashed under one pepper.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyPepper {
    /// The first 8 hex digits of the pepper's SHA-256; none for keys made before payd 0.2.0
    /// recorded it (payd records the current pepper on them when it starts with no previous
    /// pepper configured).
    pub pepper_id: Option<String>,
    /// `current` (`security.key_pepper`), `previous` (in `security.previous_key_peppers`),
    /// `unknown` (no configured pepper: these keys no longer authenticate) or `unrecorded`
    /// (made before payd recorded peppers).
    pub state: &'static str,
    pub keys: i64,
}

/// A new merchant with its first shop and keys. The keys are shown only here.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedMerchant {
    pub merchant_id: String,
    pub profile_id: String,
    pub secret_key: String,
    pub publishable_key: String,
    pub test_mode: bool,
}

/// The merchant the key belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct Account {
    pub merchant_id: String,
    pub name: String,
    /// The mode of the calling key.
    pub test_mode: bool,
    /// The shop the request is scoped to, if any.
    pub profile_id: Option<String>,
    pub created: DateTime<Utc>,
}

/// A shop (profile) of the merchant.
#[derive(Debug, Serialize, ToSchema)]
pub struct Shop {
    pub profile_id: String,
    pub name: String,
    /// How the hosted pages (checkout, 3-D Secure, invoice) show the shop to buyers.
    pub branding: Branding,
    /// The origins whose pages may embed the shop's card form (`/js/payd.js`,
    /// docs/embedded-checkout.md); no other page can frame it.
    pub embed_origins: Vec<String>,
    pub created: DateTime<Utc>,
}

/// A shop's look on the hosted pages; every field optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Branding {
    /// The name buyers see (the shop's `name` when unset): 1 to 200 characters.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub display_name: Option<String>,
    /// One of the merchant's uploaded files (`POST /files`, `POST /products/{id}/images`) that
    /// is a PNG, JPEG, GIF or WebP image, in the calling key's mode.
    #[serde(default)]
    pub logo_file_id: Option<String>,
    /// `#rrggbb`: the pages' buttons (white text on it) and links (it on white), so it needs
    /// at least 4.5:1 contrast against white (WCAG AA).
    #[serde(default)]
    #[schema(pattern = "^#[0-9a-fA-F]{6}$")]
    pub accent_color: Option<String>,
}

impl From<profile::Model> for Shop {
    fn from(m: profile::Model) -> Self {
        Self {
            embed_origins: embed_origins_of(&m),
            profile_id: m.id.into(),
            name: m.name,
            branding: Branding {
                display_name: m.display_name,
                logo_file_id: m.logo_file_id,
                accent_color: m.accent_color,
            },
            created: m.created_at,
        }
    }
}

/// `PUT /account/shops/{profile_id}`: the shop's name and its branding. A field left out
/// keeps its value; `branding` replaces the whole branding (send `{}` to clear it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutShopRequest {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: Option<String>,
    #[serde(default)]
    pub branding: Option<Branding>,
    /// Replaces the origins that may embed the card form (`scheme://host[:port]`, `https`, or
    /// `http` on a loopback host; at most 10); `[]` clears them.
    #[serde(default)]
    #[schema(max_items = 10)]
    pub embed_origins: Option<Vec<String>>,
}

/// The most origins a shop may register for its embedded card form.
pub const MAX_EMBED_ORIGINS: usize = 10;

/// A shop's registered embed origins (none when unset); a stored list that does not decode is
/// an error (`stored`), never read as none.
pub fn embed_origins_of(shop: &profile::Model) -> Vec<String> {
    shop.embed_origins.clone().unwrap_or_default().0
}

/// Embed origins as sent, checked and written as browsers write an origin (lower-case host,
/// no default port, no trailing `/`), each once.
pub fn parse_embed_origins(raw: Vec<String>) -> Result<Vec<String>, ApiError> {
    if raw.len() > MAX_EMBED_ORIGINS {
        return Err(ApiError::invalid_param(
            "embed_origins",
            format!("at most {MAX_EMBED_ORIGINS} origins"),
        ));
    }
    let mut origins: Vec<String> = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let origin = parse_origin(r).ok_or_else(|| {
            ApiError::invalid_param(
                &format!("embed_origins[{i}]"),
                "expected an origin: https://host[:port] (http only on a loopback host), no \
                 path, query or credentials",
            )
        })?;
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    Ok(origins)
}

fn parse_origin(raw: &str) -> Option<String> {
    let url = url::Url::parse(raw.trim()).ok()?;
    let plain = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    let host = url.host_str()?;
    // A plain name or address: no CSP wildcard (`*`) or separator can reach `frame-ancestors`.
    let plain = plain
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    let scheme_ok = match url.scheme() {
        "https" => true,
        "http" => crate::settings::is_loopback_authority(host),
        _ => false,
    };
    (plain && scheme_ok).then(|| url.origin().ascii_serialization())
}

/// A branding's own fields, checked (the logo's file is looked up by the route).
pub fn parse_branding(b: Branding) -> Result<Branding, ApiError> {
    let display_name = b
        .display_name
        .map(|n| parse_name("branding.display_name", &n))
        .transpose()?;
    let logo_file_id = b
        .logo_file_id
        .map(|id| match FileId::parse(&id) {
            Some(_) => Ok(id),
            None => Err(ApiError::invalid_param(
                "branding.logo_file_id",
                "expected a file id (file_…)",
            )),
        })
        .transpose()?;
    let accent_color = b.accent_color.map(|c| parse_accent(&c)).transpose()?;
    Ok(Branding {
        display_name,
        logo_file_id,
        accent_color,
    })
}

/// The least contrast an accent colour needs against white: WCAG AA for normal text.
pub const ACCENT_CONTRAST: f64 = 4.5;

/// `#rrggbb` (lower-cased), with at least [`ACCENT_CONTRAST`] against white.
fn parse_accent(raw: &str) -> Result<String, ApiError> {
    let param = "branding.accent_color";
    let hex = raw
        .strip_prefix('#')
        .filter(|h| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| ApiError::invalid_param(param, "expected a colour as #rrggbb"))?;
    let ratio = contrast_with_white(hex);
    if ratio < ACCENT_CONTRAST {
        return Err(ApiError::invalid_param(
            param,
            format!(
                "#{hex} has a contrast of {ratio:.1}:1 against white; the pages need at least \
                 {ACCENT_CONTRAST}:1 (WCAG AA) for its text and links: choose a darker colour"
            ),
        ));
    }
    Ok(format!("#{}", hex.to_ascii_lowercase()))
}

/// WCAG's contrast ratio of a `rrggbb` colour against white.
fn contrast_with_white(hex: &str) -> f64 {
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)) / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let luminance = 0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4);
    1.05 / (luminance + 0.05)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateShopRequest {
    /// 1 to 200 characters, not only spaces.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyKind {
    Secret,
    Publishable,
}

/// An API key as listed: never the key itself, only its last four characters.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKey {
    pub key_id: String,
    #[schema(value_type = ApiKeyKind)]
    pub kind: String,
    pub test_mode: bool,
    pub last4: String,
    /// The shop the key is bound to, if any.
    pub profile_id: Option<String>,
    pub name: Option<String>,
    pub created: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<api_key::Model> for ApiKey {
    fn from(m: api_key::Model) -> Self {
        Self {
            key_id: m.id.into(),
            kind: m.kind.to_string(),
            test_mode: m.mode == Mode::Test,
            last4: m.last4,
            profile_id: m.profile_id.map(Into::into),
            name: m.name,
            created: m.created_at,
            revoked_at: m.revoked_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyRequest {
    pub kind: ApiKeyKind,
    /// Bind the key to one shop; requests with it are scoped to that shop.
    #[serde(default)]
    pub profile_id: Option<String>,
    /// 1 to 200 characters, not only spaces.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: Option<String>,
    /// Make a sandbox key (`true`) with a live key; defaults to the calling key's mode.
    /// A sandbox key cannot make live keys.
    #[serde(default)]
    pub test_mode: Option<bool>,
}

/// A new key as its request asks for it, checked against the calling key: a sandbox key makes
/// no live keys, and a shop-bound key only keys bound to its shop.
#[derive(Debug)]
pub struct KeyAsk {
    pub kind: KeyKind,
    pub name: Option<String>,
    pub mode: Mode,
    pub profile_id: Option<ProfileId>,
}

impl CreateApiKeyRequest {
    pub fn parse(self, caller: &Caller) -> Result<KeyAsk, ApiError> {
        let kind = match self.kind {
            ApiKeyKind::Secret => KeyKind::Secret,
            ApiKeyKind::Publishable => KeyKind::Publishable,
        };
        let name = self
            .name
            .as_deref()
            .map(|n| parse_name("name", n))
            .transpose()?;
        let mode = match (self.test_mode, caller.mode) {
            (None, mode) => mode,
            (Some(true), _) => Mode::Test,
            (Some(false), Mode::Live) => Mode::Live,
            (Some(false), Mode::Test) => {
                return Err(ApiError::forbidden(
                    "live_key_from_test_key",
                    "a sandbox key cannot create live keys",
                )
                .param("test_mode"))
            }
        };
        let asked = self.profile_id.as_deref().map(parse_id).transpose()?;
        // Invariant: a shop-bound key only ever mints keys bound to the same shop.
        let profile_id = match (&caller.bound_profile, asked) {
            (Some(bound), Some(asked)) if *bound != asked => {
                return Err(ApiError::forbidden(
                    "profile_mismatch",
                    "this key is bound to another shop",
                )
                .param("profile_id"))
            }
            (Some(bound), _) => Some(bound.clone()),
            (None, asked) => asked,
        };
        Ok(KeyAsk {
            kind,
            name,
            mode,
            profile_id,
        })
    }
}

/// A new key: `key` is shown only in this answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub api_key: ApiKey,
    pub key: String,
}

/// One security action on the account, as `GET /account/audit-log` lists it. Never holds a
/// secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    pub audit_id: String,
    /// `api_key.created`, `api_key.revoked`, `webhook_endpoint.url_changed`,
    /// `webhook_endpoint.secret_rotated`, `processor_account.added`.
    pub action: String,
    /// The API key that acted (`key_…`).
    pub actor_key_id: Option<String>,
    /// The id of what it acted on: a key, a shop (for its webhook endpoint), a processor account.
    pub target_id: String,
    /// What changed: a key's kind, mode and last four characters; an endpoint's new URL; a
    /// processor account's shop, name, kind and approval.
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
    pub created: DateTime<Utc>,
}

impl From<audit_entry::Model> for AuditEntry {
    fn from(m: audit_entry::Model) -> Self {
        Self {
            details: m.details.0,
            audit_id: m.id.into(),
            action: m.action.to_string(),
            actor_key_id: m.actor_key_id.map(Into::into),
            target_id: m.target_id,
            created: m.created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accent_needs_the_contrast_of_text_against_white() {
        assert!((contrast_with_white("000000") - 21.0).abs() < 0.01);
        assert!((contrast_with_white("ffffff") - 1.0).abs() < 0.01);
        assert_eq!(parse_accent("#3A4CCF").unwrap(), "#3a4ccf");
        // #767676 is the lightest grey with 4.5:1 on white; #777777 is not.
        assert!(parse_accent("#767676").is_ok());
        assert!(parse_accent("#777777").is_err());
        assert!(parse_accent("#ffcc00").is_err());
        assert!(parse_accent("3a4ccf").is_err());
        assert!(parse_accent("#3a4cc").is_err());
        assert!(parse_accent("#3a4ccg").is_err());
    }

    #[test]
    fn an_embed_origin_is_a_bare_https_origin_or_loopback_http() {
        let ok = |raw: &str| parse_origin(raw);
        assert_eq!(
            ok("https://Shop.Example").as_deref(),
            Some("https://shop.example")
        );
        assert_eq!(
            ok("https://shop.example:443/").as_deref(),
            Some("https://shop.example")
        );
        assert_eq!(
            ok("https://shop.example:8443").as_deref(),
            Some("https://shop.example:8443")
        );
        assert_eq!(
            ok("http://127.0.0.1:5173").as_deref(),
            Some("http://127.0.0.1:5173")
        );
        assert_eq!(
            ok("http://localhost:3000").as_deref(),
            Some("http://localhost:3000")
        );
        for refused in [
            "http://shop.example",
            "https://shop.example/pay",
            "https://shop.example/?a=1",
            "https://shop.example/#x",
            "https://user:pw@shop.example",
            "https://*.shop.example",
            "javascript:alert(1)",
            "data:text/html,x",
            "shop.example",
            "'self'",
            "",
        ] {
            assert_eq!(ok(refused), None, "{refused}");
        }
        let many = vec!["https://a.example".to_owned(); MAX_EMBED_ORIGINS + 1];
        assert!(parse_embed_origins(many).is_err());
        let twice = vec![
            "https://a.example".to_owned(),
            "https://A.example/".to_owned(),
        ];
        assert_eq!(parse_embed_origins(twice).unwrap(), ["https://a.example"]);
    }
}
