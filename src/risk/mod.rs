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

use crate::mount::{Env, Mount};

/// Risk: the periodic assessment of every shop and the routes that read it.
pub fn mount(m: &mut Mount, env: &Env<'_>) {
    let assessor = std::sync::Arc::new(Assessor {
        db: env.db.clone(),
        clock: env.clock.clone(),
        settings: env.settings.risk.clone(),
        wake: env.wake.clone(),
    });
    assessor.register(&mut m.scheduler);
    m.data(actix_web::web::Data::from(assessor));
    m.routes(&[routes::ROUTES]);
}
