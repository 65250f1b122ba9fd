//! Handlers of the invoice-settings and tax-rule routes: the merchant's defaults and rules,
//! each shop's overrides and rules, and the evaluation finalize uses.

use actix_web::{web, HttpResponse};
use payd_entity::tax_rule;

use super::{
    api::{
        self, EvaluateRequest, EvaluatedLine, Evaluation, Settings, SettingsInput, TaxRule,
        TaxRules, TaxRulesInput,
    },
    machine, settings,
    tax::{self, Place, MAX_RATE_BPS},
};
use crate::{
    auth::{Caller, SecretKey, ShopKey},
    error::ApiError,
    fields::{check_text, parse_currency},
    http::ApiJson,
    ids::new_id,
    state::AppState,
};

crate::http::routes! {
    "/invoice-settings" => { get: get_settings, put: put_settings },
    "/invoice-settings/tax-rules" => { get: get_tax_rules, put: put_tax_rules },
    "/invoice-settings/tax-rules/evaluate" => { post: evaluate },
    "/invoice-settings/profiles/{profile_id}" => { get: get_shop_settings, put: put_shop_settings },
    "/invoice-settings/profiles/{profile_id}/tax-rules" => { get: get_shop_tax_rules, put: put_shop_tax_rules, delete: delete_shop_tax_rules },
}

/// The merchant's own settings and rules are changed by a merchant-wide key only.
fn merchant_wide(caller: &Caller) -> Result<(), ApiError> {
    caller.refuse_bound("a key bound to one shop cannot change the merchant's defaults")
}

/// The settings and rules a request reads and changes: the merchant's (no shop) or a shop's,
/// in the key's mode.
fn owner<'a>(caller: &'a Caller, profile_id: Option<&'a str>) -> settings::Owned<'a> {
    settings::Owned::of(caller.merchant_id.as_str(), profile_id, caller.test_mode())
}

async fn settings_of(
    state: &AppState,
    caller: &Caller,
    profile_id: Option<&str>,
) -> Result<Settings, ApiError> {
    let o = owner(caller, profile_id);
    let stored = settings::stored(&state.db, &o).await?;
    let effective = settings::effective(&state.db, &o).await?;
    Ok(Settings {
        profile_id: profile_id.map(str::to_owned),
        settings: stored,
        effective,
    })
}

/// The merchant's invoice defaults.
///
/// Answers the merchant's stored settings of the key's mode (number and credit note prefixes,
/// seller, footer, payment terms, locale) and the settings in effect, the built-in defaults
/// filling what is unset. Needs a secret key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-settings", tag = "invoices",
    responses((status = 200, body = Settings)), security(("api_key" = [])))]
pub async fn get_settings(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(settings_of(&state, &caller, None).await?))
}

/// Replace the merchant's invoice defaults.
///
/// Replaces the merchant's settings of the key's mode with the ones sent: an absent field is
/// unset, and the built-in default applies. Invoices finalized already keep what they froze.
/// Needs a secret key not bound to a shop.
///
/// Fails: `shop_bound_key` (403).
///
/// Events: none.
#[utoipa::path(put, path = "/invoice-settings", tag = "invoices", request_body = SettingsInput,
    responses((status = 200, body = Settings), (status = 400, body = crate::error::ErrorBody),
        (status = 403, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_settings(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<SettingsInput>,
) -> Result<HttpResponse, ApiError> {
    merchant_wide(&caller)?;
    let req = req.checked()?;
    let now = state.clock.now();
    settings::put(&state.db, &owner(&caller, None), &req, now).await?;
    Ok(HttpResponse::Ok().json(settings_of(&state, &caller, None).await?))
}

/// A shop's invoice settings: its overrides and what applies.
///
/// Answers the shop's own overrides of the key's mode and the settings its invoices get: the
/// shop's, else the merchant's, else the built-in defaults. A shop-bound key reaches only its
/// own shop. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-settings/profiles/{profile_id}", tag = "invoices",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Settings), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn get_shop_settings(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(settings_of(&state, &caller, Some(shop.as_str())).await?))
}

/// Replace a shop's overrides; unset fields fall back to the merchant's.
///
/// Replaces the shop's overrides of the key's mode with the ones sent; the shop's next
/// finalize uses them. A shop-bound key reaches only its own shop. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(put, path = "/invoice-settings/profiles/{profile_id}", tag = "invoices",
    params(("profile_id" = String, Path)), request_body = SettingsInput,
    responses((status = 200, body = Settings), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_shop_settings(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<SettingsInput>,
) -> Result<HttpResponse, ApiError> {
    let req = req.checked()?;
    let now = state.clock.now();
    settings::put(&state.db, &owner(&caller, Some(shop.as_str())), &req, now).await?;
    Ok(HttpResponse::Ok().json(settings_of(&state, &caller, Some(shop.as_str())).await?))
}

async fn rules_of(
    state: &AppState,
    caller: &Caller,
    profile_id: Option<&str>,
) -> Result<TaxRules, ApiError> {
    let rules = settings::rules(&state.db, &owner(caller, profile_id)).await?;
    Ok(TaxRules {
        profile_id: profile_id.map(str::to_owned),
        rules: rules.iter().map(TaxRule::render).collect(),
    })
}

/// Checks a rule set (a tie is a 400 naming both rules) and returns its rows.
fn checked_rules(
    owner: &settings::Owned<'_>,
    input: TaxRulesInput,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<tax_rule::Model>, ApiError> {
    if input.rules.len() > 100 {
        return Err(ApiError::invalid_param("rules", "at most 100 rules"));
    }
    let mut rows = Vec::with_capacity(input.rules.len());
    for (i, r) in input.rules.into_iter().enumerate() {
        let p = |f: &str| format!("rules[{i}].{f}");
        if !(0..=MAX_RATE_BPS).contains(&r.rate_bps) {
            return Err(ApiError::invalid_param(
                &p("rate_bps"),
                "rate_bps is 0 to 10000 (100 %)",
            ));
        }
        let country = api::country(&p("country"), &r.country)?;
        let region = check_text(&p("region"), r.region.as_ref(), 64)?;
        let category = check_text(&p("tax_category"), r.tax_category.as_ref(), 64)?;
        if let (Some(from), Some(until)) = (r.valid_from, r.valid_until) {
            if from >= until {
                return Err(ApiError::invalid_param(
                    &p("valid_until"),
                    "valid_until must be after valid_from",
                ));
            }
        }
        rows.push(tax_rule::Model {
            id: new_id("tax"),
            merchant_id: owner.merchant_id.to_owned(),
            profile_id: owner.profile_id.to_owned(),
            test_mode: owner.test_mode,
            position: i as i64,
            rate_bps: r.rate_bps,
            country,
            region: region.filter(|r| !r.is_empty()),
            tax_category: category.filter(|c| !c.is_empty()),
            inclusive: r.inclusive,
            valid_from: r.valid_from,
            valid_until: r.valid_until,
            created_at: now,
        });
    }
    let rules: Vec<tax::Rule> = rows.iter().map(settings::rule_of).collect();
    if let Err(tax::Tie(a, b)) = tax::check_set(&rules) {
        return Err(ApiError::invalid(
            "tax_rule_tie",
            format!(
                "rules[{a}] and rules[{b}] apply to the same country, region and category at \
                 the same time: make their validity windows disjoint or drop one"
            ),
        )
        .param(format!("rules[{b}]")));
    }
    Ok(rows)
}

async fn put_rules(
    state: &AppState,
    caller: &Caller,
    profile_id: Option<&str>,
    input: TaxRulesInput,
) -> Result<HttpResponse, ApiError> {
    let owner = owner(caller, profile_id);
    let now = state.clock.now();
    let rows = checked_rules(&owner, input, now)?;
    settings::put_rules(&state.db, &owner, &rows, now).await?;
    Ok(HttpResponse::Ok().json(rules_of(state, caller, profile_id).await?))
}

/// The merchant's tax rules.
///
/// Answers the merchant's tax rules of the key's mode, in the order saved. They apply to every
/// shop's invoices and renewals, after the shop's own rules. Needs a secret key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-settings/tax-rules", tag = "invoices",
    responses((status = 200, body = TaxRules)), security(("api_key" = [])))]
pub async fn get_tax_rules(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(rules_of(&state, &caller, None).await?))
}

/// Replace the merchant's tax rules.
///
/// Replaces the merchant's rule set of the key's mode (at most 100 rules). Two rules that
/// could apply to one line at one moment (the same country, region and category in overlapping
/// validity windows) are refused with `tax_rule_tie`, naming both. Invoices finalized and
/// cycles charged from then on use the new set. Needs a secret key not bound to a shop.
///
/// Fails: `tax_rule_tie` (400), `shop_bound_key` (403).
///
/// Events: none.
#[utoipa::path(put, path = "/invoice-settings/tax-rules", tag = "invoices",
    request_body = TaxRulesInput,
    responses((status = 200, body = TaxRules), (status = 400, body = crate::error::ErrorBody),
        (status = 403, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_tax_rules(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<TaxRulesInput>,
) -> Result<HttpResponse, ApiError> {
    merchant_wide(&caller)?;
    put_rules(&state, &caller, None, req).await
}

/// A shop's tax rules (the merchant's apply after them).
///
/// Answers the shop's own rules of the key's mode, in the order saved. A shop-bound key
/// reaches only its own shop. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-settings/profiles/{profile_id}/tax-rules", tag = "invoices",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = TaxRules), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn get_shop_tax_rules(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(rules_of(&state, &caller, Some(shop.as_str())).await?))
}

/// Replace a shop's tax rules.
///
/// Replaces the shop's rule set of the key's mode (at most 100 rules), checked as the
/// merchant's is: two rules that could apply to one line at one moment are refused with
/// `tax_rule_tie`. The merchant's rules still apply after the shop's. Needs a secret key.
///
/// Fails: `tax_rule_tie` (400), `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(put, path = "/invoice-settings/profiles/{profile_id}/tax-rules", tag = "invoices",
    params(("profile_id" = String, Path)), request_body = TaxRulesInput,
    responses((status = 200, body = TaxRules), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_shop_tax_rules(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<TaxRulesInput>,
) -> Result<HttpResponse, ApiError> {
    put_rules(&state, &caller, Some(shop.as_str()), req).await
}

/// Delete a shop's tax rules (the merchant's apply alone).
///
/// Removes every rule of the shop in the key's mode and answers the empty set; the shop's
/// invoices and renewals are then taxed by the merchant's rules alone. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(delete, path = "/invoice-settings/profiles/{profile_id}/tax-rules", tag = "invoices",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = TaxRules), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn delete_shop_tax_rules(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let now = state.clock.now();
    settings::put_rules(&state.db, &owner(&caller, Some(shop.as_str())), &[], now).await?;
    Ok(HttpResponse::Ok().json(rules_of(&state, &caller, Some(shop.as_str())).await?))
}

/// Which rule applies to each line for this buyer, and the amounts.
///
/// Prices the lines sent for the buyer's `country` and `region` at `at` (default now) as
/// finalize would: each line with the rule that taxed it and whose rule it is, the breakdown
/// by rate and the totals. With a shop (`x-profile-id` or a shop-bound key) the shop's rules
/// count too. Nothing is stored. Needs a secret key.
///
/// Fails: `invalid_currency` (400).
///
/// Events: none.
#[utoipa::path(post, path = "/invoice-settings/tax-rules/evaluate", tag = "invoices",
    request_body = EvaluateRequest,
    responses((status = 200, body = Evaluation), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn evaluate(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<EvaluateRequest>,
) -> Result<HttpResponse, ApiError> {
    let currency = parse_currency("currency", &req.currency)?;
    let place = Place {
        country: Some(api::country("buyer.country", &req.buyer.country)?),
        region: check_text("buyer.region", req.buyer.region.as_ref(), 64)?,
    };
    let lines = api::lines_from(&req.lines, state.settings.limits.max_amount)?;
    let shop = caller.profile.as_ref().map(|p| p.as_str());
    let rules = settings::rules_for(&state.db, &owner(&caller, shop)).await?;
    let at = req.at.unwrap_or_else(|| state.clock.now());
    let overflow = || ApiError::invalid_param("lines", "the amounts overflow");
    let priced = machine::reprice(&lines, &rules, &place, at).ok_or_else(overflow)?;
    let totals = machine::totals(&priced).ok_or_else(overflow)?;
    Ok(HttpResponse::Ok().json(evaluation(currency, &priced, totals, &rules)))
}

/// What an evaluation answers: each priced line with the rule that taxed it and whose rule it
/// is, the breakdown by rate and the totals.
fn evaluation(
    currency: String,
    priced: &[machine::Line],
    totals: machine::Totals,
    rules: &[super::tax::Rule],
) -> Evaluation {
    let source = |id: &Option<String>| {
        rules
            .iter()
            .find(|r| Some(&r.id) == id.as_ref())
            .map(|r| r.owner.as_str().to_owned())
    };
    Evaluation {
        currency,
        tax_breakdown: machine::by_rate(priced),
        lines: priced
            .iter()
            .map(|l| EvaluatedLine {
                line_id: l.line_id.clone(),
                source: source(&l.tax_rule_id),
                tax_rule_id: l.tax_rule_id.clone(),
                tax_rate_bps: l.tax_rate_bps,
                tax_inclusive: l.tax_inclusive,
                amount: l.amount,
                tax_amount: l.tax_amount,
                total: l.total,
            })
            .collect(),
        subtotal: totals.subtotal,
        tax: totals.tax,
        total: totals.total,
    }
}
