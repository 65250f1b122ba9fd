//! The catalog's recurrence: how often a recurring price, and a subscription of it, bills.

text_enum! {
    /// How often a recurring price (and a subscription of it) bills.
    pub enum Interval {
        Day = "day",
        Week = "week",
        Month = "month",
        Year = "year",
    }
}

impl Interval {
    /// The most `interval_count` may be: a year in all.
    pub fn max_count(self) -> i64 {
        match self {
            Interval::Day => 365,
            Interval::Week => 52,
            Interval::Month => 12,
            Interval::Year => 1,
        }
    }
}

/// One component of a bundle: a product (its default price) or a price, and how many.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Component {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_id: Option<String>,
    /// 1 to 1 000.
    pub quantity: i64,
}

/// An add-on group, as products show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AddonGroup {
    pub group_id: String,
    pub name: String,
    pub min_selections: i64,
    pub max_selections: i64,
    pub products: Vec<String>,
    pub prices: Vec<String>,
    /// A sandbox object: always its product's mode.
    // Set from the product when read (`store::groups`): groups stored before the field
    // existed read as well.
    #[serde(default)]
    pub test_mode: bool,
}

/// A price in a catalog processor's catalog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemotePrice {
    pub external_id: String,
    pub unit_amount: i64,
    pub currency: String,
    /// `(interval, interval_count)` of a recurring price.
    pub recurring: Option<(Interval, i64)>,
}

/// A product in a catalog processor's catalog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteProduct {
    pub external_id: String,
    pub name: String,
    pub description: Option<String>,
    /// Still sold at the processor; a discontinued product is archived here too.
    pub active: bool,
    pub prices: Vec<RemotePrice>,
}

/// One step of an import.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Step {
    /// A product the shop does not have yet, with its prices.
    Create { product: RemoteProduct },
    /// An imported product whose name, description or prices differ from the processor's:
    /// its fields are set, new prices added, prices gone from the processor archived.
    Update {
        product_id: String,
        product: RemoteProduct,
        add_prices: Vec<RemotePrice>,
        archive_prices: Vec<String>,
    },
    /// An imported product the processor no longer sells.
    Archive {
        product_id: String,
        external_id: String,
    },
}
