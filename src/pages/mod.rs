//! The hosted pages' frame: a buyer's page (checkout, 3-D Secure challenge, shared invoice) is
//! an askama template that extends `base.html`, with one stylesheet and at most one script of
//! payd's own, served from `/assets/…` and named in the page with their `integrity` hashes.
//! The pages send a `Content-Security-Policy` without `'unsafe-inline'` or `'unsafe-eval'`:
//! nothing runs or styles a page that payd did not ship in its binary (PCI DSS 4.0 §6.4.3).
//! A page's data for its script is a JSON block (`<script type="application/json">`), which
//! the browser never runs.

pub mod embed;
pub mod text;

use std::sync::LazyLock;

use actix_web::{http::header::ContentType, web, HttpResponse};
use base64::Engine;
use sha2::{Digest, Sha384};

use crate::{error::ApiError, http::ApiQuery};

/// A file of the hosted pages, shipped in the binary.
#[derive(Debug)]
pub struct Asset {
    pub name: &'static str,
    body: &'static str,
    content_type: &'static str,
    /// `sha384-…` of its bytes, for the tag's `integrity`.
    pub integrity: String,
    /// Its URL, versioned by its hash so that a cached copy is never an older one.
    pub url: String,
}

impl Asset {
    fn new(name: &'static str, body: &'static str, content_type: &'static str) -> Self {
        let digest = Sha384::digest(body.as_bytes());
        let b64 = base64::engine::general_purpose::STANDARD.encode(digest);
        let version = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..9]);
        Self {
            name,
            body,
            content_type,
            integrity: format!("sha384-{b64}"),
            url: format!("/assets/{name}?v={version}"),
        }
    }

    fn version(&self) -> &str {
        self.url.rsplit_once("?v=").map_or("", |(_, v)| v)
    }
}

static ASSETS: LazyLock<[Asset; 3]> = LazyLock::new(|| {
    [
        Asset::new(
            "payd.css",
            include_str!("../templates/assets/payd.css"),
            "text/css; charset=utf-8",
        ),
        Asset::new(
            "checkout.js",
            include_str!("../templates/assets/checkout.js"),
            "text/javascript; charset=utf-8",
        ),
        Asset::new(
            "challenge.js",
            include_str!("../templates/assets/challenge.js"),
            "text/javascript; charset=utf-8",
        ),
    ]
});

fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// What every hosted page's frame (`base.html`) needs: its language, the stylesheet and its
/// script, if any.
pub struct Chrome {
    pub lang: &'static str,
    pub css: &'static Asset,
    pub script: Option<&'static Asset>,
}

impl Chrome {
    /// The frame of a page in `lang` that runs `script` (one of the assets), or none.
    pub fn new(lang: &'static str, script: Option<&str>) -> Self {
        Self {
            lang,
            css: &ASSETS[0],
            script: script.and_then(asset),
        }
    }
}

/// Where a hosted page may load from and send to: its own origin only, no inline script or
/// style. Who may frame it is added by [`html_framed`].
pub const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'";

/// A hosted page, rendered from its template (in `src/templates/`, every value HTML-escaped
/// unless the template says otherwise): never cached, never framed, under [`POLICY`].
pub fn html(page: &impl askama::Template) -> Result<HttpResponse, ApiError> {
    html_framed(page, POLICY, &[])
}

/// A hosted page under `policy` (one that loads a processor's script besides payd's, or
/// [`POLICY`]), framed by `ancestors` and no other origin: a shop's `embed_origins` for its
/// buyer pages ([`embed`]); none, and another site cannot frame the buyer's card form or
/// challenge at all (clickjacking).
pub fn html_framed(
    page: &impl askama::Template,
    policy: &str,
    ancestors: &[String],
) -> Result<HttpResponse, ApiError> {
    let body = page.render().map_err(ApiError::internal)?;
    let mut answer = HttpResponse::Ok();
    answer
        .content_type(ContentType::html())
        .insert_header(("cache-control", "no-store"))
        .insert_header(("referrer-policy", "no-referrer"));
    if ancestors.is_empty() {
        answer
            .insert_header((
                "content-security-policy",
                format!("{policy}; frame-ancestors 'none'"),
            ))
            .insert_header(("x-frame-options", "DENY"));
    } else {
        // `X-Frame-Options` can name no origin: the policy alone says who may frame.
        let framers = ancestors.join(" ");
        answer.insert_header((
            "content-security-policy",
            format!("{policy}; frame-ancestors {framers}"),
        ));
    }
    Ok(answer.body(body))
}

crate::http::routes! {
    "/assets/{name}" => { get: serve },
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AssetQuery {
    /// The version the page named; with the current one the answer may be cached for good.
    pub v: Option<String>,
}

/// A stylesheet or script of the hosted pages.
///
/// `payd.css`, `checkout.js` or `challenge.js`, which the checkout and challenge pages load
/// with an integrity hash. With `v` the current version the answer may be cached for good;
/// otherwise it is revalidated (`no-cache`). No key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/assets/{name}", tag = "checkout",
    params(("name" = String, Path, description = "`payd.css`, `checkout.js` or `challenge.js`"), AssetQuery),
    responses(
        (status = 200, description = "the file", content_type = "text/css"),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn serve(
    name: web::Path<String>,
    ApiQuery(query): ApiQuery<AssetQuery>,
) -> Result<HttpResponse, ApiError> {
    let asset = asset(&name).ok_or_else(|| ApiError::not_found("asset").param("name"))?;
    Ok(respond(asset, query.v.as_deref()))
}

/// A file of payd's: cached for good when `v` names its current version, else revalidated.
fn respond(asset: &Asset, v: Option<&str>) -> HttpResponse {
    let cache = if v == Some(asset.version()) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    HttpResponse::Ok()
        .content_type(asset.content_type)
        .insert_header(("cache-control", cache))
        .body(asset.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(askama::Template)]
    #[template(source = "<p>page</p>", ext = "html")]
    struct Page;

    #[test]
    fn only_the_origins_given_may_frame_a_page() {
        let header = |answer: &HttpResponse, name: &str| {
            answer
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let kept = html(&Page).unwrap();
        assert_eq!(header(&kept, "x-frame-options").as_deref(), Some("DENY"));
        assert!(header(&kept, "content-security-policy")
            .unwrap()
            .ends_with("frame-ancestors 'none'"));
        let origins = [
            "https://shop.example".to_owned(),
            "http://127.0.0.1:9".to_owned(),
        ];
        let framed = html_framed(&Page, POLICY, &origins).unwrap();
        assert!(header(&framed, "x-frame-options").is_none());
        let policy = header(&framed, "content-security-policy").unwrap();
        assert!(
            policy.ends_with("frame-ancestors https://shop.example http://127.0.0.1:9"),
            "{policy}"
        );
    }

    #[test]
    fn the_policy_allows_no_inline_code_and_each_asset_names_its_hash() {
        assert!(!POLICY.contains("unsafe"));
        for a in ASSETS.iter() {
            let digest = Sha384::digest(a.body.as_bytes());
            let b64 = base64::engine::general_purpose::STANDARD.encode(digest);
            assert_eq!(a.integrity, format!("sha384-{b64}"));
            assert!(a.url.starts_with(&format!("/assets/{}?v=", a.name)));
        }
    }
}
