//! The sandbox's demo merchant: created on the first start of a sandbox deployment, its keys
//! shown once and kept in `<data_dir>/demo-keys.json`.

use serde::Serialize;

use super::store;
use crate::{
    auth::keys::{KeyKind, Mode},
    clock::SharedClock,
    commit::Db,
    settings::Settings,
};

/// The keys of the demo merchant, as written to `demo-keys.json`.
#[derive(Serialize)]
struct DemoKeys<'a> {
    merchant_id: &'a str,
    profile_id: &'a str,
    /// Bound to the demo shop: shop-owned routes need no `x-profile-id` with it.
    shop_secret_key: &'a str,
    /// The merchant's unbound key: every shop, and creating shops and keys.
    secret_key: &'a str,
    publishable_key: &'a str,
}

/// Where the demo keys are, and the line that puts the shop's key in the shell: on every
/// sandbox start, so nobody needs a JSON tool to make a first request.
pub fn show_demo_keys(data_dir: &str) {
    let path = std::path::Path::new(data_dir).join("demo-keys.json");
    let key = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|keys| keys["shop_secret_key"].as_str().map(str::to_owned));
    match key {
        Some(key) => println!(
            "payd: the demo shop's keys are in {}; for a first request:\n  export KEY={key}",
            path.display()
        ),
        None => println!(
            "payd: no demo keys in {} (the file is gone, or from an older release): create a \
             merchant with `payd admin create-merchant --name Demo`, or a key with \
             POST /account/api-keys",
            path.display()
        ),
    }
}

/// On the first start of a sandbox deployment, creates a demo merchant and shows its keys
/// once: on standard output and in `<data_dir>/demo-keys.json` (never in the logs).
pub async fn bootstrap_demo(
    db: &Db,
    clock: &SharedClock,
    settings: &Settings,
) -> anyhow::Result<()> {
    if store::any_merchant(db).await? {
        return Ok(());
    }
    let created = store::create_merchant(
        db,
        clock.now(),
        &settings.security.key_pepper,
        "Demo merchant",
        Mode::Test,
    )
    .await?;
    let (merchant_id, profile_id) = (
        crate::ids::MerchantId::parse(&created.merchant.id).unwrap_or_default(),
        crate::ids::ProfileId::parse(&created.profile.id).unwrap_or_default(),
    );
    let shop_key = store::NewKey {
        merchant_id: &merchant_id,
        kind: KeyKind::Secret,
        mode: Mode::Test,
        profile_id: Some(&profile_id),
        name: Some("Demo shop".to_owned()),
    };
    let (_, shop_secret_key) = store::insert_key(
        db,
        clock.now(),
        &settings.security.key_pepper,
        shop_key,
        None,
        None,
    )
    .await?;
    let keys = DemoKeys {
        merchant_id: &created.merchant.id,
        profile_id: &created.profile.id,
        shop_secret_key: &shop_secret_key,
        secret_key: &created.secret_key,
        publishable_key: &created.publishable_key,
    };
    let json = serde_json::to_string_pretty(&keys)?;
    let dir = std::path::Path::new(&settings.sandbox.data_dir);
    std::fs::create_dir_all(dir)?;
    let path = dir.join("demo-keys.json");
    std::fs::write(&path, format!("{json}\n"))?;
    println!(
        "payd: created a demo merchant; its keys (also in {}):\n{json}",
        path.display()
    );
    Ok(())
}
