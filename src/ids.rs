//! Identifiers: a resource prefix and a UUIDv7 (time-sortable), e.g. `mer_0190f3…`.

use std::fmt;

use uuid::Uuid;

/// A fresh id with the given prefix.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::now_v7().simple())
}

/// True when `s` has this prefix followed by 32 lowercase hex digits.
fn has_shape(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// What every id type tells: its prefix, and how requests and errors name it.
pub trait Id: Sized + std::ops::Deref<Target = str> {
    const PREFIX: &'static str;
    /// What a 404 calls it: "no such {NOUN}".
    const NOUN: &'static str;
    /// The path parameter (and body field) that carries it.
    const PARAM: &'static str;

    /// The id, if `s` is one of this kind (its prefix, then 32 lowercase hex digits).
    fn parse(s: &str) -> Option<Self>;
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $noun:literal, $param:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            pub fn new() -> Self {
                Self(new_id($prefix))
            }

            /// Parses an id, refusing any other prefix or shape.
            pub fn parse(s: &str) -> Option<Self> {
                has_shape(s, $prefix).then(|| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Id for $name {
            const PREFIX: &'static str = $prefix;
            const NOUN: &'static str = $noun;
            const PARAM: &'static str = $param;

            fn parse(s: &str) -> Option<Self> {
                Self::parse(s)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// A merchant.
    MerchantId,
    "mer",
    "merchant",
    "merchant_id"
);
id_type!(
    /// A shop (invoice-settings and routing profile) of a merchant.
    ProfileId,
    "prof",
    "shop",
    "profile_id"
);
id_type!(
    /// An API key record (not the key itself).
    KeyId,
    "key",
    "api key",
    "key_id"
);
id_type!(PaymentId, "pay", "payment", "payment_id");
id_type!(RefundId, "ref", "refund", "refund_id");
id_type!(DisputeId, "dp", "dispute", "dispute_id");
id_type!(
    /// A wallet processor's seller case.
    CaseId,
    "case",
    "case",
    "case_id"
);
id_type!(PayoutId, "po", "payout", "payout_id");
id_type!(InvoiceId, "inv", "invoice", "invoice_id");
id_type!(SubscriptionId, "sub", "subscription", "subscription_id");
id_type!(
    /// A subscription at the billing processor, before it is adopted.
    ProcessorSubscriptionId,
    "bsub",
    "processor subscription",
    "processor_subscription_id"
);
id_type!(
    /// An invoice of the billing processor.
    ProcessorInvoiceId,
    "binv",
    "invoice",
    "processor_invoice_id"
);
id_type!(
    /// The preview of an adoption of processor subscriptions.
    AdoptionPreviewId,
    "subprev",
    "preview",
    "preview_id"
);
id_type!(ProductId, "prod", "product", "product_id");
id_type!(PriceId, "price", "price", "price_id");
id_type!(ImageId, "img", "image", "image_id");
id_type!(CategoryId, "cat", "category", "category_id");
id_type!(
    /// The preview of a catalog import.
    ImportPreviewId,
    "prev",
    "import preview",
    "preview_id"
);
id_type!(CustomerId, "cus", "customer", "customer_id");
id_type!(PaymentMethodId, "pm", "payment method", "payment_method_id");
id_type!(MandateId, "man", "mandate", "mandate_id");
id_type!(FileId, "file", "file", "file_id");
id_type!(EventId, "evt", "event", "event_id");
id_type!(
    BalanceTransactionId,
    "bt",
    "balance transaction",
    "transaction_id"
);
id_type!(RiskAssessmentId, "risk", "risk assessment", "assessment_id");
id_type!(AuditEntryId, "aud", "audit entry", "entry_id");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_sortable_and_parsed_strictly() {
        let a = MerchantId::new();
        let b = MerchantId::new();
        assert!(a.as_str().starts_with("mer_"));
        assert!(a < b, "UUIDv7 ids sort by creation time");
        assert_eq!(MerchantId::parse(a.as_str()), Some(a.clone()));
        assert_eq!(ProfileId::parse(a.as_str()), None);
        assert_eq!(MerchantId::parse("mer_xyz"), None);
        assert_eq!(MerchantId::parse(&a.as_str().to_uppercase()), None);
    }
}
