//! The product catalog: products with prices whose amount, currency and recurrence never
//! change, add-on groups, bundles, categories, images, and import from a catalog processor.
//! A product is the aggregate: each change commits under its version (no actor: nothing here
//! moves money). Payments check their lines against it (`payments → products`).

pub mod api;
pub mod catalog;
pub mod import;
pub mod import_routes;
pub mod machine;
pub mod routes;
pub mod store;

/// The catalog's routes, the import's literal paths before `/products/{product_id}`.
pub const ROUTES: [crate::http::Routes; 2] = [import_routes::ROUTES, routes::ROUTES];
