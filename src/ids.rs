//! Identifiers: a resource prefix and a UUIDv7 (time-sortable), e.g. `mer_0190f3…`.

use std::fmt;

use uuid::Uuid;

/// A fresh id with the given prefix.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::now_v7().simple())
}

/// True when `s` has this prefix followed by 32 lowercase hex digits.
pub fn has_shape(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
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
    "mer"
);
id_type!(
    /// A shop (invoice-settings and routing profile) of a merchant.
    ProfileId,
    "prof"
);
id_type!(
    /// An API key record (not the key itself).
    KeyId,
    "key"
);

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
