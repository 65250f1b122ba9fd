//! The dispatcher's doorbell: a commit that recorded events rings it, so deliveries start at
//! once instead of at the next poll. It sits below everything that commits and the dispatcher
//! alike, so neither imports the other for it.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use tokio::sync::Notify;

/// Wakes the dispatcher after a commit that recorded events.
#[derive(Clone, Default)]
pub struct Wake(Arc<Bell>);

#[derive(Default)]
struct Bell {
    notify: Notify,
    /// Rung by `now` and not yet taken: work may have been recorded since.
    news: AtomicBool,
}

impl Wake {
    /// Something may have become due: an event recorded, a retry asked for, an endpoint
    /// resumed, another instance's commit heard.
    pub fn now(&self) {
        self.0.news.store(true, Ordering::Release);
        self.0.notify.notify_one();
    }

    /// A merchant's full queue has room again: its own deliveries can be claimed, but nothing
    /// new was recorded.
    pub fn freed(&self) {
        self.0.notify.notify_one();
    }

    /// Whether `now` rang since the last call (and forgets it).
    pub fn take_news(&self) -> bool {
        self.0.news.swap(false, Ordering::AcqRel)
    }

    /// Waits for the next ring (one ring made while nobody waited is kept).
    pub async fn rung(&self) {
        self.0.notify.notified().await;
    }
}
