//! What every handler can reach: the database, settings, clock, scheduler, the actors'
//! threads, the webhook dispatcher's doorbell and the shops known to their merchants. It
//! names no resource: each resource's actors (and the dispatcher, which the event routes
//! use) are app data of their own (`web::Data<Payments>`), registered by `app.rs`.

use std::sync::Arc;

use payd_actors::ArbiterPool;

use crate::commit::Db;
use crate::ids::{MerchantId, ProfileId};
use crate::{
    clock::SharedClock,
    lookups::{Cache, Generation},
    scheduler::Scheduler,
    settings::Settings,
    wake::Wake,
};

pub struct AppState {
    pub db: Db,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    pub scheduler: Arc<Scheduler>,
    /// The threads that host keyed actors.
    pub arbiters: Arc<ArbiterPool>,
    /// The base of URLs handed to buyers (`checkout_url`).
    pub public_url: String,
    /// Rings the webhook dispatcher (after a write that queued deliveries outside a commit).
    pub wake: Wake,
    /// Seals and opens stored secrets.
    pub keyring: Arc<crate::sealed::Keyring>,
    /// Shops known to belong to their merchants (spares the `x-profile-id` query).
    pub shops: KnownShops,
    /// When the cached lookups may be trusted; what a route that changes them waits on.
    pub generation: Arc<Generation>,
    /// API keys by hash, with what a request needs of their merchant (spares a request's read).
    pub keys: Cache<crate::lookups::FoundKey>,
}

/// The shops seen to belong to their merchants. A shop is never deleted nor moved to another
/// merchant, so what this holds never goes stale on any instance, and a request naming a shop
/// it knows needs no query to check `x-profile-id`. Only shops that exist are learnt, and at
/// most `CAPACITY` of them (beyond it, the query answers as before).
#[derive(Debug, Default)]
pub struct KnownShops(dashmap::DashMap<ProfileId, MerchantId>);

impl KnownShops {
    const CAPACITY: usize = 100_000;

    pub fn knows(&self, merchant: &MerchantId, shop: &ProfileId) -> bool {
        self.0.get(shop).is_some_and(|owner| *owner == *merchant)
    }

    pub fn learn(&self, merchant: &MerchantId, shop: &ProfileId) {
        if self.0.len() < Self::CAPACITY {
            self.0.insert(shop.clone(), merchant.clone());
        }
    }
}
