//! Secrets at rest: webhook signing secrets and remote processors' connection settings are
//! stored sealed with AES-256-GCM under the deployment's master key.
//!
//! A sealed value reads `sealed:v1:{key id}:{base64 nonce}:{base64 ciphertext}`. The key id is
//! the first 8 hex digits of the key's SHA-256, so a keyring holding the current key and older
//! ones (`security.previous_master_keys`) opens what any of them sealed. A value without the
//! prefix was stored before sealing existed: it opens as itself, and `seal_stored` (at
//! start-up) or `rekey` seals it.

use aes_gcm::{
    aead::{Aead, KeyInit},
    Aes256Gcm, Nonce,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use payd_entity::{processor_account, webhook_endpoint};
use sea_orm::{
    sea_query::Expr, ColumnTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use sha2::{Digest, Sha256};

use crate::commit::Db;
use crate::settings::SecuritySettings;

const PREFIX: &str = "sealed:v1:";

/// The sandbox's master key when none is set: fixed and public, so sealing protects nothing
/// there. Production mode refuses to start without `security.master_key`.
const SANDBOX_KEY: [u8; 32] = *b"payd-sandbox-master-key-32-bytes";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("a master key must be 32 bytes, base64-encoded")]
    BadKey,
    #[error("the value was sealed with master key {0}, which this deployment does not hold")]
    UnknownKey(String),
    #[error("the sealed value is damaged or was sealed with another key")]
    Damaged,
}

/// One master key.
#[derive(Clone)]
struct MasterKey {
    id: String,
    cipher: Aes256Gcm,
}

impl MasterKey {
    fn new(bytes: &[u8; 32]) -> Self {
        let id = hex::encode(&Sha256::digest(bytes)[..4]);
        Self {
            id,
            cipher: Aes256Gcm::new(bytes.into()),
        }
    }

    fn from_base64(text: &str) -> Result<Self, SealError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| SealError::BadKey)?;
        Ok(Self::new(&bytes))
    }
}

/// The current master key (seals) and older ones (open only).
#[derive(Clone)]
pub struct Keyring {
    current: MasterKey,
    previous: Vec<MasterKey>,
    /// Opened values by their sealed text: every delivery opens its endpoint's secret, so the
    /// same few secrets are opened thousands of times a second. Bounded: cleared when full.
    opened: std::sync::Arc<dashmap::DashMap<String, String>>,
}

/// The most opened values a keyring keeps.
const OPENED_MAX: usize = 10_000;

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current.id)
            .field(
                "previous",
                &self.previous.iter().map(|k| &k.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Keyring {
    /// From `security.master_key` (none: the sandbox key) and
    /// `security.previous_master_keys` (comma-separated).
    pub fn new(current: Option<&str>, previous: &str) -> Result<Self, SealError> {
        let current = match current.filter(|k| !k.trim().is_empty()) {
            Some(key) => MasterKey::from_base64(key)?,
            None => MasterKey::new(&SANDBOX_KEY),
        };
        let previous = previous
            .split_terminator(',')
            .map(MasterKey::from_base64)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            current,
            previous,
            opened: Default::default(),
        })
    }

    /// The deployment's keyring: `security.master_key` and `security.previous_master_keys`.
    pub fn from_settings(security: &SecuritySettings) -> Result<Self, SealError> {
        Self::new(
            security.master_key.as_deref(),
            &security.previous_master_keys,
        )
    }

    /// A keyring whose current key is `new`, opening what this one opens.
    pub fn rotated_to(&self, new: &str) -> Result<Self, SealError> {
        let mut previous = vec![self.current.clone()];
        previous.extend(self.previous.iter().cloned());
        Ok(Self {
            current: MasterKey::from_base64(new)?,
            previous,
            opened: Default::default(),
        })
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    /// Whether the sandbox's public key is the one that seals.
    pub fn is_sandbox_key(&self) -> bool {
        self.current.id == MasterKey::new(&SANDBOX_KEY).id
    }

    pub fn seal(&self, plain: &str) -> String {
        let nonce: [u8; 12] = rand::random();
        let sealed = self
            .current
            .cipher
            .encrypt(&Nonce::from(nonce), plain.as_bytes())
            .expect("AES-GCM seals any input shorter than 64 GiB");
        format!(
            "{PREFIX}{}:{}:{}",
            self.current.id,
            STANDARD.encode(nonce),
            STANDARD.encode(sealed)
        )
    }

    pub fn open(&self, stored: &str) -> Result<String, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        if let Some(plain) = self.opened.get(stored) {
            return Ok(plain.clone());
        }
        let mut parts = rest.splitn(3, ':');
        let (Some(id), Some(nonce), Some(sealed)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(SealError::Damaged);
        };
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let nonce: [u8; 12] = STANDARD
            .decode(nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or(SealError::Damaged)?;
        let sealed = STANDARD.decode(sealed).map_err(|_| SealError::Damaged)?;
        let plain = key
            .cipher
            .decrypt(&Nonce::from(nonce), sealed.as_slice())
            .map_err(|_| SealError::Damaged)?;
        let plain = String::from_utf8(plain).map_err(|_| SealError::Damaged)?;
        if self.opened.len() >= OPENED_MAX {
            self.opened.clear();
        }
        self.opened.insert(stored.to_owned(), plain.clone());
        Ok(plain)
    }

    /// Whether `stored` is sealed with the current key (nothing to do for `rekey`).
    pub fn is_current(&self, stored: &str) -> bool {
        stored
            .strip_prefix(PREFIX)
            .is_some_and(|rest| rest.starts_with(&format!("{}:", self.current.id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> String {
        STANDARD.encode([byte; 32])
    }

    #[test]
    fn a_sealed_secret_opens_and_shows_nothing_of_itself() {
        let ring = Keyring::new(Some(&key(1)), "").unwrap();
        let sealed = ring.seal("whsec_abc");
        assert!(sealed.starts_with("sealed:v1:") && !sealed.contains("whsec_"));
        assert_ne!(sealed, ring.seal("whsec_abc"), "a fresh nonce each time");
        assert_eq!(ring.open(&sealed).unwrap(), "whsec_abc");
        assert_eq!(
            ring.open("whsec_plain").unwrap(),
            "whsec_plain",
            "stored before sealing"
        );
        let other = Keyring::new(Some(&key(2)), "").unwrap();
        assert!(matches!(other.open(&sealed), Err(SealError::UnknownKey(_))));
        let mut damaged = sealed.clone();
        damaged.pop();
        damaged.push('A');
        assert!(ring.open(&damaged).is_err());
    }

    #[test]
    fn a_rotated_keyring_opens_the_old_and_seals_with_the_new() {
        let old = Keyring::new(Some(&key(1)), "").unwrap();
        let sealed = old.seal("secret");
        let new = old.rotated_to(&key(2)).unwrap();
        assert_eq!(new.open(&sealed).unwrap(), "secret");
        assert!(!new.is_current(&sealed));
        assert!(new.is_current(&new.seal("secret")));
        assert!(matches!(
            Keyring::new(Some("c2hvcnQ="), ""),
            Err(SealError::BadKey)
        ));
    }
}

/// Seals every stored secret that is not sealed with the keyring's current key: webhook
/// signing secrets (current and previous) and remote processors' connection settings, in
/// batches of 100. Values stored before sealing existed are sealed; values sealed with an
/// older key of the ring are sealed again with the current one. Each row is written only if
/// it still holds what was read (a rotation or an edit meanwhile wins), so this can run at
/// every start and be interrupted and resumed. Returns how many values it sealed. It reads only
/// the ids and the sealed columns: another column of a row that does not decode is no reason
/// for payd not to start.
pub async fn reseal(db: &Db, ring: &Keyring) -> Result<usize, ResealError> {
    let mut sealed = 0;
    let mut after = String::new();
    loop {
        let batch: Vec<(String, String, Option<String>)> = webhook_endpoint::Entity::find()
            .select_only()
            .columns([
                webhook_endpoint::Column::Id,
                webhook_endpoint::Column::Secret,
                webhook_endpoint::Column::PreviousSecret,
            ])
            .filter(webhook_endpoint::Column::Id.gt(after.as_str()))
            .order_by_asc(webhook_endpoint::Column::Id)
            .limit(100)
            .into_tuple()
            .all(db)
            .await?;
        let Some(last) = batch.last() else { break };
        after = last.0.clone();
        for (id, current, previous) in batch {
            let stale = |v: &str| !ring.is_current(v);
            if !stale(&current) && previous.as_deref().is_none_or(|p| !stale(p)) {
                continue;
            }
            let secret = ring.seal(&ring.open(&current)?);
            let previous = match &previous {
                Some(p) => Some(ring.seal(&ring.open(p)?)),
                None => None,
            };
            webhook_endpoint::Entity::update_many()
                .col_expr(webhook_endpoint::Column::Secret, Expr::value(secret))
                .col_expr(
                    webhook_endpoint::Column::PreviousSecret,
                    Expr::value(previous),
                )
                .filter(webhook_endpoint::Column::Id.eq(id.as_str()))
                .filter(webhook_endpoint::Column::Secret.eq(current.as_str()))
                .exec(db)
                .await?;
            sealed += 1;
        }
    }
    let before_accounts = sealed;
    let mut after = String::new();
    loop {
        let batch: Vec<(String, String)> = processor_account::Entity::find()
            .select_only()
            .columns([
                processor_account::Column::Id,
                processor_account::Column::Config,
            ])
            .filter(processor_account::Column::Id.gt(after.as_str()))
            .filter(processor_account::Column::Config.is_not_null())
            .order_by_asc(processor_account::Column::Id)
            .limit(100)
            .into_tuple()
            .all(db)
            .await?;
        let Some(last) = batch.last() else { break };
        after = last.0.clone();
        for (id, config) in batch {
            if ring.is_current(&config) {
                continue;
            }
            let config = config.as_str();
            processor_account::Entity::update_many()
                .col_expr(
                    processor_account::Column::Config,
                    Expr::value(Some(ring.seal(&ring.open(config)?))),
                )
                .filter(processor_account::Column::Id.eq(id.as_str()))
                .filter(processor_account::Column::Config.eq(config))
                .exec(db)
                .await?;
            sealed += 1;
        }
    }
    if sealed > before_accounts {
        // Instances cache the accounts' sealed connections.
        sea_orm::ConnectionTrait::execute(db, &crate::lookups::bump_statement()).await?;
    }
    Ok(sealed)
}

#[derive(Debug, thiserror::Error)]
pub enum ResealError {
    #[error(transparent)]
    Seal(#[from] SealError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}
