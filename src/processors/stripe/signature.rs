//! The `Stripe-Signature` of the events Stripe posts (docs.stripe.com/webhooks, "Verify
//! webhook signatures with official libraries" and "Prevent replay attacks").

use hmac::Mac;

use crate::processors::remote::mac;

/// How old a signed event may be (Stripe's own libraries' default).
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;

/// Why a Stripe event was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing or malformed")]
    Malformed,
    #[error("the event is older than {SIGNATURE_TOLERANCE_SECS} seconds")]
    Stale,
    #[error("no signature matches the account's webhook secret")]
    Mismatch,
}

/// Checks a `Stripe-Signature` header (`t=…,v1=…[,v1=…]`): some `v1` must be the
/// HMAC-SHA256 of `"{t}.{body}"` under the webhook secret, and `t` no older than the tolerance
/// before `now` (Unix seconds). A timestamp ahead of payd's clock is accepted however far
/// ahead, as Stripe's libraries accept it: only an old one is a replay.
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", s)) => {
                signatures.push(hex::decode(s).map_err(|_| SignatureError::Malformed)?)
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now.saturating_sub(timestamp) > SIGNATURE_TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    // Compared in constant time, each against the same MAC.
    let expected = mac(secret, timestamp, body);
    if signatures
        .iter()
        .any(|s| expected.clone().verify_slice(s).is_ok())
    {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// Signs an event as Stripe does: the `Stripe-Signature` header for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let signature = hex::encode(mac(secret, timestamp, body).finalize().into_bytes());
    format!("t={timestamp},v1={signature}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_checked_against_the_secret_the_body_and_the_clock() {
        let body = br#"{"id":"evt_1"}"#;
        let header = sign("whsec_test", 1_000, body);
        assert_eq!(verify("whsec_test", &header, body, 1_100), Ok(()));
        assert_eq!(
            verify("whsec_other", &header, body, 1_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_test", &header, b"{}", 1_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                "whsec_test",
                &header,
                body,
                1_000 + SIGNATURE_TOLERANCE_SECS + 1
            ),
            Err(SignatureError::Stale)
        );
        // Ahead of payd's clock, however far: accepted, as Stripe's libraries accept it.
        assert_eq!(verify("whsec_test", &header, body, 1_000 - 3_600), Ok(()));
        assert_eq!(
            verify("whsec_test", "v1=00", body, 1_000),
            Err(SignatureError::Malformed)
        );
        let rolled = format!(
            "t=1000,v1={},v1=00",
            &header[header.find("v1=").unwrap() + 3..]
        );
        assert_eq!(verify("whsec_test", &rolled, body, 1_000), Ok(()));
    }
}
