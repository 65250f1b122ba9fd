//! Migrations that move existing rows: each test writes rows as the schema before the
//! migration held them (plain SQL: the entities describe the schema after it), runs the
//! migration, and reads where the rows went.

use crate::common;

use common::TestDb;
use payd_entity::{
    balance_delta, balance_lock, invoice_setting, processor_account, routing_config, tax_rule,
    webhook_endpoint,
};
use payd_migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, EntityTrait, QueryOrder, QuerySelect};

/// Migration 33 (test and live are two worlds) takes existing shop configuration to the mode
/// that configured it where that is recorded, and to both modes where it is not.
#[actix_web::test]
async fn shop_configuration_goes_to_the_mode_that_configured_it() {
    let db = TestDb::new().await;
    // A pool of several connections, as `payd migrate` may have: the migration runs on one.
    let conn = payd::db::connect(&db.url, Some(3)).await.unwrap();
    Migrator::up(&conn, Some(32)).await.unwrap();
    let t = "'2026-12-01T00:00:00Z'";
    // Merchant L has a live and a test key; merchant S only test keys.
    let rows = [
        format!("INSERT INTO merchants (id, name, created_at, sandbox_clock_offset) VALUES ('mer_l', 'L', {t}, 0), ('mer_s', 'S', {t}, 0)"),
        format!("INSERT INTO profiles (id, merchant_id, name, created_at) VALUES ('prof_l', 'mer_l', 'L', {t}), ('prof_s', 'mer_s', 'S', {t})"),
        format!("INSERT INTO api_keys (id, merchant_id, kind, mode, key_hash, last4, created_at) VALUES \
            ('key_live', 'mer_l', 'secret', 'live', 'h1', '0001', {t}), \
            ('key_test', 'mer_l', 'secret', 'test', 'h2', '0002', {t}), \
            ('key_s', 'mer_s', 'secret', 'test', 'h3', '0003', {t})"),
        // L: a sandbox account, a remote one its live key added, a Stripe one its test key
        // added, and a remote one without an audit entry (live: L has a live key). S: a remote
        // one without an audit entry (test: S has none).
        format!("INSERT INTO processor_accounts (id, merchant_id, profile_id, name, kind, enabled, approval, created_at) VALUES \
            ('proc_1', 'mer_l', 'prof_l', 'sb', 'sandbox', TRUE, 'approved', {t}), \
            ('proc_2', 'mer_l', 'prof_l', 'live-remote', 'remote', TRUE, 'approved', {t}), \
            ('proc_3', 'mer_l', 'prof_l', 'test-stripe', 'stripe', TRUE, 'approved', {t}), \
            ('proc_4', 'mer_l', 'prof_l', 'old-remote', 'remote', TRUE, 'approved', {t}), \
            ('proc_5', 'mer_s', 'prof_s', 'remote', 'remote', TRUE, 'approved', {t})"),
        format!("INSERT INTO audit_log (id, merchant_id, actor_key_id, action, target_id, details, created_at) VALUES \
            ('aud_1', 'mer_l', 'key_live', 'processor_account.added', 'proc_2', '{{}}', {t}), \
            ('aud_2', 'mer_l', 'key_test', 'processor_account.added', 'proc_3', '{{}}', {t})"),
        format!("INSERT INTO routing_configs (profile_id, rules, updated_at) VALUES ('prof_l', '{{\"rules\":[]}}', {t})"),
        format!("INSERT INTO webhook_endpoints (id, merchant_id, profile_id, url, secret, enabled, created_at, updated_at, test_mode) VALUES \
            ('whep_l', 'mer_l', 'prof_l', 'https://l.example/hooks', 'whsec_x', TRUE, {t}, {t}, FALSE), \
            ('whep_s', 'mer_s', 'prof_s', 'https://s.example/hooks', 'whsec_y', TRUE, {t}, {t}, TRUE)"),
        format!("INSERT INTO invoice_settings (merchant_id, profile_id, footer, updated_at) VALUES ('mer_l', '', 'thanks', {t})"),
        format!("INSERT INTO tax_rules (id, merchant_id, profile_id, position, rate_bps, country, inclusive, created_at) VALUES \
            ('tax_0123456789abcdef0123456789abcdef', 'mer_l', '', 0, 1900, 'DE', FALSE, {t}), \
            ('tax_fedcba9876543210fedcba9876543211', 'mer_s', 'prof_s', 0, 700, 'DE', FALSE, {t})"),
    ];
    for sql in rows {
        conn.execute_unprepared(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    payd::db::migrate(&db.url, &conn).await.unwrap();

    // Read as text: the fixture's ids are not of their kinds' shape.
    let accounts: Vec<(String, bool)> = processor_account::Entity::find()
        .select_only()
        .columns([
            processor_account::Column::Id,
            processor_account::Column::TestMode,
        ])
        .order_by_asc(processor_account::Column::Id)
        .into_tuple()
        .all(&conn)
        .await
        .unwrap();
    let expected = [
        ("proc_1", true),
        ("proc_2", false),
        ("proc_3", true),
        ("proc_4", false),
        ("proc_5", true),
    ];
    assert_eq!(
        accounts,
        expected.map(|(id, mode)| (id.to_owned(), mode)).to_vec()
    );

    let routing: Vec<(String, bool)> = routing_config::Entity::find()
        .order_by_asc(routing_config::Column::TestMode)
        .all(&conn)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.profile_id, r.test_mode))
        .collect();
    assert_eq!(routing, [("prof_l".into(), false), ("prof_l".into(), true)]);

    // Read as text: the fixture's ids are not of their kinds' shape.
    let endpoints: Vec<(String, String, bool)> = webhook_endpoint::Entity::find()
        .select_only()
        .columns([
            webhook_endpoint::Column::Id,
            webhook_endpoint::Column::ProfileId,
            webhook_endpoint::Column::TestMode,
        ])
        .order_by_asc(webhook_endpoint::Column::Id)
        .into_tuple()
        .all(&conn)
        .await
        .unwrap();
    assert_eq!(
        endpoints,
        [
            ("whep_l".into(), "prof_l".into(), false),
            ("whep_s".into(), "prof_s".into(), true)
        ]
    );
    // One endpoint per shop and mode: a second live endpoint of shop L is refused.
    let second = format!("INSERT INTO webhook_endpoints (id, merchant_id, profile_id, url, secret, enabled, created_at, updated_at, test_mode) VALUES ('whep_l2', 'mer_l', 'prof_l', 'https://l2.example/', 'whsec_z', TRUE, {t}, {t}, FALSE)");
    assert!(conn.execute_unprepared(&second).await.is_err());
    let test_one = second
        .replace("'whep_l2'", "'whep_l3'")
        .replace("FALSE)", "TRUE)");
    conn.execute_unprepared(&test_one).await.unwrap();

    let settings: Vec<(String, bool, Option<String>)> = invoice_setting::Entity::find()
        .order_by_asc(invoice_setting::Column::TestMode)
        .all(&conn)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.merchant_id, s.test_mode, s.footer))
        .collect();
    let footer = Some("thanks".to_owned());
    assert_eq!(
        settings,
        [
            ("mer_l".into(), false, footer.clone()),
            ("mer_l".into(), true, footer)
        ]
    );

    let mut rules: Vec<(String, String, bool, i64)> = tax_rule::Entity::find()
        .all(&conn)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.merchant_id, r.id, r.test_mode, r.rate_bps))
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            // L's rule stays live under its id, and has a test copy under an id of its own.
            (
                "mer_l".into(),
                "tax_0123456789abcdef0123456789abcdef".into(),
                false,
                1900
            ),
            (
                "mer_l".into(),
                "tax_fedcba9876543210fedcba9876543210".into(),
                true,
                1900
            ),
            // S has only test keys: its rule is a test rule.
            (
                "mer_s".into(),
                "tax_fedcba9876543210fedcba9876543211".into(),
                true,
                700
            ),
        ]
    );

    // Back to one configuration per shop (the live one where a shop has both; migrations 36,
    // 35 and 34, the schema's compatibility table, the balance deltas and the Stripe events'
    // mark on the accounts, go first), and forward again: the rows still go where they did.
    let one = payd::db::connect(&db.url, Some(1)).await.unwrap();
    let after_33 = Migrator::migrations().len() as u32 - 33;
    Migrator::down(&one, Some(after_33 + 1)).await.unwrap();
    let endpoints = "SELECT COUNT(*) FROM webhook_endpoints";
    let kept = one
        .query_one_raw(sea_orm::Statement::from_string(
            one.get_database_backend(),
            endpoints,
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<i64>(0)
        .unwrap();
    assert_eq!(kept, 2, "shop L's live endpoint and shop S's test one");
    Migrator::up(&one, None).await.unwrap();
    let modes: Vec<bool> = processor_account::Entity::find()
        .select_only()
        .column(processor_account::Column::TestMode)
        .into_tuple()
        .all(&one)
        .await
        .unwrap();
    assert_eq!(modes.iter().filter(|test| **test).count(), 3);
}

/// Migration 35 (the available balance as a running total) turns the entries written before it
/// into one delta per shop, mode and currency holding their available sum, and leaves the
/// lock rows' totals at 0: the first reservation after the upgrade folds what the shop had.
#[actix_web::test]
async fn the_entries_before_the_running_total_become_one_delta_per_account() {
    let db = TestDb::new().await;
    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    Migrator::up(&conn, Some(34)).await.unwrap();
    let t = "'2026-12-01T00:00:00Z'";
    let entries = [
        ("bt_1", "prof_a", true, "EUR", "available", 10_000),
        ("bt_2", "prof_a", true, "EUR", "available", -700),
        ("bt_3", "prof_a", true, "EUR", "pending", 700),
        ("bt_4", "prof_a", false, "EUR", "available", 5_000),
        ("bt_5", "prof_a", true, "USD", "available", 300),
        ("bt_6", "prof_b", true, "EUR", "available", -50),
    ];
    for (id, profile, test, currency, bucket, amount) in entries {
        let sql = format!(
            "INSERT INTO balance_transactions (id, merchant_id, profile_id, test_mode, currency, \
             bucket, amount, kind, source_id, created_at) VALUES ('{id}', 'mer_x', '{profile}', \
             {test}, '{currency}', '{bucket}', {amount}, 'capture', 'pay_x', {t})"
        );
        conn.execute_unprepared(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    conn.execute_unprepared(
        "INSERT INTO balance_locks (profile_id, test_mode, currency, reservations) \
         VALUES ('prof_a', TRUE, 'EUR', 1)",
    )
    .await
    .unwrap();
    payd::db::migrate(&db.url, &conn).await.unwrap();

    let mut deltas: Vec<(String, bool, String, i64)> = balance_delta::Entity::find()
        .all(&conn)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.profile_id, d.test_mode, d.currency, d.amount))
        .collect();
    deltas.sort();
    let expected = [
        ("prof_a", false, "EUR", 5_000),
        ("prof_a", true, "EUR", 9_300),
        ("prof_a", true, "USD", 300),
        ("prof_b", true, "EUR", -50),
    ];
    assert_eq!(
        deltas,
        expected
            .map(|(p, t, c, a)| (p.to_owned(), t, c.to_owned(), a))
            .to_vec()
    );
    let locks = balance_lock::Entity::find().all(&conn).await.unwrap();
    assert_eq!(
        locks
            .iter()
            .map(|l| (l.reservations, l.available))
            .collect::<Vec<_>>(),
        [(1, 0)]
    );
}

/// A newer release's migration, as that release would leave it: applied, and recorded with
/// what older releases do beside it (`None`: not recorded).
async fn newer_migration(
    conn: &sea_orm::DatabaseConnection,
    name: &str,
    older: Option<(&str, &str, &str)>,
) {
    let sql = format!("INSERT INTO seaql_migrations (version, applied_at) VALUES ('{name}', 0)");
    conn.execute_unprepared(&sql).await.unwrap();
    if let Some((older, reason, release)) = older {
        let sql = format!(
            "INSERT INTO schema_compatibility (migration, older_releases, reason, recorded_by) \
             VALUES ('{name}', '{older}', '{reason}', '{release}')"
        );
        conn.execute_unprepared(&sql).await.unwrap();
    }
}

/// docs/upgrading.md: a release runs on a database a newer one migrated when every newer
/// migration is recorded as one older releases run beside, and stops with its own message,
/// naming both schema versions, the refusing migrations and the doc, when one is not. A
/// refused start writes nothing.
#[actix_web::test]
async fn a_newer_schema_runs_when_its_migrations_say_so_and_stops_naming_them_when_not() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    payd::db::migrate(&db.url, &conn).await.unwrap();
    let newest_here = Migrator::migrations().last().unwrap().name().to_owned();

    // What this release recorded for its own migrations, for the releases before it.
    let recorded = conn
        .query_all_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            "SELECT migration, older_releases, recorded_by FROM schema_compatibility",
        ))
        .await
        .unwrap();
    let recorded: Vec<(String, String, String)> = recorded
        .iter()
        .map(|r| {
            (
                r.try_get("", "migration").unwrap(),
                r.try_get("", "older_releases").unwrap(),
                r.try_get("", "recorded_by").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        payd_migration::OLDER_RELEASES
            .iter()
            .map(|(m, o)| (
                m.to_string(),
                o.as_str().to_owned(),
                payd::schema::RELEASE.to_owned()
            ))
            .collect::<Vec<_>>()
    );

    // An expand step of a newer release: this one starts on it and takes payments.
    let expand = "m20991231_000100_add_future_column";
    newer_migration(
        &conn,
        expand,
        Some(("runs", "adds payments.future", "9.9.0")),
    )
    .await;
    payd::db::migrate(&db.url, &conn).await.unwrap();
    let app = common::spawn_with(db.clone(), &[]).await;
    let m = app.create_merchant("Older release").await;
    let paid = app.succeeded_payment(&m).await;
    assert_eq!(
        app.get(&format!("/payments/{paid}"), &m.secret_key)
            .await
            .body["status"],
        "succeeded"
    );
    app.stop().await;

    // A contract step: this release refuses, in its own words.
    let contract = "m20991231_000101_drop_old_column";
    newer_migration(
        &conn,
        contract,
        Some(("refuses", "drops payments.legacy", "9.9.1")),
    )
    .await;
    let refused = payd::db::migrate(&db.url, &conn)
        .await
        .unwrap_err()
        .to_string();
    for said in [
        "the database was migrated by a newer payd (9.9.1)",
        &format!("its newest migration is {contract}"),
        &format!(
            "this build's (payd {}) is {newest_here}",
            payd::schema::RELEASE
        ),
        &format!("{contract} (drops payments.legacy)"),
        "Run payd 9.9.1 or later",
        "docs/upgrading.md",
    ] {
        assert!(refused.contains(said), "{said:?} in {refused:?}");
    }
    assert!(!refused.contains(expand), "{refused}");
    assert!(
        !refused.contains("is missing"),
        "never the migration library's error: {refused}"
    );
    let built =
        payd::Application::build(common::settings(&db, &[]), payd::clock::ManualClock::new()).await;
    let err = built
        .err()
        .expect("a refused schema stops the start")
        .to_string();
    assert!(err.contains(contract), "{err}");

    // A newer migration nobody recorded is refused too.
    conn.execute_unprepared(&format!(
        "DELETE FROM schema_compatibility WHERE migration = '{contract}'"
    ))
    .await
    .unwrap();
    let refused = payd::db::migrate(&db.url, &conn)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!(
            "{contract} (not recorded in schema_compatibility)"
        )),
        "{refused}"
    );
    // Nothing was written: the newer migrations are as they were, this release's too.
    let applied = Migrator::get_migration_models(&conn).await.unwrap();
    assert_eq!(applied.len(), Migrator::migrations().len() + 2);
}
