//! The processor behind a processor account: the sandbox for a sandbox account, and for a
//! `remote` or `stripe` account a client built once from its sealed connection settings and
//! kept (each with its own circuit breaker) for the life of the process.
//!
//! Invariant: an account whose settings cannot be opened or read resolves to nothing, never
//! to the sandbox in its place.

use std::{sync::Arc, time::Duration};

use dashmap::DashMap;
use payd_entity::processor_account;

use super::{
    remote::RemoteProcessor,
    sandbox::Sandbox,
    stripe::{StripeConfig, StripeProcessor},
    Processor,
};
use crate::{outbound::Policy, sealed::Keyring, settings::Settings};

pub use payd_model::processors::{AccountKind, Approval};

/// Whether `account` may serve a payment of this mode: only an account of the payment's own
/// mode, and never a sandbox account for a live one (no key adds one: this holds for rows
/// from before that rule too).
pub fn serves(account: &processor_account::Model, test_mode: bool) -> bool {
    account.test_mode == test_mode && (test_mode || account.kind != AccountKind::Sandbox)
}

/// What an operator sees of an account's connection before approving it: where its requests
/// go and which credential they carry, never the credential itself.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ProcessorConnection {
    /// A remote account's URL; a Stripe account's `api_base` (scheme and host).
    pub destination: String,
    /// A Stripe key's own mode, `test` (`sk_test_…`, `rk_test_…`) or `live`; none for a
    /// remote account's shared secret.
    pub credential_mode: Option<&'static str>,
    /// The credential's last four characters.
    pub credential_last4: String,
    /// How long payd waits for each request's answer.
    pub timeout_ms: u64,
}

fn last4(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    chars[chars.len().saturating_sub(4)..].iter().collect()
}

pub struct Connections {
    sandbox: Arc<Sandbox>,
    keyring: Arc<Keyring>,
    settings: Arc<Settings>,
    /// The connected processors by account id, each with the sealed settings it was made from:
    /// an account whose settings changed (a key rolled) is connected again.
    connected: DashMap<String, (Option<String>, Arc<dyn Processor>)>,
}

impl Connections {
    pub fn new(sandbox: Arc<Sandbox>, keyring: Arc<Keyring>, settings: Arc<Settings>) -> Self {
        Self {
            sandbox,
            keyring,
            settings,
            connected: DashMap::new(),
        }
    }

    /// The sandbox for a sandbox account (or none); the connected processor of any other, or
    /// `None` when its settings cannot be read.
    pub fn resolve(
        &self,
        account: Option<&processor_account::Model>,
    ) -> Option<Arc<dyn Processor>> {
        let Some(account) = account.filter(|a| a.kind != AccountKind::Sandbox) else {
            return Some(self.sandbox.clone());
        };
        if let Some(found) = self.connected.get(&account.id) {
            if found.0 == account.config {
                return Some(found.1.clone());
            }
        }
        let p = &self.settings.processors;
        let (threshold, cooldown) = (
            p.circuit_failure_threshold,
            Duration::from_secs(p.circuit_cooldown_secs),
        );
        let policy = Arc::new(Policy::from_settings(
            p.allow_private_urls,
            &self.settings.security,
        ));
        let processor: Arc<dyn Processor> = match account.kind {
            AccountKind::Remote => Arc::new(RemoteProcessor::new(
                self.settings_of(account)?,
                threshold,
                cooldown,
                policy,
            )),
            AccountKind::Stripe => Arc::new(StripeProcessor::new(
                account.id.clone(),
                self.settings_of(account)?,
                threshold,
                cooldown,
                policy,
            )),
            AccountKind::Sandbox => return Some(self.sandbox.clone()),
        };
        let mut entry = self
            .connected
            .entry(account.id.clone())
            .or_insert_with(|| (account.config.clone(), processor.clone()));
        if entry.0 != account.config {
            *entry = (account.config.clone(), processor);
        }
        Some(entry.1.clone())
    }

    /// A remote account's settings.
    pub fn remote(
        &self,
        account: &processor_account::Model,
    ) -> Option<super::remote::RemoteConfig> {
        (account.kind == AccountKind::Remote)
            .then(|| self.settings_of(account))
            .flatten()
    }

    /// A Stripe account's settings (its webhook secret verifies the events Stripe posts).
    pub fn stripe(&self, account: &processor_account::Model) -> Option<StripeConfig> {
        (account.kind == AccountKind::Stripe)
            .then(|| self.settings_of(account))
            .flatten()
    }

    /// What the operator sees of a remote or Stripe account's connection; `None` for a
    /// sandbox one, or one whose settings cannot be read.
    pub fn seen(&self, account: &processor_account::Model) -> Option<ProcessorConnection> {
        match account.kind {
            AccountKind::Remote => {
                let c: super::remote::RemoteConfig = self.settings_of(account)?;
                Some(ProcessorConnection {
                    credential_last4: last4(&c.secret),
                    destination: c.url,
                    credential_mode: None,
                    timeout_ms: c.timeout_ms,
                })
            }
            AccountKind::Stripe => {
                let c: StripeConfig = self.settings_of(account)?;
                let mode = if StripeConfig::is_live_key(&c.secret_key) {
                    "live"
                } else {
                    "test"
                };
                Some(ProcessorConnection {
                    credential_last4: last4(&c.secret_key),
                    destination: c.api_base,
                    credential_mode: Some(mode),
                    timeout_ms: c.timeout_ms,
                })
            }
            AccountKind::Sandbox => None,
        }
    }

    /// An account's connection settings, opened and read.
    fn settings_of<T: serde::de::DeserializeOwned>(
        &self,
        account: &processor_account::Model,
    ) -> Option<T> {
        match self.keyring.open(account.config.as_deref()?) {
            Ok(json) => serde_json::from_str(&json).ok(),
            Err(e) => {
                tracing::error!(account = %account.id, error = %e, "a processor account's settings cannot be opened");
                None
            }
        }
    }
}
