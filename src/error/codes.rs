//! Every error `code` payd answers, with its HTTP status, its `type`, the `param` it names and
//! what the caller should do: the one list `docs/errors.md` is made from and the OpenAPI error
//! schema enumerates. [`ApiError::new`](super::ApiError::new) checks, in debug builds (every
//! test run), that each error it makes is a row here.

use super::ErrorType::{self, *};

/// One code at one status (a code answered at two statuses has two rows).
pub struct ErrorCode {
    pub code: &'static str,
    pub status: u16,
    pub kind: ErrorType,
    /// The `param` it names: a field, a header, or empty for none.
    pub param: &'static str,
    /// What the caller should do.
    pub action: &'static str,
}

const fn c(
    code: &'static str,
    status: u16,
    kind: ErrorType,
    param: &'static str,
    action: &'static str,
) -> ErrorCode {
    ErrorCode {
        code,
        status,
        kind,
        param,
        action,
    }
}

/// Every code, grouped by status.
pub const CODES: &[ErrorCode] = &[
    // 400: the request itself.
    c("parameter_missing", 400, InvalidRequest, "the field", "Send the field `param` names."),
    c("parameter_invalid", 400, InvalidRequest, "the field", "Correct the field `param` names; the message says what it must be."),
    c("parameter_unknown", 400, InvalidRequest, "the field", "Remove the field: payd refuses fields it does not know rather than ignore a typo."),
    c("invalid_json", 400, InvalidRequest, "", "Send the body as one JSON object."),
    c("invalid_body", 400, InvalidRequest, "", "The body could not be read to its end: send it again."),
    c("invalid_multipart", 400, InvalidRequest, "`file`", "Send a `multipart/form-data` body with a `file` part (and `purpose`)."),
    c("invalid_request", 400, InvalidRequest, "", "Read the message: the request is malformed."),
    c("invalid_request", 411, InvalidRequest, "", "Send `Content-Length` (or a chunked body)."),
    c("invalid_request", 414, InvalidRequest, "", "Send a shorter URI."),
    c("invalid_request", 431, InvalidRequest, "", "Send fewer or smaller headers."),
    c("invalid_currency", 400, InvalidRequest, "`currency`", "Send an ISO 4217 code payments can be made in (`USD`, `EUR`, `JPY` …)."),
    c("amount_not_positive", 400, InvalidRequest, "`amount`", "Send an amount greater than 0, in the currency's minor units."),
    c("amount_too_large", 400, InvalidRequest, "`amount`, `items`", "Send at most `limits.max_amount` minor units (the operator's setting)."),
    c("amount_exceeds_capturable", 400, InvalidRequest, "`amount`", "Capture at most `amount_capturable` (read the payment)."),
    c("amount_exceeds_refundable", 400, InvalidRequest, "`amount`, `lines`", "Refund at most what is captured and not yet refunded, per line too (read the payment's lines)."),
    c("amount_exceeds_case", 400, InvalidRequest, "`amount`", "Offer at most the amount the wallet case claims."),
    c("amount_exceeds_disputable", 400, InvalidRequest, "`amount`", "Dispute at most what is captured and not refunded or disputed already."),
    c("invalid_card_number", 400, InvalidRequest, "`payment_method_data.card.number`", "Ask the buyer for the card number again (it fails the Luhn check or its length)."),
    c("invalid_cvc", 400, InvalidRequest, "`…card.cvc`", "Ask for the 3 or 4 digits on the card."),
    c("invalid_expiry_month", 400, InvalidRequest, "`…card.exp_month`", "Send a month from 1 to 12."),
    c("invalid_expiry_year", 400, InvalidRequest, "`…card.exp_year`", "The card has expired or the year is not valid: ask for another card."),
    c("invalid_email", 400, InvalidRequest, "`email`", "Send an email address of the form `name@domain`."),
    c("invalid_phone", 400, InvalidRequest, "`phone`", "Send 7 to 15 digits, optionally with `+` and separators."),
    c("invalid_url", 400, InvalidRequest, "`url`, `api_base`", "Send an `https://` URL that payd may reach (not a private address in production)."),
    c("invalid_event", 400, InvalidRequest, "`body`, `data.object.id`", "For processors only: the body is not an event payd reads."),
    c("invalid_signature", 400, InvalidRequest, "`Stripe-Signature`", "For processors only: sign with the account's webhook secret, within 5 minutes."),
    c("lines_amount_mismatch", 400, InvalidRequest, "`lines`, `amount`", "Make the lines add up to the amount (tax included)."),
    c("line_catalog_mismatch", 400, InvalidRequest, "the line's field", "A line naming a catalog price takes its name and unit amount from the catalog: drop or correct them."),
    c("customer_required", 400, InvalidRequest, "`customer_id`", "Send `customer_id`: saving a card or charging off-session needs a customer."),
    c("mandate_required", 400, InvalidRequest, "`mandate_id`", "Send the `mandate_id` an off-session charge runs under."),
    c("payment_method_required", 400, InvalidRequest, "`payment_method_data`", "Send a card (or `payment_method_id`) with `confirm: true`, or confirm later with one."),
    c("mandate_method_mismatch", 400, InvalidRequest, "`payment_method_id`", "Charge the payment method the mandate was given for."),
    c("payment_method_unusable", 400, InvalidRequest, "`payment_method_data.stripe`", "Send a PaymentMethod or token made by Stripe.js with the shop's Stripe account."),
    c("processor_unsupported", 400, InvalidRequest, "the field", "The processor cannot do this (e.g. a partial capture that keeps the rest for Stripe, files for a Stripe dispute): do without it."),
    c("shop_required", 400, InvalidRequest, "`x-profile-id`", "Name the shop with the `x-profile-id` header, or use a key bound to it."),
    c("evidence_limit", 400, InvalidRequest, "`file_id`", "Remove evidence before attaching more: a dispute holds a bounded number of files."),
    c("evidence_required", 400, InvalidRequest, "`explanation`", "Attach a file or write an explanation before submitting."),
    c("file_empty", 400, InvalidRequest, "`file`", "Upload a file with content."),
    c("file_type_unsupported", 400, InvalidRequest, "`file`", "Upload one of the types the message lists (sniffed from the bytes, not the name)."),
    c("archived", 400, InvalidRequest, "`price_id`", "Use a price or product that is not archived, or unarchive it."),
    c("bundle_cycle", 400, InvalidRequest, "`components`", "A bundle cannot contain itself, even through another bundle."),
    c("tax_rule_tie", 400, InvalidRequest, "`rules`", "Make the two rules the message names differ in country, region or category."),
    c("unknown_line", 400, InvalidRequest, "`lines`", "Credit only lines of the invoice (their `line_id`)."),
    c("credit_exceeds_line", 400, InvalidRequest, "`lines`", "Credit at most what the line has left (amount and quantity)."),
    c("credit_exceeds_total", 400, InvalidRequest, "`amount`", "Credit at most what the invoice has left to credit."),
    c("nothing_to_credit", 400, InvalidRequest, "`lines`", "Name at least one line or amount to credit."),
    c("due_date_passed", 400, InvalidRequest, "`due_date`", "Send a due date on or after the issue date."),
    c("insufficient_balance", 400, InvalidRequest, "`amount`", "Pay out at most the available balance (`GET /balance`)."),
    c("resource_missing", 400, InvalidRequest, "`starting_after`, `ending_before`", "Start the page at an object you can see (one the list returned)."),
    // 401: who is calling.
    c("missing_api_key", 401, Authentication, "", "Send your key in the `api-key` header."),
    c("invalid_api_key", 401, Authentication, "", "Check the key: it is not one payd knows (a typo, another deployment, or a key made under a pepper the operator dropped)."),
    c("api_key_revoked", 401, Authentication, "", "Use another key; make one with `POST /account/api-keys`."),
    c("admin_disabled", 401, Authentication, "", "The operator enables the admin API by starting payd with `PAYD_ADMIN_KEY`."),
    c("unauthenticated", 401, Authentication, "", "Send a key."),
    // 403: what the key may do.
    c("merchant_suspended", 403, Permission, "", "The operator suspended the account: contact them."),
    c("secret_key_required", 403, Permission, "", "Call this route from your server with a secret key."),
    c("unbound_key_required", 403, Permission, "", "Use a key not bound to a shop: this covers every shop."),
    c("shop_bound_key", 403, Permission, "", "Use a key not bound to a shop to manage the merchant's other shops."),
    c("profile_mismatch", 403, Permission, "`x-profile-id`, `profile_id`", "Name the key's own shop, or use a key not bound to one."),
    c("live_key_from_test_key", 403, Permission, "`test_mode`", "Make live keys with a live key (or ask the operator)."),
    c("production_disabled", 403, Permission, "`mode`", "This deployment runs in sandbox mode: ask for sandbox keys."),
    c("client_secret_mismatch", 403, Permission, "`client_secret`", "Send the payment's own `client_secret`."),
    c("client_secret_required", 403, Permission, "`client_secret`", "With a publishable key, send the payment's `client_secret`."),
    c("forbidden", 403, Permission, "", "The key may not do this."),
    // 404.
    c("resource_missing", 404, NotFound, "the id's field", "Check the id, and that the key's mode and shop reach the object (another's objects read as missing)."),
    c("route_not_found", 404, NotFound, "", "Check the method and path (sandbox routes do not exist in production)."),
    c("method_not_allowed", 405, InvalidRequest, "", "Use a method the route takes."),
    c("not_acceptable", 406, InvalidRequest, "", "Accept `application/json`."),
    c("request_timeout", 408, InvalidRequest, "", "Send the request again, faster."),
    // 409: the object's state.
    c("invalid_state", 409, Conflict, "", "Read the object: its status does not allow this now."),
    c("idempotency_key_reused", 409, Conflict, "`Idempotency-Key`", "Use a new key: this one was sent with another request (method, path or body)."),
    c("idempotency_key_in_use", 409, Conflict, "`Idempotency-Key`", "Wait `Retry-After` seconds: the first request with this key is still running."),
    c("concurrent_update", 409, Conflict, "", "Send the same request again (`Retry-After: 1`): another request changed the object first."),
    c("limit_reached", 409, Conflict, "", "The merchant is at the bound the message names: remove something, or ask the operator to raise it."),
    c("dispute_open", 409, Conflict, "`payment_id`", "Wait for the dispute to close (or accept it) before refunding."),
    c("refund_exists", 409, Conflict, "`payment_id`", "A refund exists: the payment can no longer be cancelled; refund instead."),
    c("customer_redacted", 409, Conflict, "`customer_id`", "The customer was deleted: use another."),
    c("active_mandate", 409, Conflict, "", "Revoke the customer's active mandate before deleting the customer."),
    c("mandate_inactive", 409, Conflict, "`mandate_id`", "The mandate is not active (pending, ended or expired): use another or ask the buyer again."),
    c("mandate_revoked", 409, Conflict, "`mandate_id`", "The mandate was revoked: ask the buyer for a new one."),
    c("mandate_currency_mismatch", 409, Conflict, "`mandate_id`", "Charge in the mandate's currency."),
    c("mandate_amount_exceeded", 409, Conflict, "`mandate_id`", "Charge at most the mandate's amount per charge."),
    c("payment_method_deleted", 409, Conflict, "`mandate_id`", "The mandate's payment method was deleted: ask the buyer for a new mandate."),
    c("processor_operation_pending", 409, Conflict, "`payment_id`", "Wait `Retry-After` seconds: an earlier operation's outcome at the processor is not known yet."),
    c("processor_exists", 409, Conflict, "`name`", "Pick another name for the processor account."),
    c("processor_billing", 409, Conflict, "", "A billing processor bills this subscription: change it there, then sync."),
    c("processor_subscription_cancelled", 409, Conflict, "`processor_subscription_id`", "The processor's subscription is cancelled: it cannot be adopted."),
    c("already_adopted", 409, Conflict, "`processor_subscription_id`", "It is payd's already: read the subscription."),
    c("already_disputed", 409, Conflict, "`payment_id`", "The payment is disputed already: follow that dispute."),
    c("case_exists", 409, Conflict, "`payment_id`", "A wallet case exists for this payment: follow it."),
    c("nothing_to_dispute", 409, Conflict, "`payment_id`", "Nothing of the payment is left to dispute."),
    c("wallet_case", 409, Conflict, "", "The dispute follows a wallet case: act on the case (`/disputes/wallet/cases/{case_id}/actions`)."),
    c("invoice_paid", 409, Conflict, "", "The invoice is paid: credit it instead."),
    c("invoice_credited", 409, Conflict, "", "The invoice is credited in full already."),
    c("invoice_exists", 409, Conflict, "the source's id", "An invoice for this payment or cycle exists: read it."),
    c("invoice_draft", 409, Conflict, "", "Finalize the draft first."),
    c("invoice_not_disputable", 409, Conflict, "`invoice_id`", "Only a paid invoice not charged back yet can be charged back."),
    c("payment_not_captured", 409, Conflict, "`payment_id`", "Invoice a payment once it is captured."),
    c("payment_refunded", 409, Conflict, "`payment_id`", "The payment is refunded in full: there is nothing to invoice or credit."),
    c("past_calendar", 409, Conflict, "", "The subscription's next period would end past the calendar's end: end it or extend the calendar."),
    c("cycle_unchargeable", 409, Conflict, "", "The cycle cannot be charged now (nothing owed, or not the subscription's turn): read it."),
    c("default_price", 409, Conflict, "", "Make another price the product's default first."),
    c("product_has_sales", 409, Conflict, "", "Archive the product instead: it has sales."),
    c("product_in_use", 409, Conflict, "`product_id`", "Remove the product from the bundles, groups or subscriptions that use it, or archive it."),
    c("price_in_use", 409, Conflict, "`price_id`", "The price is used by subscriptions or lines: archive it instead."),
    c("preview_stale", 409, Conflict, "`preview_id`", "The catalog changed since the preview: preview again."),
    c("endpoint_disabled", 409, Conflict, "", "Enable the shop's webhook endpoint, then retry."),
    c("no_endpoint", 409, Conflict, "", "Set the shop's webhook endpoint first."),
    c("event_not_sent", 409, Conflict, "", "This event type is listed for the merchant and never sent to an endpoint."),
    c("conflict", 409, Conflict, "", "Read the object and decide again."),
    c("event_payload_purged", 410, InvalidRequest, "", "The payload is past retention: read the object itself instead."),
    // 413, 415, 429.
    c("payload_too_large", 413, PayloadTooLarge, "", "Send a smaller body (`http.max_body_bytes`)."),
    c("file_too_large", 413, PayloadTooLarge, "the part", "Upload a smaller file (`limits.max_file_bytes`)."),
    c("unsupported_media_type", 415, InvalidRequest, "`Content-Type`", "Send the body as `application/json`."),
    c("rate_limited", 429, RateLimited, "", "Wait `Retry-After` seconds, then retry."),
    c("too_many_retries", 429, RateLimited, "", "Wait a few seconds: the merchant's queue of manual retries is full."),
    // 5xx: payd or what it depends on.
    c("internal_error", 500, Internal, "", "A bug: report the `request_id`. Retrying with the same `Idempotency-Key` is safe."),
    c("processor_error", 502, Processor, "", "The processor failed: retry with the same `Idempotency-Key`."),
    c("overloaded", 503, Unavailable, "", "Retry after `Retry-After`: too many requests for one object wait."),
    c("database_unavailable", 503, Unavailable, "", "Retry after `Retry-After` with the same `Idempotency-Key`."),
    c("request_timeout", 503, Unavailable, "", "Retry with the same `Idempotency-Key`: payd did not finish in `http.request_timeout_secs`."),
    c("unavailable", 503, Unavailable, "", "Retry shortly."),
];

/// Whether `code` at `status` with `kind` is a row of [`CODES`].
pub fn listed(code: &str, status: u16, kind: ErrorType) -> bool {
    CODES
        .iter()
        .any(|c| c.code == code && c.status == status && c.kind == kind)
}

/// Every code once, in the order of [`CODES`]: the OpenAPI schema's enumeration.
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::with_capacity(CODES.len());
    for c in CODES {
        if !names.contains(&c.code) {
            names.push(c.code);
        }
    }
    names
}

/// The OpenAPI schema of `error.code`: a string among [`names`].
pub fn schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some(
            "A stable snake_case code: every one is in docs/errors.md with what to do",
        ))
        .enum_values(Some(names()))
        .build()
}

/// The table of `docs/errors.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "| code | status | type | param | what to do |\n| --- | --- | --- | --- | --- |\n",
    );
    for c in CODES {
        let param = if c.param.is_empty() { "—" } else { c.param };
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} | {} |\n",
            c.code,
            c.status,
            c.kind.as_str(),
            param,
            c.action
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_is_one_code_at_one_status_said_whole() {
        for (i, a) in CODES.iter().enumerate() {
            let snake = a.code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            assert!(snake, "{} is not snake_case", a.code);
            assert!(a.action.ends_with('.'), "{}: say what to do", a.code);
            let again = CODES[i + 1..]
                .iter()
                .any(|b| b.code == a.code && b.status == a.status);
            assert!(!again, "{} at {} twice", a.code, a.status);
        }
    }

    /// docs/errors.md holds the table made from [`CODES`], so a code added without its row on
    /// the page (or a row no code is) fails here.
    #[test]
    fn the_errors_page_is_the_table() {
        crate::docs_table::check(
            "docs/errors.md",
            "<!-- codes: made by src/error/codes.rs; PAYD_UPDATE_DOCS=1 cargo test --lib error::codes writes it -->\n",
            "<!-- codes end -->",
            &markdown(),
        );
    }

    /// A code written in a constructor call anywhere in `src/` is a row, whether or not a test
    /// reaches it (the debug check in `ApiError::new` covers the codes made at run time).
    #[test]
    fn every_code_written_in_the_source_is_listed() {
        let calls = [
            "::invalid(",
            "::unauthenticated(",
            "::forbidden(",
            "::conflict(",
            "::gone(",
            "::rate_limited(",
        ];
        let mut unlisted = Vec::new();
        let mut files = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            // This file names the calls it looks for.
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("error/codes.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for call in calls {
                for (at, _) in text.match_indices(call) {
                    let args = text[at + call.len()..].trim_start();
                    let Some(literal) = args.strip_prefix('"') else {
                        continue;
                    };
                    let code = &literal[..literal.find('"').unwrap_or(0)];
                    if !CODES.iter().any(|c| c.code == code) {
                        unlisted.push(format!("{}: {code}", path.display()));
                    }
                }
            }
        }
        assert!(
            unlisted.is_empty(),
            "codes missing from CODES: {unlisted:?}"
        );
    }
}
