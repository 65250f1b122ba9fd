//! A postal address (every part optional), as a customer and an invoice's parties hold it. Its
//! struct has no doc comment on purpose: the OpenAPI schema would carry it.

#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Address {
    #[serde(default)]
    pub line1: Option<String>,
    #[serde(default)]
    pub line2: Option<String>,
    #[serde(default)]
    pub city: Option<String>,
    #[serde(default)]
    pub postal_code: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    /// ISO 3166-1 alpha-2.
    #[serde(default)]
    pub country: Option<String>,
}
