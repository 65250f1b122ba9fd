//! What Stripe's answers mean for payd: a decline's code and whether another processor may
//! be tried, a PaymentIntent waiting for the buyer, a refund's status, a card's brand.

use serde_json::Value;

use super::super::{
    model::{Authorization, Brand},
    AuthResult, RefundStatus,
};

/// Stripe's code for an off-session charge the card's issuer wants the buyer to authenticate.
pub(super) const AUTHENTICATION_REQUIRED: &str = "authentication_required";

/// Whether a PaymentIntent waits for the buyer to authenticate an off-session charge: its last
/// attempt declined `authentication_required`, nothing tried since.
pub(super) fn awaits_buyer(pi: &Value) -> bool {
    pi["status"] == "requires_payment_method"
        && decline_code(&pi["last_payment_error"]) == AUTHENTICATION_REQUIRED
}

/// A declined attempt: its code, message, and the PaymentIntent Stripe made for it.
pub(super) fn declined(code: String, message: String, reference: Option<String>) -> AuthResult {
    AuthResult {
        reference,
        outcome: Authorization::Declined {
            retryable: retryable(&code),
        },
        error: Some((code, message)),
        token: None,
        resend: None,
        capture_before: None,
    }
}

/// payd's code for a Stripe decline: the issuer's `decline_code` when Stripe passes it on
/// (`insufficient_funds`, `stolen_card` …), else Stripe's `code` (`card_declined`,
/// `expired_card`, `incorrect_cvc` …).
pub(super) fn decline_code(error: &Value) -> String {
    error["decline_code"]
        .as_str()
        .or(error["code"].as_str())
        .filter(|c| !c.is_empty() && c.len() <= 60)
        .unwrap_or("card_declined")
        .to_owned()
}

/// Whether another processor may be tried after this decline, as the sandbox classifies the
/// same decline: a card reported lost or stolen, suspected fraud, or a card that cannot be
/// right (its number, expiry or CVC) fails at every processor; anything else may pass at the
/// next one.
pub fn retryable(code: &str) -> bool {
    !matches!(
        code,
        "stolen_card"
            | "lost_card"
            | "pickup_card"
            | "fraudulent"
            | "merchant_blacklist"
            | "restricted_card"
            | "expired_card"
            | "incorrect_cvc"
            | "invalid_cvc"
            | "incorrect_number"
            | "invalid_number"
            | "invalid_expiry_month"
            | "invalid_expiry_year"
            | "card_not_supported"
            | "currency_not_supported"
    )
}

pub(super) fn refund_status(r: &Value) -> RefundStatus {
    match r["status"].as_str().unwrap_or("") {
        "succeeded" => RefundStatus::Succeeded,
        "failed" | "canceled" => RefundStatus::Failed(
            r["failure_reason"]
                .as_str()
                .unwrap_or("refused by Stripe")
                .to_owned(),
        ),
        _ => RefundStatus::Pending,
    }
}

/// A decline's code and message, from Stripe's `error` or a PaymentIntent's
/// `last_payment_error`.
pub(super) fn decline_of(error: &Value) -> (String, String) {
    let message = error["message"]
        .as_str()
        .filter(|m| !m.is_empty())
        .unwrap_or("the card was declined")
        .to_owned();
    (decline_code(error), message)
}

/// payd's brand of Stripe's `card.brand` (docs.stripe.com/api/payment_methods/object).
pub(super) fn brand_of(stripe: &str) -> Brand {
    match stripe {
        "visa" => Brand::Visa,
        "mastercard" => Brand::Mastercard,
        "amex" => Brand::Amex,
        "discover" => Brand::Discover,
        _ => Brand::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declines_keep_stripes_code_and_the_sandboxs_classes() {
        let generic = serde_json::json!({"code": "card_declined"});
        let issuer =
            serde_json::json!({"code": "card_declined", "decline_code": "insufficient_funds"});
        assert_eq!(decline_code(&generic), "card_declined");
        assert_eq!(decline_code(&issuer), "insufficient_funds");
        assert_eq!(decline_code(&Value::Null), "card_declined");
        assert!(retryable("card_declined") && retryable("insufficient_funds"));
        assert!(!retryable("stolen_card") && !retryable("expired_card"));
    }
}
