//! The product, price, add-on group, bundle, category and image objects, and the request types
//! of the catalog routes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::machine;
use crate::{
    auth::keys::Caller,
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Metadata},
    pagination::ListQuery,
};

/// At most this many prices per product (on `POST /products`), images per product and
/// components per bundle.
pub const MAX_PRICES: usize = 20;
pub const MAX_IMAGES: usize = 8;
pub const MAX_COMPONENTS: usize = 50;

/// A price's recurrence: what a subscription bills every `interval_count` `interval`s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Recurring {
    /// `day`, `week`, `month` or `year`.
    pub interval: String,
    /// At least 1; at most a year in all (365 days, 52 weeks, 12 months or 1 year). Default 1.
    #[serde(default = "one")]
    pub interval_count: i64,
}

fn one() -> i64 {
    1
}

/// A price as given to `POST /products` and `POST /products/{product_id}/prices`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceInput {
    /// Minor units of `currency`, ≥ 0. Never changes.
    pub unit_amount: i64,
    /// ISO 4217. Never changes.
    pub currency: String,
    /// Never changes; none for a one-off price.
    #[serde(default)]
    pub recurring: Option<Recurring>,
    #[serde(default)]
    pub nickname: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    /// Make it the product's default price (on creation: the first price is, unless another
    /// says so).
    #[serde(default)]
    pub default: Option<bool>,
}

/// `POST /products`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProductRequest {
    /// 1 to 250 characters.
    pub name: String,
    /// At most 5 000 characters.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub category_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    /// Image ids from `POST /products/images` (at most 8).
    #[serde(default)]
    pub images: Option<Vec<String>>,
    /// At least one, at most 20.
    pub prices: Vec<PriceInput>,
}

/// `POST /products/{product_id}`: only the fields given change.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProductRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A category id, or `""` for none.
    #[serde(default)]
    pub category_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub images: Option<Vec<String>>,
    /// An active price of the product.
    #[serde(default)]
    pub default_price_id: Option<String>,
}

/// `POST /products/{product_id}/prices/{price_id}`: a price's amount, currency and recurrence
/// never change (create a new price and archive this one).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePriceRequest {
    #[serde(default)]
    pub nickname: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    /// `true` makes it the default price (it must be active); `false` is refused (make
    /// another price the default instead).
    #[serde(default)]
    pub default: Option<bool>,
}

/// An add-on group as given: its members are products or prices of the same shop.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonGroupInput {
    /// 1 to 100 characters.
    pub name: String,
    /// 0 to `max_selections`.
    pub min_selections: i64,
    /// 1 to the number of members.
    pub max_selections: i64,
    #[serde(default)]
    pub products: Vec<String>,
    #[serde(default)]
    pub prices: Vec<String>,
}

pub use payd_model::catalog::{AddonGroup, Component};

/// `POST /products/{product_id}/bundle`: the components (an empty list makes the product a
/// plain product again).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleRequest {
    pub components: Vec<Component>,
}

/// `POST /products/categories`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCategoryRequest {
    /// 1 to 100 characters.
    pub name: String,
    /// A top-level category of the shop (one level of nesting).
    #[serde(default)]
    pub parent_id: Option<String>,
}

/// A price, as products show it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Price {
    pub price_id: String,
    pub product_id: String,
    pub unit_amount: i64,
    pub currency: String,
    pub recurring: Option<Recurring>,
    pub nickname: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub active: bool,
    /// The product's default price.
    pub default: bool,
    /// Its id at the catalog processor it was imported from.
    pub external_id: Option<String>,
    /// A sandbox object (made with a test key).
    pub test_mode: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A bundle's components.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Bundle {
    pub components: Vec<Component>,
}

/// A product of the shop's catalog.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Product {
    pub product_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub profile_id: String,
    pub name: String,
    pub description: Option<String>,
    /// On sale: an archived product (and each archived price) cannot be sold.
    pub active: bool,
    pub category_id: Option<String>,
    pub default_price_id: Option<String>,
    /// Every price (`GET /products/list` shows the active ones).
    pub prices: Vec<Price>,
    pub addon_groups: Vec<AddonGroup>,
    /// `null` unless the product is a bundle.
    pub bundle: Option<Bundle>,
    /// Image ids.
    pub images: Vec<String>,
    /// Where payd serves each image, in the order of `images`.
    pub image_urls: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    /// Its id at the catalog processor it was imported from.
    pub external_id: Option<String>,
    pub test_mode: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A category of products.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Category {
    pub category_id: String,
    pub profile_id: String,
    pub name: String,
    pub parent_id: Option<String>,
    /// A sandbox object (made with a test key).
    pub test_mode: bool,
    pub created_at: DateTime<Utc>,
}

/// An uploaded product image.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Image {
    pub image_id: String,
    /// Served by payd without a key (the id is unguessable), with the image's type.
    pub url: String,
    /// `image/png`, `image/jpeg` or `image/webp`, told by the bytes.
    pub content_type: String,
    pub size: i64,
    pub sha256: String,
    pub created_at: DateTime<Utc>,
}

/// The answer to deleting a product.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedProduct {
    pub product_id: String,
    pub deleted: bool,
}

/// Filters of `GET /products/list`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListProductsQuery {
    /// Only this shop's products (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    /// On sale or archived.
    #[serde(default)]
    pub active: Option<bool>,
    #[serde(default)]
    pub category_id: Option<String>,
    /// Products whose name contains this (case-insensitive, at most 100 characters).
    #[serde(default)]
    pub name: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListProductsQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

/// Filters of `GET /products/categories/list`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListCategoriesQuery {
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListCategoriesQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

/// A name trimmed, 1 to `max` characters.
fn check_name(param: &str, name: &str, max: usize) -> Result<String, ApiError> {
    let n = name.trim();
    if n.is_empty() || name.chars().count() > max {
        return Err(ApiError::invalid_param(
            param,
            format!("{param} must be 1 to {max} characters"),
        ));
    }
    Ok(n.to_owned())
}

/// A price as asked, parsed.
#[derive(Debug, Clone)]
pub struct NewPrice {
    pub unit_amount: i64,
    pub currency: String,
    /// Interval and count.
    pub recurring: Option<(machine::Interval, i64)>,
    pub nickname: Option<String>,
    pub metadata: Option<Metadata>,
    pub default: bool,
}

impl PriceInput {
    /// The price's fields checked (`param`: where it is in the request, `""` when it is the
    /// whole body); `max_amount` is the deployment's largest charge.
    pub fn parse(&self, param: &str, max_amount: i64) -> Result<NewPrice, ApiError> {
        let at = |f: &str| match param {
            "" => f.to_owned(),
            _ => format!("{param}.{f}"),
        };
        // A free price (0) is a price, as in Stripe's catalog: the rule is 0 to the maximum,
        // and the refusal says so (`parse_amount` alone would refuse 0 and say "greater than
        // 0").
        if self.unit_amount < 0 {
            return Err(ApiError::invalid_param(
                &at("unit_amount"),
                format!("unit_amount must be 0 or more (0 to {max_amount} minor units)"),
            ));
        }
        if self.unit_amount != 0 {
            parse_amount(&at("unit_amount"), self.unit_amount, max_amount)?;
        }
        let recurring = match &self.recurring {
            Some(r) => Some((
                machine::check_recurring(&at("recurring"), &r.interval, r.interval_count)?,
                r.interval_count,
            )),
            None => None,
        };
        Ok(NewPrice {
            unit_amount: self.unit_amount,
            currency: parse_currency(&at("currency"), &self.currency)?,
            recurring,
            nickname: check_text(&at("nickname"), self.nickname.as_ref(), 250)?,
            metadata: check_metadata(self.metadata.as_ref())?,
            default: self.default == Some(true),
        })
    }
}

/// `POST /products` parsed.
#[derive(Debug)]
pub struct NewProduct {
    /// The shop the product is made in.
    pub shop: crate::ids::ProfileId,
    pub name: String,
    pub description: Option<String>,
    pub category_id: Option<String>,
    pub metadata: Option<Metadata>,
    pub images: Vec<String>,
    /// 1 to [`MAX_PRICES`], at most one of them the default.
    pub prices: Vec<NewPrice>,
}

impl CreateProductRequest {
    pub fn parse(self, caller: &Caller, max_amount: i64) -> Result<NewProduct, ApiError> {
        let shop = caller.require_shop()?.clone();
        let name = check_name("name", &self.name, 250)?;
        if self.prices.is_empty() || self.prices.len() > MAX_PRICES {
            return Err(ApiError::invalid_param(
                "prices",
                format!("a product has 1 to {MAX_PRICES} prices"),
            ));
        }
        let mut prices = Vec::with_capacity(self.prices.len());
        for (i, input) in self.prices.iter().enumerate() {
            let price = input.parse(&format!("prices[{i}]"), max_amount)?;
            if price.default && prices.iter().any(|p: &NewPrice| p.default) {
                return Err(ApiError::invalid_param(
                    &format!("prices[{i}].default"),
                    "only one price can be the default",
                ));
            }
            prices.push(price);
        }
        Ok(NewProduct {
            shop,
            name,
            description: check_text("description", self.description.as_ref(), 5000)?,
            category_id: self.category_id,
            metadata: check_metadata(self.metadata.as_ref())?,
            images: check_images(self.images.unwrap_or_default())?,
            prices,
        })
    }
}

fn check_images(images: Vec<String>) -> Result<Vec<String>, ApiError> {
    if images.len() > MAX_IMAGES {
        return Err(ApiError::invalid_param(
            "images",
            format!("at most {MAX_IMAGES} images"),
        ));
    }
    Ok(images)
}

/// `POST /products/{product_id}` parsed: what is `None` stays as it is.
#[derive(Debug, Default)]
pub struct ProductPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    /// `Some("")` takes the product out of its category.
    pub category_id: Option<String>,
    pub metadata: Option<Metadata>,
    pub images: Option<Vec<String>>,
    pub default_price_id: Option<String>,
}

impl UpdateProductRequest {
    pub fn parse(self) -> Result<ProductPatch, ApiError> {
        Ok(ProductPatch {
            name: self
                .name
                .as_deref()
                .map(|n| check_name("name", n, 250))
                .transpose()?,
            description: check_text("description", self.description.as_ref(), 5000)?,
            category_id: self.category_id,
            metadata: check_metadata(self.metadata.as_ref())?,
            images: self.images.map(check_images).transpose()?,
            default_price_id: self.default_price_id,
        })
    }
}

/// `POST /products/{product_id}/prices/{price_id}` parsed.
#[derive(Debug)]
pub struct PricePatch {
    pub nickname: Option<String>,
    pub metadata: Option<Metadata>,
    pub default: Option<bool>,
}

impl UpdatePriceRequest {
    pub fn parse(&self) -> Result<PricePatch, ApiError> {
        Ok(PricePatch {
            nickname: check_text("nickname", self.nickname.as_ref(), 250)?,
            metadata: check_metadata(self.metadata.as_ref())?,
            default: self.default,
        })
    }
}

impl BundleRequest {
    /// At most [`MAX_COMPONENTS`], each 1 to 1 000 of a product or of a price.
    pub fn parse(self) -> Result<Vec<Component>, ApiError> {
        if self.components.len() > MAX_COMPONENTS {
            return Err(ApiError::invalid_param(
                "components",
                format!("a bundle has at most {MAX_COMPONENTS} components"),
            ));
        }
        for (i, c) in self.components.iter().enumerate() {
            if !(1..=1000).contains(&c.quantity) {
                return Err(ApiError::invalid_param(
                    &format!("components[{i}].quantity"),
                    "quantity must be 1 to 1000",
                ));
            }
            if c.product_id.is_some() == c.price_id.is_some() {
                return Err(ApiError::invalid_param(
                    &format!("components[{i}]"),
                    "a component names a product_id or a price_id, not both",
                ));
            }
        }
        Ok(self.components)
    }
}

/// `POST /products/categories` parsed.
#[derive(Debug)]
pub struct NewCategory {
    pub shop: crate::ids::ProfileId,
    pub name: String,
    pub parent_id: Option<String>,
}

impl CreateCategoryRequest {
    pub fn parse(self, caller: &Caller) -> Result<NewCategory, ApiError> {
        Ok(NewCategory {
            shop: caller.require_shop()?.clone(),
            name: check_name("name", &self.name, 100)?,
            parent_id: self.parent_id,
        })
    }
}
