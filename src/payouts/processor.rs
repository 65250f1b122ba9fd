//! The sandbox payout processor, pure: it pays out by the destination's account number (a card
//! always succeeds), deterministically over time. payd keeps only its token for the
//! destination (`rcp_<behaviour>_<last4>`), never the account number.
//!
//! | account number | outcome |
//! |---|---|
//! | `000111111116` | fails at once: `account_closed` |
//! | `000222222226` | `pending`, then `success` after `sandbox.async_delay_secs` |
//! | `000333333336` | `success`, then `reversed` after `sandbox.async_delay_secs` |
//! | `000444444446` | `ineligible`: the destination cannot receive payouts |
//! | any other | `success` at once |

use chrono::{DateTime, Duration, Utc};

use super::machine::Outcome;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Succeeds,
    Fails,
    SettlesLater,
    ReversedLater,
    Ineligible,
}

const ACCOUNTS: [(&str, Behaviour); 4] = [
    ("000111111116", Behaviour::Fails),
    ("000222222226", Behaviour::SettlesLater),
    ("000333333336", Behaviour::ReversedLater),
    ("000444444446", Behaviour::Ineligible),
];

impl Behaviour {
    fn code(self) -> &'static str {
        match self {
            Behaviour::Succeeds => "ok",
            Behaviour::Fails => "fails",
            Behaviour::SettlesLater => "later",
            Behaviour::ReversedLater => "reversed",
            Behaviour::Ineligible => "ineligible",
        }
    }
}

/// The processor's token for a bank account.
pub fn bank_recipient(account_number: &str) -> String {
    let behaviour = ACCOUNTS
        .iter()
        .find(|(n, _)| *n == account_number)
        .map_or(Behaviour::Succeeds, |(_, b)| *b);
    token(behaviour, account_number)
}

/// The processor's token for a card.
pub fn card_recipient(number: &str) -> String {
    token(Behaviour::Succeeds, number)
}

fn token(b: Behaviour, number: &str) -> String {
    let last4 = &number[number.len().saturating_sub(4)..];
    format!("rcp_{}_{last4}", b.code())
}

fn behaviour(recipient: &str) -> Behaviour {
    let code = recipient
        .strip_prefix("rcp_")
        .and_then(|r| r.rsplit_once('_'))
        .map_or("ok", |(code, _)| code);
    [
        Behaviour::Fails,
        Behaviour::SettlesLater,
        Behaviour::ReversedLater,
        Behaviour::Ineligible,
    ]
    .into_iter()
    .find(|b| b.code() == code)
    .unwrap_or(Behaviour::Succeeds)
}

/// What the processor says of a payout to `recipient` it was given at `submitted`.
pub fn status(
    recipient: &str,
    submitted: DateTime<Utc>,
    now: DateTime<Utc>,
    delay: Duration,
) -> Outcome {
    let settled = now >= submitted + delay;
    match behaviour(recipient) {
        Behaviour::Succeeds => Outcome::Success,
        Behaviour::Fails => Outcome::Failed {
            code: "account_closed".into(),
            message: "the destination account is closed".into(),
        },
        Behaviour::Ineligible => Outcome::Ineligible,
        Behaviour::SettlesLater if settled => Outcome::Success,
        Behaviour::SettlesLater => Outcome::Pending,
        Behaviour::ReversedLater if settled => Outcome::Reversed,
        Behaviour::ReversedLater => Outcome::Success,
    }
}

/// When the processor's answer for this payout changes next, if it does.
pub fn next_change(
    recipient: &str,
    submitted: DateTime<Utc>,
    now: DateTime<Utc>,
    delay: Duration,
) -> Option<DateTime<Utc>> {
    let at = submitted + delay;
    match behaviour(recipient) {
        Behaviour::SettlesLater | Behaviour::ReversedLater if now < at => Some(at),
        _ => None,
    }
}

/// Cancels a payout the processor still has pending: whether it could.
pub fn cancel(
    recipient: &str,
    submitted: DateTime<Utc>,
    now: DateTime<Utc>,
    delay: Duration,
) -> bool {
    status(recipient, submitted, now, delay) == Outcome::Pending
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_by_account_and_time() {
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let d = Duration::seconds(5);
        let later = t0 + Duration::seconds(6);
        let s = |acct: &str, at| status(&bank_recipient(acct), t0, at, d);
        assert_eq!(s("000123456789", t0), Outcome::Success);
        assert!(matches!(s("000111111116", t0), Outcome::Failed { .. }));
        assert_eq!(s("000222222226", t0), Outcome::Pending);
        assert_eq!(s("000222222226", later), Outcome::Success);
        assert_eq!(s("000333333336", t0), Outcome::Success);
        assert_eq!(s("000333333336", later), Outcome::Reversed);
        assert_eq!(s("000444444446", t0), Outcome::Ineligible);
        assert_eq!(bank_recipient("000222222226"), "rcp_later_2226");
        assert!(cancel(&bank_recipient("000222222226"), t0, t0, d));
        assert!(!cancel(&bank_recipient("000222222226"), t0, later, d));
        assert_eq!(
            next_change(&bank_recipient("000333333336"), t0, t0, d),
            Some(t0 + d)
        );
        assert_eq!(
            next_change(&card_recipient("4242424242424242"), t0, t0, d),
            None
        );
    }
}
