//! payd's schema, as SeaORM migrations applied in order at start-up.
//!
//! Migrations use only portable column types so the same history runs on SQLite and
//! PostgreSQL. The root crate runs them under a PostgreSQL advisory lock, so several
//! instances may start at once against one database.
//!
//! Every migration from [`POLICY_STARTS_AT`] on says in [`OLDER_RELEASES`] whether the
//! release before it runs beside it (an expand step) or must refuse to (a contract step);
//! payd records that in `schema_compatibility` when it applies them (docs/upgrading.md).

pub use sea_orm_migration::prelude::*;

mod m20261122_000001_create_accounts;
mod m20261122_000002_create_idempotency_keys;
mod m20261122_000003_create_scheduled_jobs;
mod m20261122_000004_create_payments;
mod m20261122_000005_create_events;
mod m20261122_000006_create_refunds;
mod m20261122_000007_create_customers;
mod m20261122_000008_add_processor_config;
mod m20261122_000009_create_disputes;
mod m20261124_000010_scope_idempotency_keys;
mod m20261124_000011_create_file_chunks;
mod m20261124_000012_add_processor_approval;
mod m20261124_000013_add_payment_intent;
mod m20261124_000014_create_audit_log;
mod m20261124_000015_add_idempotency_recovery_point;
mod m20261124_000016_create_readiness_probe;
mod m20261124_000017_create_wallet_cases;
mod m20261124_000018_create_catalog;
mod m20261124_000019_create_subscriptions;
mod m20261124_000020_add_sandbox_clocks;
mod m20261124_000021_create_billing_processor;
mod m20261124_000022_add_subscription_term;
mod m20261124_000023_create_invoices;
mod m20261124_000024_create_ledger_and_payouts;
mod m20261124_000025_create_risk_assessments;
mod m20261125_000026_add_webhook_operations;
mod m20261127_000027_add_subscription_billing_anchor;
mod m20261127_000028_add_payment_processor_reference_index;
mod m20261128_000029_create_lookup_generation;
mod m20261128_000030_add_shop_branding;
mod m20261128_000031_add_payment_locale;
mod m20261128_000032_add_delivery_merchant_due_index;
mod m20261206_000033_split_shop_config_by_mode;
mod m20261206_000034_add_processor_events_read_until;
mod m20261206_000035_create_balance_deltas;
mod m20261206_000036_create_schema_compatibility;
mod m20261207_000037_add_merchant_suspension_and_key_pepper;
mod m20261207_000038_add_shop_embed_origins;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_create_accounts::Migration),
            Box::new(m20261122_000002_create_idempotency_keys::Migration),
            Box::new(m20261122_000003_create_scheduled_jobs::Migration),
            Box::new(m20261122_000004_create_payments::Migration),
            Box::new(m20261122_000005_create_events::Migration),
            Box::new(m20261122_000006_create_refunds::Migration),
            Box::new(m20261122_000007_create_customers::Migration),
            Box::new(m20261122_000008_add_processor_config::Migration),
            Box::new(m20261122_000009_create_disputes::Migration),
            Box::new(m20261124_000010_scope_idempotency_keys::Migration),
            Box::new(m20261124_000011_create_file_chunks::Migration),
            Box::new(m20261124_000012_add_processor_approval::Migration),
            Box::new(m20261124_000013_add_payment_intent::Migration),
            Box::new(m20261124_000014_create_audit_log::Migration),
            Box::new(m20261124_000015_add_idempotency_recovery_point::Migration),
            Box::new(m20261124_000016_create_readiness_probe::Migration),
            Box::new(m20261124_000017_create_wallet_cases::Migration),
            Box::new(m20261124_000018_create_catalog::Migration),
            Box::new(m20261124_000019_create_subscriptions::Migration),
            Box::new(m20261124_000020_add_sandbox_clocks::Migration),
            Box::new(m20261124_000021_create_billing_processor::Migration),
            Box::new(m20261124_000022_add_subscription_term::Migration),
            Box::new(m20261124_000023_create_invoices::Migration),
            Box::new(m20261124_000024_create_ledger_and_payouts::Migration),
            Box::new(m20261124_000025_create_risk_assessments::Migration),
            Box::new(m20261125_000026_add_webhook_operations::Migration),
            Box::new(m20261127_000027_add_subscription_billing_anchor::Migration),
            Box::new(m20261127_000028_add_payment_processor_reference_index::Migration),
            Box::new(m20261128_000029_create_lookup_generation::Migration),
            Box::new(m20261128_000030_add_shop_branding::Migration),
            Box::new(m20261128_000031_add_payment_locale::Migration),
            Box::new(m20261128_000032_add_delivery_merchant_due_index::Migration),
            Box::new(m20261206_000033_split_shop_config_by_mode::Migration),
            Box::new(m20261206_000034_add_processor_events_read_until::Migration),
            Box::new(m20261206_000035_create_balance_deltas::Migration),
            Box::new(m20261206_000036_create_schema_compatibility::Migration),
            Box::new(m20261207_000037_add_merchant_suspension_and_key_pepper::Migration),
            Box::new(m20261207_000038_add_shop_embed_origins::Migration),
        ]
    }
}

/// What a payd release that does not know a migration does on a database it was applied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Older {
    /// An expand step (a new table, index, or a column that is nullable or has a default):
    /// the release before it runs beside it unchanged.
    Runs,
    /// A contract step, and what the release before it would get wrong beside it.
    Refuses(&'static str),
}

impl Older {
    /// The word `schema_compatibility.older_releases` stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Older::Runs => "runs",
            Older::Refuses(_) => "refuses",
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Older::Runs => "an expand step: older releases run beside it",
            Older::Refuses(why) => why,
        }
    }
}

/// The first migration the compatibility policy covers: releases before it do not read
/// `schema_compatibility` (they refuse every migration they do not know).
pub const POLICY_STARTS_AT: &str = "m20261206_000036_create_schema_compatibility";

/// Each migration from [`POLICY_STARTS_AT`] on, with what an older release does beside it.
/// A migration missing here fails `every_migration_says_what_older_releases_do`.
pub const OLDER_RELEASES: &[(&str, Older)] = &[
    ("m20261206_000036_create_schema_compatibility", Older::Runs),
    (
        "m20261207_000037_add_merchant_suspension_and_key_pepper",
        Older::Runs,
    ),
    ("m20261207_000038_add_shop_embed_origins", Older::Runs),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_says_what_older_releases_do() {
        let names: Vec<String> = Migrator::migrations()
            .iter()
            .map(|m| m.name().to_owned())
            .collect();
        let start = names
            .iter()
            .position(|n| n == POLICY_STARTS_AT)
            .expect("the policy's first migration is a migration");
        for name in &names[start..] {
            let said = OLDER_RELEASES.iter().filter(|(n, _)| n == name).count();
            assert_eq!(
                said, 1,
                "{name}: say once in OLDER_RELEASES whether older releases run beside it"
            );
        }
        for (name, _) in OLDER_RELEASES {
            assert!(
                names[start..].iter().any(|n| n == name),
                "{name} in OLDER_RELEASES is not a migration of the policy"
            );
        }
    }
}
