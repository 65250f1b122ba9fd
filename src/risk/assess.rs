//! Assessing shops: one shop on an operator's demand, every shop on the schedule. An
//! assessment reads the shop's latest one and its counts over the window, and commits the
//! next in its chain; when another instance numbered first, it reads again and goes on from
//! that one, so each assessment is compared with the one right before it.

use std::sync::Arc;

use chrono::{DateTime, Duration};
use payd_entity::{profile, risk_assessment};

use super::{
    api::Thresholds,
    machine::{self, Band},
    store,
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    clock::SharedClock,
    commit::{self, or_retry, CommitError},
    scheduler::Scheduler,
    settings::RiskSettings,
    wake::Wake,
};

pub use payd_model::risk::Trigger;

/// Shops read per page by the scheduled run.
const PAGE: u64 = 100;

/// Lost races with another assessor of the same shop before giving up.
const TRIES: usize = 10;

pub struct Assessor {
    pub db: Db,
    pub clock: SharedClock,
    pub settings: RiskSettings,
    pub wake: Wake,
}

impl Assessor {
    /// Assesses the shop in this mode now; returns the record written.
    pub async fn assess(
        &self,
        shop: &profile::Model,
        test_mode: bool,
        trigger: Trigger,
    ) -> Result<risk_assessment::Model, CommitError> {
        let (row, deliveries) = commit::retrying(TRIES, || async {
            let now = self.clock.base();
            let previous = store::latest(&self.db, &shop.id, test_mode).await?;
            let since = now - Duration::seconds(self.settings.window.as_secs() as i64);
            let counts = store::counts(&self.db, &shop.id, test_mode, since).await?;
            let band = machine::band(&counts, &self.settings);
            let previous_band = previous.as_ref().map(|p| p.band);
            let row = self.row(
                shop,
                test_mode,
                trigger,
                previous.as_ref(),
                band,
                counts,
                now,
            );
            let change = store::record(&row, machine::escalated(previous_band, band));
            Ok::<_, CommitError>(
                or_retry(commit::commit(&self.db, change).await)?.map(|c| (row, c.deliveries)),
            )
        })
        .await?;
        if deliveries > 0 {
            self.wake.now();
        }
        Ok(row)
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        shop: &profile::Model,
        test_mode: bool,
        trigger: Trigger,
        previous: Option<&risk_assessment::Model>,
        band: Band,
        counts: machine::Counts,
        now: DateTime<chrono::Utc>,
    ) -> risk_assessment::Model {
        let s = &self.settings;
        let thresholds = Thresholds {
            elevated: s.elevated,
            high: s.high,
            critical: s.critical,
            min_payments: s.min_payments,
        };
        risk_assessment::Model {
            id: crate::ids::RiskAssessmentId::new(),
            merchant_id: shop.merchant_id.clone(),
            profile_id: shop.id.clone(),
            test_mode,
            seq: previous.map_or(1, |p| p.seq + 1),
            band,
            previous_band: previous.map(|p| p.band),
            payments: counts.payments,
            declines: counts.declines,
            refunds: counts.refunds,
            disputes: counts.disputes,
            window_secs: s.window.as_secs() as i64,
            thresholds: Json(thresholds),
            trigger,
            assessed_at: now,
        }
    }

    /// Registers the scheduled run ([`store::ASSESS_JOB`]): every shop, in each mode it has
    /// used, every `risk.assess_every`.
    pub fn register(self: &Arc<Self>, scheduler: &mut Scheduler) {
        let every = Duration::seconds(self.settings.assess_every.as_secs() as i64);
        let assessor = self.clone();
        scheduler.register_periodic(store::ASSESS_JOB, every, move |_| {
            let assessor = assessor.clone();
            async move { assessor.assess_all().await }
        });
    }

    /// Assesses every shop in use, page by page; a shop whose assessment fails is logged and
    /// the others go on.
    async fn assess_all(&self) -> Result<(), sea_orm::DbErr> {
        let mut after: Option<String> = None;
        loop {
            let shops = store::shops_after(&self.db, after.as_deref(), PAGE).await?;
            for shop in &shops {
                for test_mode in [true, false] {
                    let result = match store::in_use(&self.db, &shop.id, test_mode).await {
                        Ok(false) => continue,
                        Ok(true) => self.assess(shop, test_mode, Trigger::Schedule).await,
                        Err(e) => Err(e.into()),
                    };
                    if let Err(e) = result {
                        tracing::warn!(shop = %shop.id, test_mode, error = %e, "risk assessment failed");
                    }
                }
            }
            match shops.last() {
                Some(last) if shops.len() as u64 == PAGE => after = Some(last.id.to_string()),
                _ => return Ok(()),
            }
        }
    }
}
