//! Stripe's published API description for the `Stripe-Version` payd pins (2022-11-15), as the
//! type definitions of Stripe's own Node library generated from it (npm `stripe@11.1.0`,
//! `types/2022-11-15/*.d.ts`): which parameters each endpoint payd calls takes. The strict
//! layer refuses any other with Stripe's own answer, 400 `parameter_unknown`
//! (docs.stripe.com/error-codes#parameter-unknown), so every test through it proves that payd
//! sends only what Stripe documents.
//!
//! The definitions are found at `$STRIPE_API_TYPES`, else under `target/stripe-api` where `.ci/run`
//! installs them. Without them (a fresh machine's `cargo test`) the check is skipped with a
//! notice; CI requires them (`PAYD_REQUIRE_LOCALSTRIPE`).

use std::{collections::HashMap, path::PathBuf};

/// The parameters the endpoint `method path` takes, by the `d.ts` file and interface that
/// describe it. Path segments that are ids are written `{id}`.
const ENDPOINTS: [(&str, &str, &str, &str); 18] = [
    (
        "POST",
        "/v1/payment_methods",
        "PaymentMethods",
        "PaymentMethodCreateParams",
    ),
    (
        "POST",
        "/v1/payment_methods/{id}/attach",
        "PaymentMethods",
        "PaymentMethodAttachParams",
    ),
    (
        "POST",
        "/v1/payment_methods/{id}/detach",
        "PaymentMethods",
        "PaymentMethodDetachParams",
    ),
    (
        "GET",
        "/v1/payment_methods/{id}",
        "PaymentMethods",
        "PaymentMethodRetrieveParams",
    ),
    ("POST", "/v1/customers", "Customers", "CustomerCreateParams"),
    (
        "POST",
        "/v1/payment_intents",
        "PaymentIntents",
        "PaymentIntentCreateParams",
    ),
    (
        "POST",
        "/v1/payment_intents/{id}/capture",
        "PaymentIntents",
        "PaymentIntentCaptureParams",
    ),
    (
        "POST",
        "/v1/payment_intents/{id}/cancel",
        "PaymentIntents",
        "PaymentIntentCancelParams",
    ),
    (
        "POST",
        "/v1/payment_intents/{id}/confirm",
        "PaymentIntents",
        "PaymentIntentConfirmParams",
    ),
    (
        "GET",
        "/v1/payment_intents",
        "PaymentIntents",
        "PaymentIntentListParams",
    ),
    (
        "GET",
        "/v1/payment_intents/{id}",
        "PaymentIntents",
        "PaymentIntentRetrieveParams",
    ),
    ("POST", "/v1/refunds", "Refunds", "RefundCreateParams"),
    ("GET", "/v1/refunds", "Refunds", "RefundListParams"),
    ("GET", "/v1/refunds/{id}", "Refunds", "RefundRetrieveParams"),
    ("GET", "/v1/disputes", "Disputes", "DisputeListParams"),
    (
        "POST",
        "/v1/disputes/{id}",
        "Disputes",
        "DisputeUpdateParams",
    ),
    (
        "POST",
        "/v1/disputes/{id}/close",
        "Disputes",
        "DisputeCloseParams",
    ),
    ("GET", "/v1/events", "Events", "EventListParams"),
];

/// Where the type definitions for the pinned version are, if installed.
pub fn types_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("STRIPE_API_TYPES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/stripe-api/node_modules/stripe/types/2022-11-15"),
    };
    dir.join("PaymentIntents.d.ts").is_file().then_some(dir)
}

/// One endpoint's parameters: each top-level name with the names its value may hold in
/// brackets (`None`: any, as `metadata` takes).
type Params = HashMap<String, Option<Vec<String>>>;

pub struct StripeApi {
    endpoints: Vec<(&'static str, &'static str, Params)>,
}

impl StripeApi {
    /// The description, or `None` (with a notice) when it is not installed and CI does not
    /// require it.
    pub fn load() -> Option<Self> {
        let Some(dir) = types_dir() else {
            assert!(
                std::env::var_os("PAYD_REQUIRE_LOCALSTRIPE").is_none(),
                "PAYD_REQUIRE_LOCALSTRIPE is set but Stripe's API description is not installed (npm stripe@11.1.0 under target/stripe-api, or $STRIPE_API_TYPES)"
            );
            eprintln!("notice: Stripe's API description is not installed: parameters are not checked against it");
            return None;
        };
        let shared = std::fs::read_to_string(dir.join("../shared.d.ts")).unwrap_or_default();
        let pagination = fields(&shared, "PaginationParams", None);
        let endpoints = ENDPOINTS
            .iter()
            .map(|(method, path, file, interface)| {
                let src = std::fs::read_to_string(dir.join(format!("{file}.d.ts")))
                    .unwrap_or_else(|e| panic!("{file}.d.ts: {e}"));
                let mut params = fields(&src, interface, None);
                assert!(
                    !params.is_empty(),
                    "{interface} has parameters in {file}.d.ts"
                );
                if declaration(&src, interface).is_some_and(|d| d.contains("PaginationParams")) {
                    params.extend(pagination.clone());
                }
                (*method, *path, params)
            })
            .collect();
        Some(Self { endpoints })
    }

    /// Why Stripe would refuse this request's parameters, if it would.
    pub fn refuses(&self, method: &str, path: &str, params: &[(String, String)]) -> Option<String> {
        let Some((_, _, known)) = self
            .endpoints
            .iter()
            .find(|(m, p, _)| *m == method && same_path(p, path))
        else {
            return Some(format!(
                "payd called {method} {path}, which the check does not know"
            ));
        };
        for (name, _) in params {
            let (top, inner) = match name.split_once('[') {
                Some((top, rest)) => (top, Some(rest.trim_end_matches(']'))),
                None => (name.as_str(), None),
            };
            let ok = match (known.get(top), inner) {
                (None, _) => false,
                (Some(_), None) | (Some(None), Some(_)) => true,
                (Some(Some(inside)), Some(inner)) => inside.iter().any(|i| i == inner),
            };
            if !ok {
                return Some(format!("Received unknown parameter: {name}"));
            }
        }
        None
    }
}

fn same_path(pattern: &str, path: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    a.len() == b.len() && a.iter().zip(&b).all(|(p, s)| *p == "{id}" || p == s)
}

/// The line declaring `interface {name}` (with what it extends).
fn declaration<'a>(src: &'a str, name: &str) -> Option<&'a str> {
    src.lines().find(|l| {
        let t = l.trim_start();
        t.starts_with(&format!("interface {name} {{"))
            || t.starts_with(&format!("interface {name} extends"))
    })
}

/// The fields of `interface {name}` (inside `namespace {outer}` when given), each with the
/// names its value holds: the fields of the nested interfaces its type names, any name for
/// metadata and arrays, the range operators for a range.
fn fields(src: &str, name: &str, outer: Option<&str>) -> Params {
    let lines: Vec<&str> = src.lines().collect();
    let mut start = 0;
    if let Some(outer) = outer {
        match lines
            .iter()
            .position(|l| l.trim_start() == format!("namespace {outer} {{"))
        {
            Some(i) => start = i,
            None => return Params::new(),
        }
    }
    let Some(open) = lines[start..].iter().position(|l| {
        let t = l.trim_start();
        t.starts_with(&format!("interface {name} {{"))
            || t.starts_with(&format!("interface {name} extends"))
    }) else {
        return Params::new();
    };
    let open = start + open;
    let indent = lines[open].len() - lines[open].trim_start().len();
    let close = " ".repeat(indent) + "}";
    let field = " ".repeat(indent + 2);
    let mut out = Params::new();
    for line in lines[open + 1..].iter().take_while(|l| **l != close) {
        let Some(rest) = line.strip_prefix(&field) else {
            continue;
        };
        if rest.starts_with(' ') || rest.starts_with('/') || rest.starts_with('*') {
            continue;
        }
        let Some((key, ty)) = rest.split_once(':') else {
            continue;
        };
        let key = key.trim_end_matches('?').to_owned();
        // An array is sent as `name[]` (or `name[0]`); metadata takes any key.
        let inside = if ty.contains("MetadataParam") || ty.trim_start().starts_with("Array<") {
            None
        } else if ty.contains("RangeQueryParam") {
            Some(["gt", "gte", "lt", "lte"].map(String::from).to_vec())
        } else {
            let outer_name = outer.unwrap_or(name);
            let nested: Vec<String> = ty
                .split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
                .filter_map(|t| t.strip_prefix(&format!("{outer_name}.")))
                .flat_map(|inner| fields(src, inner, Some(outer_name)).into_keys())
                .collect();
            Some(nested)
        };
        out.insert(key, inside);
    }
    out
}
