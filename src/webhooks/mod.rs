//! Webhook delivery: signing, the retry policy, the per-merchant delivery actors, the
//! dispatcher that feeds them, and the routes that configure a shop's endpoint.

pub mod api;
pub mod attempt;
pub mod delivery;
pub mod dispatcher;
pub mod health;
pub mod policy;
pub mod record;
pub mod retention;
pub mod routes;
pub mod signer;
pub mod store;

use std::sync::Arc;

use crate::{
    commit::Db,
    mount::{Env, Mount},
    outbound::Policy,
};
use delivery::{DeliveryDeps, DeliveryPool};
use dispatcher::Dispatcher;

/// Webhooks: the endpoint's routes, the retention purge, and the dispatcher with its delivery
/// actors (returned: the service runs it, and stops it before the other actors).
pub async fn mount(m: &mut Mount, env: &Env<'_>) -> anyhow::Result<Arc<Dispatcher>> {
    let (db, settings) = (env.db, env.settings);
    retention::register(&mut m.scheduler, db, &settings.webhooks);
    m.routes(&[routes::ROUTES]);
    let webhook_settings = Arc::new(settings.webhooks.clone());
    // On PostgreSQL the webhook side has a pool of its own. A connection is bound to the
    // runtime that opened it, and the HTTP workers' runtimes end before shutdown drains
    // the deliveries: with one shared pool, a claim or an outcome written at that moment
    // failed ("a Tokio context … is being shutdown"), leaving its deliveries leased. The
    // dispatcher and the delivery actors run on runtimes that outlive the drain. SQLite's
    // connections are threads of their own, and its writes go through one writer.
    let webhook_db = match db.conn().get_database_backend() {
        sea_orm::DbBackend::Postgres => Db::connect(&settings.database).await?,
        _ => db.clone(),
    };
    let pool = DeliveryPool::new(
        DeliveryDeps {
            db: webhook_db.clone(),
            clock: env.clock.clone(),
            settings: webhook_settings.clone(),
            depth: Default::default(),
            wake: env.wake.clone(),
            backlogs: Default::default(),
            keyring: env.keyring.clone(),
            outbound: Arc::new(Policy::from_settings(
                settings.webhooks.allow_private_urls,
                &settings.security,
            )),
        },
        env.registry_config.clone(),
        env.arbiters.clone(),
    );
    let dispatcher = Arc::new(Dispatcher::new(
        webhook_db,
        env.clock.clone(),
        webhook_settings,
        pool,
        env.wake.clone(),
    ));
    m.sweep(dispatcher.deliveries().clone());
    m.data(actix_web::web::Data::from(dispatcher.clone()));
    Ok(dispatcher)
}
