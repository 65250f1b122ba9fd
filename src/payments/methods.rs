//! The payment method a request sends, read at the edge: a card typed in, or what Stripe.js
//! made of one (a PaymentMethod or a card token), which is looked up at Stripe later
//! (`create::card_sent`).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{
    error::ApiError,
    processors::card::{parse_card, CardInput, SecretCard, StoredCard},
};

/// The payment method a request sends: a card typed in (`card`), or a PaymentMethod Stripe.js
/// made at one of the shop's Stripe accounts (`stripe`), whose card number payd never sees.
/// Exactly one of them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentMethodData {
    #[serde(default)]
    pub card: Option<CardInput>,
    #[serde(default)]
    pub stripe: Option<StripeMethodInput>,
}

/// A card Stripe.js (or Stripe's mobile libraries) took with the publishable key of one of the
/// shop's Stripe accounts: its PaymentMethod, or a card token. Exactly one of them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StripeMethodInput {
    /// Stripe's id of the PaymentMethod (`pm_…`, from `stripe.createPaymentMethod`); in test
    /// mode also one of Stripe's test PaymentMethods (`pm_card_visa`, `pm_card_chargeDeclined`, …).
    #[serde(default)]
    pub payment_method: Option<String>,
    /// A card token (`tok_…`, from `stripe.createToken`): payd makes it a PaymentMethod at the
    /// account.
    #[serde(default)]
    pub token: Option<String>,
    /// The Stripe account it was made at: needed only when the shop has several Stripe
    /// accounts in the payment's mode.
    #[serde(default)]
    pub processor_account_id: Option<String>,
}

impl StripeMethodInput {
    /// The PaymentMethod or the token, whichever was sent, in the form of Stripe's ids (a
    /// prefix, an underscore, letters and digits).
    pub fn method(&self) -> Result<String, ApiError> {
        const FIELD: &str = "payment_method_data.stripe";
        let (id, param, prefix) = match (&self.payment_method, &self.token) {
            (Some(pm), None) => (pm, "payment_method_data.stripe.payment_method", "pm_"),
            (None, Some(tok)) => (tok, "payment_method_data.stripe.token", "tok_"),
            _ => {
                return Err(ApiError::invalid_param(
                    FIELD,
                    "send one of payment_method (pm_…) and token (tok_…)",
                ))
            }
        };
        let valid = id.starts_with(prefix)
            && id.len() <= 255
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(ApiError::invalid_param(
                param,
                format!("a Stripe id of the form {prefix}…"),
            ));
        }
        Ok(id.clone())
    }
}

/// The payment method a request sent, read.
#[derive(Debug, Clone)]
pub enum SentCard {
    /// A card typed in: as stored, and its number and code for the processor.
    Entered(StoredCard, SecretCard),
    /// A Stripe PaymentMethod (`pm_…`) or card token (`tok_…`): what it is, and where, is asked
    /// of Stripe (`create::card_sent`).
    Stripe {
        method: String,
        account: Option<String>,
    },
}

/// What reading a request's card takes besides the request: the time (an expired card is
/// refused) and the key and owner its fingerprint is made with.
pub struct CardReader<'a> {
    pub now: DateTime<Utc>,
    pub pepper: &'a str,
    pub merchant_id: &'a str,
    pub test_mode: bool,
}

impl CardReader<'_> {
    /// A request's `payment_method_data`.
    pub fn read(&self, data: Option<&PaymentMethodData>) -> Result<Option<SentCard>, ApiError> {
        const FIELD: &str = "payment_method_data";
        match data {
            None => Ok(None),
            Some(PaymentMethodData {
                card: Some(card),
                stripe: None,
            }) => {
                let stored = parse_card(
                    card,
                    "payment_method_data.card",
                    self.now,
                    self.pepper,
                    self.merchant_id,
                    self.test_mode,
                )?;
                Ok(Some(SentCard::Entered(stored, SecretCard::from(card))))
            }
            Some(PaymentMethodData {
                card: None,
                stripe: Some(stripe),
            }) => Ok(Some(SentCard::Stripe {
                method: stripe.method()?,
                account: stripe.processor_account_id.clone(),
            })),
            Some(_) => Err(ApiError::invalid_param(
                FIELD,
                "send one of payment_method_data.card and payment_method_data.stripe",
            )),
        }
    }
}
