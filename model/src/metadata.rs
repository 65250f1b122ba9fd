//! A merchant's free key-value data on an object, as every resource stores it.

use std::collections::BTreeMap;

/// Free key-value data set by the merchant (`metadata` on the API's objects).
pub type Metadata = BTreeMap<String, serde_json::Value>;
