//! API keys as values: their kinds and modes, their shape, generation and peppered hash.
//! Below the stores (which keep the hashes) and the extractors (which check them).

use hmac::{Hmac, KeyInit, Mac};
use rand::{distr::Alphanumeric, Rng};
use sha2::Sha256;

use crate::{
    clock::Timeline,
    error::ApiError,
    ids::{KeyId, MerchantId, ProfileId},
};

pub use payd_model::keys::{KeyKind, Mode};

/// Key prefixes by kind and mode (publishable first: `pk_snd_` also ends in `snd_`).
const PREFIXES: [(&str, KeyKind, Mode); 4] = [
    ("pk_snd_", KeyKind::Publishable, Mode::Test),
    ("pk_prd_", KeyKind::Publishable, Mode::Live),
    ("snd_", KeyKind::Secret, Mode::Test),
    ("prd_", KeyKind::Secret, Mode::Live),
];

const SECRET_LEN: usize = 40;

/// The kind and mode a key's prefix announces, if its shape is right.
pub fn parse_key(key: &str) -> Option<(KeyKind, Mode)> {
    PREFIXES.iter().find_map(|(prefix, kind, mode)| {
        let rest = key.strip_prefix(prefix)?;
        (rest.len() == SECRET_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then_some((*kind, *mode))
    })
}

/// A new key: its prefix and 40 random alphanumerics (≈ 238 bits).
pub fn generate_key(kind: KeyKind, mode: Mode) -> String {
    let prefix = PREFIXES
        .iter()
        .find(|(_, k, m)| *k == kind && *m == mode)
        .map(|(p, _, _)| *p)
        .unwrap_or("snd_");
    let secret: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(SECRET_LEN)
        .map(char::from)
        .collect();
    format!("{prefix}{secret}")
}

/// HMAC-SHA256(pepper, key), hex: what is stored and looked up.
pub fn hash_key(pepper: &str, key: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(pepper.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(key.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The id of a pepper as keys record it: the first 8 hex digits of its SHA-256 (as a master
/// key's id), which names it without giving it away.
pub fn pepper_id(pepper: &str) -> String {
    use sha2::Digest;
    hex::encode(&Sha256::digest(pepper.as_bytes())[..4])
}

/// The authenticated caller of a merchant route.
#[derive(Debug, Clone)]
pub struct Caller {
    pub merchant_id: MerchantId,
    pub key_id: KeyId,
    pub mode: Mode,
    pub kind: KeyKind,
    /// The shop the key is bound to, if any.
    pub bound_profile: Option<ProfileId>,
    /// The shop selected by `x-profile-id`, or the bound shop.
    pub profile: Option<ProfileId>,
    /// Seconds the merchant's sandbox test clock is ahead (read with the key).
    pub clock_offset: i64,
}

/// The objects a caller reaches: its merchant's, in its mode, and within them its effective
/// shop — the key's bound shop, else the shop `x-profile-id` selects, else every shop. The one
/// rule for shop-owned objects: anything outside the scope reads as missing (404), exactly
/// like another merchant's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub merchant_id: MerchantId,
    pub test_mode: bool,
    /// `None`: every shop of the merchant.
    pub profile_id: Option<ProfileId>,
}

impl Scope {
    /// A merchant's whole scope in one mode (every shop): for the merchant's own rows,
    /// customers and files, which no shop owns.
    pub fn whole(merchant_id: &MerchantId, test_mode: bool) -> Scope {
        Scope {
            merchant_id: merchant_id.clone(),
            test_mode,
            profile_id: None,
        }
    }

    /// Whether an object of this merchant, mode and shop is within the scope.
    pub fn sees(&self, merchant_id: &str, test_mode: bool, profile_id: &str) -> bool {
        self.merchant_id.as_str() == merchant_id
            && self.test_mode == test_mode
            && self
                .profile_id
                .as_ref()
                .is_none_or(|p| p.as_str() == profile_id)
    }

    /// The shop a list is filtered to: the scope's, or the `profile_id` a merchant-wide
    /// caller asks for. Asking for another shop than the scope's is 403 `profile_mismatch`.
    pub fn list_shop(&self, asked: Option<&str>) -> Result<Option<String>, ApiError> {
        match (&self.profile_id, asked) {
            (Some(mine), Some(asked)) if mine.as_str() != asked => Err(ApiError::forbidden(
                "profile_mismatch",
                "this request is scoped to another shop",
            )
            .param("profile_id")),
            (Some(mine), _) => Ok(Some(mine.to_string())),
            (None, asked) => Ok(asked.map(str::to_owned)),
        }
    }
}

impl Caller {
    pub fn test_mode(&self) -> bool {
        self.mode == Mode::Test
    }

    /// The timeline its requests run on: its merchant's sandbox test clock, or the base time
    /// for a live key.
    pub fn timeline(&self) -> Timeline {
        if self.test_mode() {
            Timeline::of(self.merchant_id.as_str(), self.clock_offset)
        } else {
            Timeline::default()
        }
    }

    /// What this caller reaches (see [`Scope`]).
    pub fn scope(&self) -> Scope {
        Scope {
            merchant_id: self.merchant_id.clone(),
            test_mode: self.test_mode(),
            profile_id: self.profile.clone(),
        }
    }

    /// Refuses a key bound to one shop (403 `shop_bound_key`) on what belongs to the whole
    /// merchant; `message` says what it may not do.
    pub fn refuse_bound(&self, message: &'static str) -> Result<(), ApiError> {
        match self.bound_profile {
            Some(_) => Err(ApiError::forbidden("shop_bound_key", message)),
            None => Ok(()),
        }
    }

    /// The selected shop, for routes that create shop-owned objects.
    pub fn require_shop(&self) -> Result<&ProfileId, ApiError> {
        self.profile.as_ref().ok_or_else(|| {
            ApiError::invalid(
                "shop_required",
                "this route needs a shop: send the x-profile-id header or use a shop-bound key",
            )
            .param("x-profile-id")
        })
    }
}
