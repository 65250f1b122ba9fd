//! Identifiers: a resource prefix and a UUIDv7 (time-sortable), e.g. `mer_0190f3…`. Each
//! kind of payd object has its type; a column that holds one is read as that type or not at
//! all (a stored id of another shape is corrupt, the read error of `text::corrupt`, naming its
//! column and row), and a string becomes one only through `parse`.

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

        /// Only an id of this kind: any other text is an error naming the kind.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Self::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format_args!("{text:?} is not a {} id", $noun))
                })
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

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<$name> for sea_orm::Value {
            fn from(id: $name) -> Self {
                sea_orm::Value::String(Some(id.0))
            }
        }

        impl From<&$name> for sea_orm::Value {
            fn from(id: &$name) -> Self {
                sea_orm::Value::String(Some(id.0.clone()))
            }
        }

        stored_as_text!($name);
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
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<MerchantId>(&json).unwrap(), a);
        let wrong = serde_json::from_str::<ProfileId>(&json)
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("is not a shop id"), "{wrong}");
    }

    /// Read from a real (SQLite) row: NULL is `None`, an id of its kind that id, any other
    /// text an error naming the column and the row.
    #[tokio::test]
    async fn a_stored_id_of_another_kind_is_an_error_naming_column_and_row() {
        use sea_orm::{ConnectionTrait, Database, Statement};
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let id = PaymentId::new();
        let sql =
            format!("SELECT 're_1' AS id, '{id}' AS payment_id, NULL AS other, 'cus_1' AS wrong");
        let stmt = Statement::from_string(db.get_database_backend(), sql);
        let r = db.query_one_raw(stmt).await.unwrap().unwrap();
        assert_eq!(r.try_get::<PaymentId>("", "payment_id").unwrap(), id);
        assert_eq!(r.try_get::<Option<PaymentId>>("", "other").unwrap(), None);
        let err = r.try_get::<PaymentId>("", "wrong").unwrap_err().to_string();
        assert!(
            err.contains(r#"the stored wrong of re_1 does not decode: "cus_1" is not a PaymentId"#),
            "{err}"
        );
        assert!(r.try_get::<Option<PaymentId>>("", "wrong").is_err());
    }
}
