//! Card data at the edge: Luhn, expiry and CVC checked, brand found, and a keyed fingerprint
//! made. The number and CVC live only as long as the request; what is kept is `StoredCard`.

use chrono::{DateTime, Datelike, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;
use utoipa::ToSchema;

use crate::error::ApiError;

pub use payd_model::cards::{Brand, ProcessorToken, StoredCard, TestBehaviour};

/// A card as the client sends it.
#[derive(Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CardInput {
    /// The card number (spaces allowed).
    pub number: String,
    pub exp_month: u32,
    /// Four digits (two are read as 20xx).
    pub exp_year: u32,
    pub cvc: String,
    #[serde(default)]
    pub holder_name: Option<String>,
}

impl std::fmt::Debug for CardInput {
    // Never print the number or the CVC.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardInput")
            .field("number", &"[redacted]")
            .field("exp_month", &self.exp_month)
            .field("exp_year", &self.exp_year)
            .finish_non_exhaustive()
    }
}

/// How the sandbox processors treat the card `number` (DESIGN §5 test cards).
pub fn test_behaviour(number: &str) -> TestBehaviour {
    match number {
        "4000000000000002" => TestBehaviour::Decline,
        "4000000000009995" => TestBehaviour::InsufficientFunds,
        "4000000000009979" => TestBehaviour::StolenCard,
        "4000000000003220" => TestBehaviour::Challenge,
        "4000000000000093" => TestBehaviour::PartialAuthorization,
        "4000000000000119" => TestBehaviour::Async,
        "4000000000000127" => TestBehaviour::Timeout,
        "4000000000000101" => TestBehaviour::Review,
        "4000000000000259" => TestBehaviour::DisputeAfterCapture,
        "4000000000000341" => TestBehaviour::ChargesDeclined,
        "4000000000005126" => TestBehaviour::RefundFails,
        "4000000000000036" => TestBehaviour::SyncMismatch,
        _ => TestBehaviour::Approve,
    }
}

pub fn luhn_valid(digits: &str) -> bool {
    let mut sum = 0;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut d = u32::from(c - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

fn brand_of(number: &str) -> Brand {
    let prefix = |n: usize| {
        number
            .get(..n)
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    match () {
        _ if number.starts_with('4') => Brand::Visa,
        _ if (51..=55).contains(&prefix(2)) || (2221..=2720).contains(&prefix(4)) => {
            Brand::Mastercard
        }
        _ if matches!(prefix(2), 34 | 37) => Brand::Amex,
        _ if prefix(4) == 6011 || prefix(2) == 65 => Brand::Discover,
        _ => Brand::Unknown,
    }
}

/// Checks a card and returns what may be kept of it. `param` is the JSON path of the card
/// object, so errors name e.g. `payment_method_data.card.number`.
pub fn parse_card(
    input: &CardInput,
    param: &str,
    now: DateTime<Utc>,
    pepper: &str,
    merchant_id: &str,
    test_mode: bool,
) -> Result<StoredCard, ApiError> {
    let field = |f: &str| format!("{param}.{f}");
    let number: String = input
        .number
        .chars()
        .filter(|c| *c != ' ' && *c != '-')
        .collect();
    if !(12..=19).contains(&number.len())
        || !number.bytes().all(|b| b.is_ascii_digit())
        || !luhn_valid(&number)
    {
        return Err(
            ApiError::invalid("invalid_card_number", "the card number is not valid")
                .param(field("number")),
        );
    }
    if !(1..=12).contains(&input.exp_month) {
        return Err(
            ApiError::invalid("invalid_expiry_month", "exp_month must be 1 to 12")
                .param(field("exp_month")),
        );
    }
    let year = if input.exp_year < 100 {
        2000 + input.exp_year
    } else {
        input.exp_year
    };
    let (this_year, this_month) = (now.year() as u32, now.month());
    if year > this_year + 50 || (year, input.exp_month) < (this_year, this_month) {
        return Err(ApiError::invalid(
            "invalid_expiry_year",
            "the card has expired or its expiry year is not valid",
        )
        .param(field("exp_year")));
    }
    // American Express prints 4 digits on the front; the other brands 3 on the back.
    let (digits, rule) = if brand_of(&number) == Brand::Amex {
        (4, "an American Express card's CVC is 4 digits")
    } else {
        (
            3,
            "this card's CVC is 3 digits (4 only for American Express)",
        )
    };
    if input.cvc.len() != digits || !input.cvc.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid("invalid_cvc", rule).param(field("cvc")));
    }
    let fingerprint = fingerprint(pepper, merchant_id, &number)?;
    Ok(StoredCard {
        brand: brand_of(&number),
        last4: number[number.len() - 4..].to_owned(),
        exp_month: input.exp_month,
        exp_year: year,
        fingerprint,
        holder_name: input.holder_name.clone().filter(|n| !n.trim().is_empty()),
        test_behaviour: test_mode.then(|| test_behaviour(&number)),
        token: None,
    })
}

/// A card's fingerprint at a merchant: an HMAC, under the deployment's pepper, of the merchant
/// and what identifies the card (its number; for a card payd never saw, the processor's own
/// fingerprint of it, prefixed).
pub fn fingerprint(pepper: &str, merchant_id: &str, card: &str) -> Result<String, ApiError> {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(pepper.as_bytes()).map_err(ApiError::internal)?;
    // Keyed per merchant: one buyer's card looks different at every merchant (and at every
    // merchant's processor), so fingerprints correlate nothing across merchants.
    mac.update(b"card:");
    mac.update(merchant_id.as_bytes());
    mac.update(b":");
    mac.update(card.as_bytes());
    Ok(hex::encode(&mac.finalize().into_bytes()[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(number: &str, m: u32, y: u32, cvc: &str) -> CardInput {
        CardInput {
            number: number.into(),
            exp_month: m,
            exp_year: y,
            cvc: cvc.into(),
            holder_name: None,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn cards_are_checked_and_kept_without_their_number() {
        let c = parse_card(
            &input("4242 4242 4242 4242", 12, 2030, "123"),
            "card",
            now(),
            "pepper-pepper-pepper",
            "mer_a",
            true,
        )
        .unwrap();
        assert_eq!(
            (c.brand, c.last4.as_str(), c.exp_year),
            (Brand::Visa, "4242", 2030)
        );
        assert_eq!(c.test_behaviour, Some(TestBehaviour::Approve));
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("4242424242424242"));
        let again = parse_card(
            &input("4242424242424242", 1, 31, "999"),
            "card",
            now(),
            "pepper-pepper-pepper",
            "mer_a",
            false,
        )
        .unwrap();
        assert_eq!(again.fingerprint, c.fingerprint);
        let elsewhere = parse_card(
            &input("4242424242424242", 1, 31, "999"),
            "card",
            now(),
            "pepper-pepper-pepper",
            "mer_b",
            false,
        )
        .unwrap();
        assert_ne!(elsewhere.fingerprint, c.fingerprint, "keyed per merchant");
        assert_eq!(again.test_behaviour, None);
        assert_eq!(
            parse_card(
                &input("5555555555554444", 12, 2030, "123"),
                "card",
                now(),
                "p",
                "mer_a",
                true
            )
            .map(|c| c.brand)
            .ok(),
            Some(Brand::Mastercard)
        );
    }

    #[test]
    fn bad_cards_name_the_field() {
        let param = |i: CardInput| {
            parse_card(&i, "payment_method_data.card", now(), "p", "mer_a", true)
                .unwrap_err()
                .param
        };
        assert_eq!(
            param(input("4242424242424241", 12, 2030, "123")).as_deref(),
            Some("payment_method_data.card.number")
        );
        assert_eq!(
            param(input("4242", 12, 2030, "123")).as_deref(),
            Some("payment_method_data.card.number")
        );
        assert_eq!(
            param(input("4242424242424242", 13, 2030, "123")).as_deref(),
            Some("payment_method_data.card.exp_month")
        );
        assert_eq!(
            param(input("4242424242424242", 10, 2026, "123")).as_deref(),
            Some("payment_method_data.card.exp_year")
        );
        assert_eq!(
            param(input("4242424242424242", 12, 2030, "12")).as_deref(),
            Some("payment_method_data.card.cvc")
        );
        // American Express takes 4 digits, the other brands 3.
        for (number, cvc, ok) in [
            ("378282246310005", "1234", true),
            ("378282246310005", "123", false),
            ("4242424242424242", "123", true),
            ("4242424242424242", "1234", false),
            ("5555555555554444", "1234", false),
        ] {
            let got = parse_card(
                &input(number, 12, 2030, cvc),
                "c",
                now(),
                "p",
                "mer_a",
                true,
            );
            assert_eq!(got.is_ok(), ok, "{number} with {cvc}: {got:?}");
        }
        assert!(
            parse_card(
                &input("4242424242424242", 11, 2026, "123"),
                "c",
                now(),
                "p",
                "mer_a",
                true
            )
            .is_ok(),
            "this month is still valid"
        );
    }

    #[test]
    fn every_test_card_passes_luhn() {
        for n in [
            "4242424242424242",
            "5555555555554444",
            "4000000000000002",
            "4000000000009995",
            "4000000000009979",
            "4000000000003220",
            "4000000000000093",
            "4000000000000119",
            "4000000000000127",
            "4000000000000101",
            "4000000000000259",
            "4000000000000341",
            "4000000000005126",
            "4000000000000036",
        ] {
            assert!(luhn_valid(n), "{n}");
        }
    }
}

/// The card number and CVC, only for the length of one authorization: never stored, never
/// logged (its `Debug` hides them).
#[derive(Clone)]
pub struct SecretCard {
    pub number: String,
    pub cvc: String,
}

impl std::fmt::Debug for SecretCard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCard([redacted])")
    }
}

impl From<&CardInput> for SecretCard {
    fn from(c: &CardInput) -> Self {
        Self {
            number: c.number.chars().filter(char::is_ascii_digit).collect(),
            cvc: c.cvc.clone(),
        }
    }
}
