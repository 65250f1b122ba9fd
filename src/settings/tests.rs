//! The settings' layers and checks.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_load() {
    let s = Settings::load_from(vec![]).unwrap();
    assert_eq!(s.mode, DeploymentMode::Sandbox);
    assert_eq!(s.listen, "127.0.0.1:8080");
    assert!(s.is_sqlite());
    assert!(s.admin_key.is_none());
}

#[test]
fn shortcuts_and_sections_override() {
    let s = Settings::load_from(vars(&[
        ("PAYD_LISTEN", "127.0.0.1:9999"),
        ("DATABASE_URL", "postgres://x@localhost/db"),
        ("PAYD_ADMIN_KEY", "an-admin-key"),
        ("PAYD_ACTORS__IDLE_TIMEOUT_SECS", "7"),
        ("PAYD_BROWSER_TESTS", "1"),
    ]))
    .unwrap();
    assert_eq!(s.listen, "127.0.0.1:9999");
    assert_eq!(s.database.url, "postgres://x@localhost/db");
    assert_eq!(s.admin_key.as_deref(), Some("an-admin-key"));
    assert_eq!(s.actors.idle_timeout_secs, 7);
    assert_eq!(
        s.webhooks.auth_retry_schedule,
        vec![60, 120, 240, 480, 600, 960]
    );
    let s = Settings::load_from(vars(&[
        ("PAYD_WEBHOOKS__AUTH_RETRY_SCHEDULE", "1,1,1"),
        ("PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE", "7"),
    ]))
    .unwrap();
    assert_eq!(s.webhooks.auth_retry_schedule, vec![1, 1, 1]);
    assert_eq!(s.webhooks.transient_retry_schedule, vec![7]);
    let err = Settings::load_from(vars(&[("PAYD_WEBHOOKS__AUTH_RETRY_SCHEDULE", "1,soon")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("auth_retry_schedule"), "{err}");
    let s = Settings::load_from(vars(&[
        ("DATABASE_URL", "postgres://ignored/db"),
        ("PAYD_DATABASE_URL", "sqlite::memory:"),
    ]))
    .unwrap();
    assert_eq!(s.database.url, "sqlite::memory:");
}

#[test]
fn invalid_settings_name_the_key() {
    let err = Settings::load_from(vars(&[("PAYD_ACTORS__IDLE_TIMEOUT_SECS", "soon")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("idle_timeout_secs"), "{err}");
    let err = Settings::load_from(vars(&[("PAYD_ACTORS__MAILBOX", "3")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mailbox"), "{err}");
    let err = Settings::load_from(vars(&[("PAYD_DATABSE__URL", "sqlite::memory:")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("databse"),
        "an unknown section is named: {err}"
    );
    let err = Settings::load_from(vars(&[("PAYD_LISTEN", "nowhere")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("listen"), "{err}");
    for operator in ["nowhere", "127.0.0.1:8080"] {
        let err = Settings::load_from(vars(&[
            ("PAYD_LISTEN", "127.0.0.1:8080"),
            ("PAYD_HTTP__OPERATOR_LISTEN", operator),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("http.operator_listen"), "{operator}: {err}");
    }
    let err = Settings::load_from(vars(&[("PAYD_MODE", "production")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("key_pepper"), "{err}");
    let production = [
        ("PAYD_MODE", "production"),
        ("PAYD_SECURITY__KEY_PEPPER", "a-production-pepper-for-tests"),
    ];
    let err = Settings::load_from(vars(&production))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`security.master_key`"), "{err}");
    let key = (
        "PAYD_SECURITY__MASTER_KEY",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    );
    let err = Settings::load_from(vars(&[production[0], production[1], key]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`http.public_url`"), "{err}");
    for (url, ok) in [
        ("https://pay.example.com", true),
        ("http://pay.example.com", false),
        ("pay.example.com", false),
        ("", false),
    ] {
        let public_url = ("PAYD_HTTP__PUBLIC_URL", url);
        let loaded = Settings::load_from(vars(&[production[0], production[1], key, public_url]));
        assert_eq!(loaded.is_ok(), ok, "{url}");
    }
    let short = ("PAYD_SECURITY__MASTER_KEY", "c2hvcnQ=");
    let err = Settings::load_from(vars(&[short])).unwrap_err().to_string();
    assert!(
        err.contains("`security.master_key`: expected 32 bytes"),
        "{err}"
    );
    let err = Settings::load_from(vars(&[("PAYD_MODE", "staging")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mode"), "{err}");
}

/// Production with only the settings it requires: every guard the sandbox leaves off is
/// on, and nothing is warned about; each one an operator turns off stays off, and is
/// warned about by name.
#[test]
fn production_turns_every_guard_on_unless_the_operator_turns_one_off() {
    let required = [
        ("PAYD_MODE", "production"),
        ("PAYD_SECURITY__KEY_PEPPER", "a-production-pepper-for-tests"),
        (
            "PAYD_SECURITY__MASTER_KEY",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ),
        ("PAYD_HTTP__PUBLIC_URL", "https://pay.example.com"),
    ];
    let s = Settings::load_from(vars(&required)).unwrap();
    assert!(!s.webhooks.allow_private_urls);
    assert!(!s.processors.allow_private_urls);
    assert!(s.processors.require_operator_approval);
    assert_eq!(s.production_warnings(), Vec::<String>::new());
    // Not a guard, but production's default too: logs a collector parses.
    assert_eq!(s.log.format, LogFormat::Json);
    let sandbox = Settings::load_from(vars(&[])).unwrap();
    assert!(sandbox.webhooks.allow_private_urls && sandbox.production_warnings().is_empty());
    assert_eq!(sandbox.log.format, LogFormat::Pretty);
    for (var, value, named) in [
        (
            "PAYD_WEBHOOKS__ALLOW_PRIVATE_URLS",
            "true",
            "webhooks.allow_private_urls",
        ),
        (
            "PAYD_PROCESSORS__ALLOW_PRIVATE_URLS",
            "true",
            "processors.allow_private_urls",
        ),
        (
            "PAYD_PROCESSORS__REQUIRE_OPERATOR_APPROVAL",
            "false",
            "processors.require_operator_approval",
        ),
    ] {
        let mut asked = required.to_vec();
        asked.push((var, value));
        let warnings = Settings::load_from(vars(&asked))
            .unwrap()
            .production_warnings();
        assert_eq!(warnings.len(), 1, "{var}: {warnings:?}");
        assert!(warnings[0].starts_with(named), "{warnings:?}");
    }
}

#[test]
fn stripe_js_loads_only_from_stripe_or_a_loopback_stand_in() {
    let load = |url: &str| Settings::load_from(vars(&[("PAYD_PROCESSORS__STRIPE_JS_URL", url)]));
    assert_eq!(
        load("https://js.stripe.com/v3/")
            .unwrap()
            .processors
            .stripe_js_url,
        STRIPE_JS_URL
    );
    assert_eq!(
        stripe_js_origin("http://127.0.0.1:8420/js.stripe.com/v3/").as_deref(),
        Some("http://127.0.0.1:8420")
    );
    assert!(load("http://[::1]:9/js.stripe.com/v3/").is_ok());
    for refused in [
        "https://js.stripe.com.evil.example/v3/",
        "https://cdn.example.com/stripe.js",
        "http://127.0.0.1@evil.example/v3/",
        "javascript:alert(1)",
    ] {
        let e = load(refused).unwrap_err().to_string();
        assert!(e.contains("processors.stripe_js_url"), "{refused}: {e}");
    }
}
