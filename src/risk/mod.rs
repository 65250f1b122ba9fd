//! Shops' risk bands: each shop assessed on a schedule and on an operator's demand over a
//! rolling window (dispute, refund and decline rates, volume), a chain of records per shop
//! and mode, and `shop_risk_band_escalated` exactly when the band rises from one assessment
//! to the next.

pub mod api;
pub mod assess;
pub mod machine;
pub mod routes;
pub mod store;

pub use assess::Assessor;
pub use routes::configure;
