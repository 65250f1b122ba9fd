//! Secrets at rest: webhook signing secrets and remote processors' credentials are stored
//! sealed under the master key (the tables are read directly), deliveries still verify with
//! the secret the merchant was shown, and a master-key rotation (`payd admin
//! rotate-master-key` runs `sealed::reseal`) keeps both working under the new key.

use crate::common;

use std::sync::Arc;

use common::{card, receiver::Receiver, sim, spawn_with, Merchant, TestApp, TestDb};
use payd::sealed::{reseal, Keyring};
use payd_entity::{processor_account, webhook_endpoint};
use sea_orm::EntityTrait;
use serde_json::json;
use standardwebhooks::Webhook;

/// Two master keys, 32 bytes each, base64.
const FIRST: &str = "Zmlyc3QtbWFzdGVyLWtleS1mb3ItcGF5ZC10ZXN0cyE=";
const SECOND: &str = "c2Vjb25kLW1hc3Rlci1rZXktZm9yLXBheWQtdGVzdHM=";

async fn stored(db: &TestDb) -> (Vec<webhook_endpoint::Model>, Vec<processor_account::Model>) {
    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    (
        webhook_endpoint::Entity::find().all(&conn).await.unwrap(),
        processor_account::Entity::find().all(&conn).await.unwrap(),
    )
}

/// A payment (through the shop's remote processor, if it has one); the delivery of its event,
/// verified with the endpoint's secret.
async fn pay_and_verify(app: &TestApp, m: &Merchant, receiver: &Receiver, secret: &str) {
    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")});
    let p = app.create_payment(m, body).await.body;
    assert_eq!(
        p["status"], "succeeded",
        "the processor's credentials opened: {p}"
    );
    let got = receiver.wait_for(1).await;
    Webhook::new(secret)
        .unwrap()
        .verify(&got[0].body, &got[0].headers)
        .expect("signed with the endpoint's secret");
}

#[actix_web::test]
async fn stored_secrets_are_sealed_and_keep_working_across_a_master_key_rotation() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db.clone(), &[("PAYD_SECURITY__MASTER_KEY", FIRST)]).await;
    let m = app.create_merchant("Acme").await;
    let (_sim, sim_url) = sim::start_sim().await;
    sim::add_remote(&app, &m, &sim_url, 2_000).await;
    let receiver = Receiver::start().await;
    let secret = app.set_webhook(&m, &receiver.url).await;
    assert!(secret.starts_with("whsec_"));

    let (endpoints, accounts) = stored(&db).await;
    let first = Keyring::new(Some(FIRST), "").unwrap();
    assert!(
        endpoints[0].secret.starts_with("sealed:v1:"),
        "{}",
        endpoints[0].secret
    );
    assert!(!endpoints[0].secret.contains(&secret[6..]));
    let config = accounts[0].config.as_deref().unwrap();
    assert!(
        config.starts_with("sealed:v1:") && !config.contains(sim::SECRET),
        "{config}"
    );
    assert_eq!(first.open(&endpoints[0].secret).unwrap(), secret);
    pay_and_verify(&app, &m, &receiver, &secret).await;

    // The operator rotates: every row sealed again under the second key.
    let rotated = first.rotated_to(SECOND).unwrap();
    let conn = payd::commit::Db::connect(&common::settings(&db, &[]).database)
        .await
        .unwrap();
    assert_eq!(reseal(&conn, &rotated).await.unwrap(), 2);
    assert_eq!(
        reseal(&conn, &rotated).await.unwrap(),
        0,
        "nothing left to seal"
    );
    let (endpoints, accounts) = stored(&db).await;
    assert!(rotated.is_current(&endpoints[0].secret));
    assert!(rotated.is_current(accounts[0].config.as_deref().unwrap()));

    let app = spawn_with(db.clone(), &[("PAYD_SECURITY__MASTER_KEY", SECOND)]).await;
    let receiver = Receiver::start().await;
    app.set_webhook(&m, &receiver.url).await;
    pay_and_verify(&app, &m, &receiver, &secret).await;
}

/// Rows stored before sealing existed are sealed at start-up, and still open.
#[actix_web::test]
async fn secrets_stored_in_plain_text_are_sealed_at_start_up() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db.clone(), &[("PAYD_SECURITY__MASTER_KEY", FIRST)]).await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    let secret = app.set_webhook(&m, &receiver.url).await;
    // As an older payd stored it.
    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    webhook_endpoint::Entity::update_many()
        .col_expr(
            webhook_endpoint::Column::Secret,
            sea_orm::sea_query::Expr::value(secret.clone()),
        )
        .exec(&conn)
        .await
        .unwrap();

    let app = spawn_with(db.clone(), &[("PAYD_SECURITY__MASTER_KEY", SECOND)]).await;
    let (endpoints, _) = stored(&db).await;
    assert!(Keyring::new(Some(SECOND), "")
        .unwrap()
        .is_current(&endpoints[0].secret));
    pay_and_verify(&app, &m, &receiver, &secret).await;
}
