//! The dispatcher's doorbell: a commit that recorded events rings it, so deliveries start at
//! once instead of at the next poll. It sits below everything that commits and the dispatcher
//! alike, so neither imports the other for it.

use std::sync::Arc;

use tokio::sync::Notify;

/// Wakes the dispatcher after a commit that recorded events.
#[derive(Clone, Default)]
pub struct Wake(Arc<Notify>);

impl Wake {
    pub fn now(&self) {
        self.0.notify_one();
    }

    /// Waits for the next ring (one ring made while nobody waited is kept).
    pub async fn rung(&self) {
        self.0.notified().await;
    }
}
