//! The embedded card form: `/js/payd.js`, a script a merchant's page loads from payd to mount
//! a payment's checkout page in an iframe (docs/embedded-checkout.md), and the one exception
//! to "never framed": a shop's buyer pages (checkout and its 3-D Secure challenge) may be
//! framed by the origins the shop registered (`embed_origins`: they pass them to
//! [`super::html_framed`]), and by no other.
//!
//! The page and the script speak by `postMessage`, each checking the other's origin: the page
//! posts only to the `embed_origin` it was opened with (one the shop registered), and the
//! script takes messages only from payd's origin and its own frame.

use std::sync::LazyLock;

use actix_web::HttpResponse;

use super::Asset;
use crate::{error::ApiError, http::ApiQuery};

static SCRIPT: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "payd.js",
        include_str!("../templates/assets/payd.js"),
        "text/javascript; charset=utf-8",
    )
});

crate::http::routes! {
    "/js/payd.js" => { get: script },
}

/// The script that embeds a payment's card form in a merchant's page.
///
/// `<script src="{payd}/js/payd.js"></script>` then `Payd.mount(element, {checkoutUrl,
/// onStatus, onComplete})` (docs/embedded-checkout.md). It needs no build step and no key; the
/// page it frames needs the payment's `checkout_url` (which holds its `client_secret`) and a
/// merchant page on one of the shop's `embed_origins`. With `?v=` of the current version the
/// answer may be cached for good; without it, it is revalidated.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/js/payd.js", tag = "checkout", params(super::AssetQuery),
    responses((status = 200, description = "the script", content_type = "text/javascript")))]
pub async fn script(ApiQuery(query): ApiQuery<super::AssetQuery>) -> HttpResponse {
    super::respond(&SCRIPT, query.v.as_deref())
}

/// The `embed_origin` a buyer page was opened with, when the shop registered it; the page
/// then posts to it (and to no other origin).
pub fn embed_origin<'a>(
    asked: Option<&'a str>,
    origins: &[String],
) -> Result<Option<&'a str>, ApiError> {
    match asked {
        None => Ok(None),
        Some(o) if origins.iter().any(|r| r == o) => Ok(Some(o)),
        Some(_) => Err(ApiError::invalid_param(
            "embed_origin",
            "not one of the shop's embed_origins (PUT /account/shops/{profile_id})",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_registered_embed_origin_is_posted_to() {
        let origins = [
            "https://shop.example".to_owned(),
            "http://127.0.0.1:9".to_owned(),
        ];
        assert_eq!(
            embed_origin(Some("https://shop.example"), &origins).unwrap(),
            Some("https://shop.example")
        );
        assert!(embed_origin(Some("https://evil.example"), &origins).is_err());
        assert_eq!(embed_origin(None, &origins).unwrap(), None);
    }
}
