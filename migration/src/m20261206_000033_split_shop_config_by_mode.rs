//! Test and live are two worlds: a shop's processor accounts, routing rules, webhook endpoint,
//! invoice settings and tax rules each belong to one mode (`test_mode`), as Stripe keeps them
//! apart. Existing rows go to the mode that configured them where that is recorded, and where
//! it is not, to both, so neither mode loses what it had:
//!
//! - a processor account: a sandbox one is test; another is the mode of the key that added it
//!   (its `processor_account.added` audit entry; `add_processor` took only a Stripe key of that
//!   mode), and without that entry, live if its merchant has a live key, else test;
//! - a webhook endpoint already kept the mode of the keys that last set it;
//! - routing rules and invoice settings (never audited) are copied into both modes;
//! - tax rules stay where they were for a merchant with only test keys (as test rules); a
//!   merchant with live keys keeps them as live rules and gets a copy, under new ids, as test
//!   rules.
//!
//! SQLite cannot change a primary key or drop a column's `UNIQUE` in place, so the three
//! tables keyed by shop are rebuilt (created anew, copied, the old dropped, the new renamed)
//! on both databases alike. Nothing references them by foreign key.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::ConnectionTrait};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// `TRUE` when the merchant of the row has a live key (`merchant` names its column).
fn has_live_key(merchant: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM api_keys k WHERE k.merchant_id = {merchant} AND k.mode = 'live')"
    )
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        accounts_up(manager).await?;
        routing_up(manager).await?;
        endpoints_up(manager).await?;
        invoice_settings_up(manager).await?;
        tax_rules_up(manager).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Back to one configuration per shop: the live one where there are two.
        let db = manager.get_connection();
        for table in ["routing_configs", "invoice_settings", "webhook_endpoints"] {
            db.execute_unprepared(&format!(
                "DELETE FROM {table} WHERE test_mode = TRUE AND EXISTS (SELECT 1 FROM {table} o \
                 WHERE o.test_mode = FALSE AND {})",
                same_owner(table)
            ))
            .await?;
        }
        db.execute_unprepared("DELETE FROM tax_rules WHERE test_mode = TRUE AND EXISTS (SELECT 1 FROM tax_rules o WHERE o.test_mode = FALSE AND o.merchant_id = tax_rules.merchant_id)").await?;
        rebuild(
            manager,
            "routing_configs",
            routing_table(false),
            "profile_id, rules, updated_at",
        )
        .await?;
        rebuild(
            manager,
            "webhook_endpoints",
            endpoints_table(false),
            ENDPOINT_COLUMNS,
        )
        .await?;
        rebuild(
            manager,
            "invoice_settings",
            invoice_settings_table(false),
            INVOICE_SETTINGS_COLUMNS,
        )
        .await?;
        for table in [Alias::new("processor_accounts"), Alias::new("tax_rules")] {
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .drop_column(Alias::new("test_mode"))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

/// The condition that a row `o` has the same owner as a row of `table` (for `down`).
fn same_owner(table: &str) -> String {
    match table {
        "invoice_settings" => {
            format!("o.merchant_id = {table}.merchant_id AND o.profile_id = {table}.profile_id")
        }
        _ => format!("o.profile_id = {table}.profile_id"),
    }
}

async fn add_test_mode(manager: &SchemaManager<'_>, table: &str) -> Result<(), DbErr> {
    manager
        .alter_table(
            Table::alter()
                .table(Alias::new(table))
                .add_column(boolean(Alias::new("test_mode")).default(false))
                .to_owned(),
        )
        .await
}

async fn accounts_up(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    add_test_mode(manager, "processor_accounts").await?;
    let sql = format!(
        "UPDATE processor_accounts SET test_mode = CASE WHEN kind = 'sandbox' THEN TRUE ELSE \
         COALESCE((SELECT k.mode = 'test' FROM audit_log a JOIN api_keys k ON k.id = a.actor_key_id \
         WHERE a.target_id = processor_accounts.id AND a.action = 'processor_account.added' LIMIT 1), \
         NOT {}) END",
        has_live_key("processor_accounts.merchant_id")
    );
    manager.get_connection().execute_unprepared(&sql).await?;
    Ok(())
}

/// Creates `new` (table `name` as it is to be) under a temporary name, fills it with the rows
/// each of `copies` selects into its `columns`, drops the old table and gives the new its name.
async fn rebuild_with(
    manager: &SchemaManager<'_>,
    name: &str,
    mut new: TableCreateStatement,
    columns: &str,
    copies: &[String],
) -> Result<(), DbErr> {
    let temporary = format!("{name}_by_mode");
    manager
        .create_table(new.table(Alias::new(&temporary)).to_owned())
        .await?;
    let db = manager.get_connection();
    for select in copies {
        db.execute_unprepared(&format!("INSERT INTO {temporary} ({columns}) {select}"))
            .await?;
    }
    manager
        .drop_table(Table::drop().table(Alias::new(name)).to_owned())
        .await?;
    manager
        .rename_table(
            Table::rename()
                .table(Alias::new(&temporary), Alias::new(name))
                .to_owned(),
        )
        .await
}

/// [`rebuild_with`] copying the rows as they are.
async fn rebuild(
    manager: &SchemaManager<'_>,
    name: &str,
    new: TableCreateStatement,
    columns: &str,
) -> Result<(), DbErr> {
    let copy = format!("SELECT {columns} FROM {name}");
    rebuild_with(manager, name, new, columns, &[copy]).await
}

fn routing_table(by_mode: bool) -> TableCreateStatement {
    let mut t = Table::create();
    t.col(string(Alias::new("profile_id")))
        .col(text(Alias::new("rules")))
        .col(timestamp_with_time_zone(Alias::new("updated_at")));
    if by_mode {
        t.col(boolean(Alias::new("test_mode"))).primary_key(
            Index::create()
                .col(Alias::new("profile_id"))
                .col(Alias::new("test_mode")),
        );
    } else {
        t.primary_key(Index::create().col(Alias::new("profile_id")));
    }
    t.to_owned()
}

/// [`rebuild_with`] copying every row into both modes (`columns` without `test_mode`).
async fn rebuild_into_both_modes(
    manager: &SchemaManager<'_>,
    name: &str,
    new: TableCreateStatement,
    columns: &str,
) -> Result<(), DbErr> {
    let copies = ["TRUE", "FALSE"].map(|mode| format!("SELECT {columns}, {mode} FROM {name}"));
    let columns = format!("{columns}, test_mode");
    rebuild_with(manager, name, new, &columns, &copies).await
}

async fn routing_up(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    let columns = "profile_id, rules, updated_at";
    rebuild_into_both_modes(manager, "routing_configs", routing_table(true), columns).await
}

const ENDPOINT_COLUMNS: &str = "id, merchant_id, profile_id, url, secret, previous_secret, \
    previous_secret_expires_at, enabled, created_at, updated_at, consecutive_failures, \
    failing_since, last_success_at, disabled_reason, max_per_second, next_send_at, test_mode";

fn endpoints_table(by_mode: bool) -> TableCreateStatement {
    let c = Alias::new;
    let mut t = Table::create();
    t.col(string(c("id")).primary_key())
        .col(string(c("merchant_id")))
        .col(text(c("url")))
        .col(string(c("secret")))
        .col(string_null(c("previous_secret")))
        .col(timestamp_with_time_zone_null(c(
            "previous_secret_expires_at",
        )))
        .col(boolean(c("enabled")))
        .col(timestamp_with_time_zone(c("created_at")))
        .col(timestamp_with_time_zone(c("updated_at")))
        .col(integer(c("consecutive_failures")).default(0))
        .col(timestamp_with_time_zone_null(c("failing_since")))
        .col(timestamp_with_time_zone_null(c("last_success_at")))
        .col(string_null(c("disabled_reason")))
        .col(integer_null(c("max_per_second")))
        .col(timestamp_with_time_zone_null(c("next_send_at")))
        .col(boolean(c("test_mode")).default(false));
    if by_mode {
        // One endpoint per shop and mode.
        t.col(string(c("profile_id"))).index(
            Index::create()
                .unique()
                .name("idx_webhook_endpoints_shop_mode")
                .col(c("profile_id"))
                .col(c("test_mode")),
        );
    } else {
        t.col(string_uniq(c("profile_id")));
    }
    t.to_owned()
}

async fn endpoints_up(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    rebuild(
        manager,
        "webhook_endpoints",
        endpoints_table(true),
        ENDPOINT_COLUMNS,
    )
    .await
}

const INVOICE_SETTINGS_COLUMNS: &str = "merchant_id, profile_id, number_prefix, \
    credit_note_prefix, seller, footer, payment_terms_days, locale, updated_at";

fn invoice_settings_table(by_mode: bool) -> TableCreateStatement {
    let c = Alias::new;
    let mut t = Table::create();
    t.col(string(c("merchant_id")))
        .col(string(c("profile_id")))
        .col(string_null(c("number_prefix")))
        .col(string_null(c("credit_note_prefix")))
        .col(text_null(c("seller")))
        .col(text_null(c("footer")))
        .col(big_integer_null(c("payment_terms_days")))
        .col(string_null(c("locale")))
        .col(timestamp_with_time_zone(c("updated_at")));
    let mut key = Index::create();
    key.col(c("merchant_id")).col(c("profile_id"));
    if by_mode {
        t.col(boolean(c("test_mode")));
        key.col(c("test_mode"));
    }
    t.primary_key(&mut key).to_owned()
}

async fn invoice_settings_up(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    let table = invoice_settings_table(true);
    rebuild_into_both_modes(manager, "invoice_settings", table, INVOICE_SETTINGS_COLUMNS).await
}

async fn tax_rules_up(manager: &SchemaManager<'_>) -> Result<(), DbErr> {
    add_test_mode(manager, "tax_rules").await?;
    let db = manager.get_connection();
    let live = has_live_key("tax_rules.merchant_id");
    db.execute_unprepared(&format!(
        "UPDATE tax_rules SET test_mode = TRUE WHERE NOT {live}"
    ))
    .await?;
    // The live merchants' test copies: the same rule under an id of its own (`tax_` and 32 hex
    // digits, like every id; the copy's is the original's with its hex digits reversed, unique
    // since the originals' are, and telling nothing new).
    let reversed = match manager.get_database_backend() {
        sea_orm_migration::sea_orm::DatabaseBackend::Postgres => {
            "'tax_' || reverse(substr(id, 5))".to_owned()
        }
        _ => reverse_sqlite("substr(id, 5)", 32),
    };
    let columns = "merchant_id, profile_id, position, rate_bps, country, region, tax_category, \
        inclusive, valid_from, valid_until, created_at";
    db.execute_unprepared(&format!(
        "INSERT INTO tax_rules (id, {columns}, test_mode) SELECT {reversed}, {columns}, TRUE \
         FROM tax_rules WHERE test_mode = FALSE AND {live}"
    ))
    .await?;
    Ok(())
}

/// SQLite has no `reverse()`: the expression that reverses the `len` characters of `expr`.
fn reverse_sqlite(expr: &str, len: usize) -> String {
    let chars: Vec<String> = (1..=len)
        .rev()
        .map(|i| format!("substr({expr}, {i}, 1)"))
        .collect();
    format!("'tax_' || {}", chars.join(" || "))
}
