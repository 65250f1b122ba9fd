//! The checks every setting passes before payd starts: each section's, and production's
//! stricter ones (its own pepper and master key, an `https://` public URL, no test faults).
//! The first refused key is the error, naming the key.

use std::str::FromStr;

use super::{split_list, DeploymentMode, RiskThresholds, Settings, SettingsError, SANDBOX_PEPPER};

impl Settings {
    /// Every section's checks; the first refused key is the error.
    pub(super) fn validate(&self) -> Result<(), SettingsError> {
        self.validate_listen_and_database()?;
        self.validate_security()?;
        self.validate_public_url()?;
        self.validate_limits()?;
        self.validate_runtime()?;
        self.validate_webhooks()?;
        self.validate_risk()?;
        self.validate_stripe_js()?;
        if tracing_subscriber::EnvFilter::try_new(&self.log.filter).is_err() {
            return bad("log.filter", "not a valid tracing filter");
        }
        Ok(())
    }

    /// `processors.stripe_js_url`: Stripe's own Stripe.js, or a stand-in on a loopback address.
    /// A buyer's card number is typed into what it loads: no other host may serve it.
    fn validate_stripe_js(&self) -> Result<(), SettingsError> {
        if super::stripe_js_origin(&self.processors.stripe_js_url).is_none() {
            return bad(
                "processors.stripe_js_url",
                "Stripe's own https://js.stripe.com/v3/, or a loopback address (a test server's stand-in)",
            );
        }
        Ok(())
    }

    /// `listen` and `database.*`.
    pub(super) fn validate_listen_and_database(&self) -> Result<(), SettingsError> {
        if std::net::SocketAddr::from_str(&self.listen).is_err() {
            return bad("listen", "expected host:port, e.g. 127.0.0.1:8080");
        }
        if let Some(operator) = &self.http.operator_listen {
            if std::net::SocketAddr::from_str(operator).is_err() {
                return bad(
                    "http.operator_listen",
                    "expected host:port, e.g. 127.0.0.1:9090",
                );
            }
            if *operator == self.listen && !operator.ends_with(":0") {
                return bad("http.operator_listen", "must differ from listen");
            }
        }
        if !(self.database.is_sqlite()
            || self.database.url.starts_with("postgres://")
            || self.database.url.starts_with("postgresql://"))
        {
            return bad("database.url", "expected a sqlite: or postgres:// URL");
        }
        if self.database.lookup_staleness_ms > 60_000 {
            return bad(
                "database.lookup_staleness_ms",
                "must be at most 60000 (the routes that change a cached row wait this long)",
            );
        }
        if self.database.max_batch == 0 {
            return bad("database.max_batch", "must be at least 1");
        }
        if self.database.writers == Some(0) {
            return bad("database.writers", "must be at least 1");
        }
        Ok(())
    }

    /// `http.public_url`: where buyers reach payd (checkout and share links, `return_url`
    /// hand-offs). Production needs it set, as `https://`: the listen address is seldom where
    /// buyers come from, and a link to it would lead them nowhere, or somewhere else.
    fn validate_public_url(&self) -> Result<(), SettingsError> {
        let production = self.mode == DeploymentMode::Production;
        let url = self.http.public_url.as_deref().map(str::trim);
        match url {
            None | Some("") if production => bad(
                "http.public_url",
                "production mode needs the address buyers reach payd at, https://… (PAYD_HTTP__PUBLIC_URL)",
            ),
            None | Some("") => Ok(()),
            Some(u) => {
                let rest = u
                    .strip_prefix("https://")
                    .or_else(|| u.strip_prefix("http://").filter(|_| !production));
                match rest {
                    Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) => Ok(()),
                    _ if production => bad("http.public_url", "expected an https:// URL"),
                    _ => bad("http.public_url", "expected an http:// or https:// URL"),
                }
            }
        }
    }

    /// `security.*`, the sandbox faults production refuses, and `admin_key`.
    fn validate_security(&self) -> Result<(), SettingsError> {
        if self.security.key_pepper.len() < 16 {
            return bad("security.key_pepper", "must be at least 16 characters");
        }
        if self.mode == DeploymentMode::Production && self.security.key_pepper == SANDBOX_PEPPER {
            return bad(
                "security.key_pepper",
                "production mode needs its own pepper (PAYD_SECURITY__KEY_PEPPER)",
            );
        }
        let faults = &self.sandbox.fail_outcome_commits;
        if self.mode == DeploymentMode::Production && !faults.is_empty() {
            return bad(
                "sandbox.fail_outcome_commits",
                "a fault for tests: refused in production mode",
            );
        }
        let ops = ["authorize", "challenge", "capture", "void", "refund"];
        if faults
            .split_terminator(',')
            .any(|op| !ops.contains(&op.trim()))
        {
            return bad(
                "sandbox.fail_outcome_commits",
                "expected operations among authorize, challenge, capture, void, refund, comma-separated",
            );
        }
        let key_ok = |k: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(k.trim())
                .is_ok_and(|b| b.len() == 32)
        };
        let master_key = self
            .security
            .master_key
            .as_deref()
            .filter(|k| !k.trim().is_empty());
        match master_key {
            None if self.mode == DeploymentMode::Production => {
                return bad(
                    "security.master_key",
                    "production mode needs a master key to seal stored secrets: 32 random bytes, base64 (PAYD_SECURITY__MASTER_KEY)",
                )
            }
            Some(k) if !key_ok(k) => {
                return bad("security.master_key", "expected 32 bytes, base64-encoded")
            }
            _ => {}
        }
        if !self
            .security
            .previous_master_keys
            .split_terminator(',')
            .all(key_ok)
        {
            return bad(
                "security.previous_master_keys",
                "expected master keys of 32 bytes, base64-encoded, comma-separated",
            );
        }
        if let Err(e) = self.security.allowed_outbound() {
            return bad("security.allowed_outbound_cidrs", &e);
        }
        if let Err(e) = self.security.pinned_hosts() {
            return bad("security.resolve_overrides", &e);
        }
        if let Some(key) = &self.admin_key {
            if key.len() < 8 {
                return bad("admin_key", "must be at least 8 characters");
            }
        }
        let previous_admin = split_list(&self.previous_admin_keys);
        if previous_admin.clone().any(|k| k.len() < 8) {
            return bad(
                "previous_admin_keys",
                "expected admin keys of at least 8 characters, comma-separated",
            );
        }
        if self.admin_key.is_none() && previous_admin.count() > 0 {
            return bad(
                "previous_admin_keys",
                "older admin keys are accepted only beside the current one: set admin_key too",
            );
        }
        if split_list(&self.security.previous_key_peppers).any(|p| p.len() < 16) {
            return bad(
                "security.previous_key_peppers",
                "expected peppers of at least 16 characters, comma-separated",
            );
        }
        Ok(())
    }

    /// `http.*` and `limits.*`.
    fn validate_limits(&self) -> Result<(), SettingsError> {
        if self.http.request_timeout_secs == 0 {
            return bad("http.request_timeout_secs", "must be greater than 0");
        }
        if self.http.max_body_bytes == 0 {
            return bad("http.max_body_bytes", "must be greater than 0");
        }
        if self.limits.max_file_bytes == 0 {
            return bad("limits.max_file_bytes", "must be greater than 0");
        }
        if self.limits.max_image_bytes == 0 {
            return bad("limits.max_image_bytes", "must be greater than 0");
        }
        for (key, value) in [
            (
                "limits.max_api_keys_per_merchant",
                self.limits.max_api_keys_per_merchant,
            ),
            (
                "limits.max_shops_per_merchant",
                self.limits.max_shops_per_merchant,
            ),
            (
                "limits.max_files_per_merchant",
                self.limits.max_files_per_merchant,
            ),
            (
                "limits.max_file_bytes_per_merchant",
                self.limits.max_file_bytes_per_merchant,
            ),
        ] {
            if value == 0 {
                return bad(key, "must be greater than 0");
            }
        }
        if self.limits.max_amount <= 0 {
            return bad("limits.max_amount", "must be greater than 0");
        }
        Ok(())
    }

    /// `actors.*`, `scheduler.*` and `idempotency.*`.
    fn validate_runtime(&self) -> Result<(), SettingsError> {
        if self.actors.mailbox_capacity == 0 {
            return bad("actors.mailbox_capacity", "must be greater than 0");
        }
        if self.scheduler.poll_interval_ms == 0 || self.scheduler.batch_size == 0 {
            return bad(
                "scheduler",
                "poll_interval_ms and batch_size must be greater than 0",
            );
        }
        if self.idempotency.ttl_hours == 0 {
            return bad("idempotency.ttl_hours", "must be greater than 0");
        }
        Ok(())
    }

    /// `webhooks.*`.
    fn validate_webhooks(&self) -> Result<(), SettingsError> {
        let w = &self.webhooks;
        if w.max_in_flight_per_endpoint == 0
            || w.request_timeout_secs == 0
            || w.poll_interval_ms == 0
            || w.batch_size == 0
        {
            return bad(
                "webhooks",
                "max_in_flight_per_endpoint, request_timeout_secs, poll_interval_ms and batch_size must be greater than 0",
            );
        }
        if w.replay_max == 0 {
            return bad("webhooks.replay_max", "must be greater than 0");
        }
        for (name, secs) in [
            ("webhooks.disable_after_secs", w.disable_after_secs),
            ("webhooks.purge_interval_secs", w.purge_interval_secs),
            ("webhooks.attempt_retention_secs", w.attempt_retention_secs),
            ("webhooks.payload_retention_secs", w.payload_retention_secs),
        ] {
            // Beyond a century, the time arithmetic would overflow.
            if secs == 0 || secs > 3_153_600_000 {
                return bad(name, "must be between 1 second and 100 years");
            }
        }
        Ok(())
    }

    /// `risk.*`: rates in (0, 1], not falling from band to band.
    fn validate_risk(&self) -> Result<(), SettingsError> {
        let r = &self.risk;
        let bands = [r.elevated, r.high, r.critical];
        let rates = |t: &RiskThresholds| [t.dispute_rate, t.refund_rate, t.decline_rate];
        if bands.iter().flat_map(rates).any(|x| !(x > 0.0 && x <= 1.0)) {
            return bad(
                "risk",
                "every threshold must be a rate above 0 and at most 1",
            );
        }
        if bands
            .windows(2)
            .any(|w| rates(&w[0]).iter().zip(rates(&w[1])).any(|(a, b)| *a > b))
        {
            return bad(
                "risk",
                "the thresholds must not fall from elevated to high to critical",
            );
        }
        Ok(())
    }
}

/// A refused setting.
fn bad(key: &'static str, message: &str) -> Result<(), SettingsError> {
    Err(SettingsError::Key {
        key,
        message: message.to_owned(),
    })
}
