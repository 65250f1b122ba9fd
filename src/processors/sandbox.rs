//! The sandbox processor: in process, deterministic, driven by the test card numbers.
//!
//! It keeps no state: everything a later call needs (the card's behaviour, the amount, when
//! it was authorized and whether it was captured) is written into the reference it hands out,
//! so a sync after a restart, or on another instance, answers the same.

use chrono::{DateTime, Duration, TimeZone, Utc};
use futures_util::future;

use super::model::{Authorization, ProcessorView, Verdict};
use super::{
    card::TestBehaviour, Answer, AuthRequest, AuthResult, Processor, ProcessorError, RefundResult,
    RefundStatus,
};

pub struct Sandbox {
    /// How long asynchronous and review payments take to settle.
    pub async_delay: Duration,
}

/// The parts of a sandbox reference: `sbx_<behaviour>_<amount>_<capture>_<unix ms>_<nonce>`.
struct Reference {
    behaviour: TestBehaviour,
    amount: i64,
    capture: bool,
    at: DateTime<Utc>,
}

fn behaviour_name(b: TestBehaviour) -> String {
    serde_json::to_value(b)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', "-")))
        .unwrap_or_default()
}

impl Reference {
    fn encode(&self) -> String {
        format!(
            "sbx_{}_{}_{}_{}_{}",
            behaviour_name(self.behaviour),
            self.amount,
            u8::from(self.capture),
            self.at.timestamp_millis(),
            &uuid::Uuid::now_v7().simple().to_string()[20..]
        )
    }

    fn decode(s: &str) -> Option<Self> {
        let mut parts = s.strip_prefix("sbx_")?.split('_');
        let behaviour =
            serde_json::from_value(serde_json::Value::String(parts.next()?.replace('-', "_")))
                .ok()?;
        let amount = parts.next()?.parse().ok()?;
        let capture = parts.next()? == "1";
        let at = Utc
            .timestamp_millis_opt(parts.next()?.parse().ok()?)
            .single()?;
        Some(Self {
            behaviour,
            amount,
            capture,
            at,
        })
    }
}

fn declined(code: &str, message: &str, retryable: bool) -> AuthResult {
    AuthResult {
        reference: None,
        outcome: Authorization::Declined { retryable },
        error: Some((code.to_owned(), message.to_owned())),
        token: None,
        resend: None,
        capture_before: None,
    }
}

impl Sandbox {
    /// Whether the buyer disputes the payment behind this reference once it is captured
    /// (card 4000000000000259).
    pub fn opens_dispute(&self, reference: &str) -> bool {
        Reference::decode(reference)
            .is_some_and(|r| r.behaviour == TestBehaviour::DisputeAfterCapture)
    }

    /// The decision on a challenged dispute: lost when the explanation says
    /// `losing_evidence`, won otherwise.
    pub fn dispute_verdict(&self, explanation: Option<&str>) -> Verdict {
        if explanation.is_some_and(|e| e.contains("losing_evidence")) {
            Verdict::Lost
        } else {
            Verdict::Won
        }
    }

    fn decide(&self, req: &AuthRequest) -> AuthResult {
        let behaviour = req.card.test_behaviour.unwrap_or(TestBehaviour::Approve);
        let reference = |amount| {
            Some(
                Reference {
                    behaviour,
                    amount,
                    capture: req.capture,
                    at: req.now,
                }
                .encode(),
            )
        };
        let with = |outcome, amount| AuthResult {
            reference: reference(amount),
            outcome,
            error: None,
            token: None,
            resend: None,
            capture_before: None,
        };
        match behaviour {
            TestBehaviour::Decline | TestBehaviour::ChargesDeclined => {
                declined("card_declined", "the card was declined", true)
            }
            TestBehaviour::InsufficientFunds => declined(
                "insufficient_funds",
                "the card has insufficient funds",
                true,
            ),
            TestBehaviour::StolenCard => {
                declined("stolen_card", "the card was reported stolen", false)
            }
            TestBehaviour::Challenge => with(Authorization::ChallengeRequired, req.amount),
            TestBehaviour::PartialAuthorization if req.partial_allowed => {
                let half = (req.amount / 2).max(1);
                with(Authorization::Approved { amount: half }, half)
            }
            TestBehaviour::PartialAuthorization => declined(
                "card_declined",
                "only part of the amount could be authorized and partial authorization is off",
                true,
            ),
            TestBehaviour::Async | TestBehaviour::Timeout | TestBehaviour::SyncMismatch => {
                with(Authorization::Pending, req.amount)
            }
            TestBehaviour::Review => with(Authorization::ReviewRequired, req.amount),
            TestBehaviour::Approve
            | TestBehaviour::DisputeAfterCapture
            | TestBehaviour::RefundFails => {
                with(Authorization::Approved { amount: req.amount }, req.amount)
            }
        }
    }
}

impl Processor for Sandbox {
    /// Cards that decline outright cannot be saved; 4000000000000341 can, though every
    /// charge of it declines.
    fn keeps_state(&self) -> bool {
        false
    }

    fn can_save(&self, card: &super::StoredCard) -> bool {
        !matches!(
            card.test_behaviour,
            Some(
                TestBehaviour::Decline
                    | TestBehaviour::InsufficientFunds
                    | TestBehaviour::StolenCard
            )
        )
    }

    fn authorize(&self, req: AuthRequest) -> Answer<AuthResult> {
        Box::pin(future::ready(Ok(self.decide(&req))))
    }

    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        _return_url: &str,
        _now: DateTime<Utc>,
    ) -> Answer<AuthResult> {
        let result = match Reference::decode(reference) {
            None => Err(ProcessorError::Refused("unknown reference".into())),
            Some(r) if approved => Ok(AuthResult {
                reference: Some(reference.to_owned()),
                outcome: Authorization::Approved { amount: r.amount },
                error: None,
                token: None,
                resend: None,
                capture_before: None,
            }),
            Some(_) => Ok(declined(
                "authentication_failed",
                "the buyer did not complete 3-D Secure",
                true,
            )),
        };
        Box::pin(future::ready(result))
    }

    fn capture(&self, reference: &str, _amount: i64, _currency: &str, _key: &str) -> Answer<()> {
        let known = Reference::decode(reference).is_some();
        Box::pin(future::ready(if known {
            Ok(())
        } else {
            Err(ProcessorError::Refused("unknown reference".into()))
        }))
    }

    fn void(&self, reference: &str, key: &str) -> Answer<()> {
        self.capture(reference, 0, "", key)
    }

    fn sync(&self, reference: &str, now: DateTime<Utc>) -> Answer<ProcessorView> {
        let view = match Reference::decode(reference) {
            None => Err(ProcessorError::Refused("unknown reference".into())),
            Some(r) => {
                let settled = |amount| {
                    if r.capture {
                        ProcessorView::Captured { amount }
                    } else {
                        ProcessorView::Authorized { amount }
                    }
                };
                Ok(match r.behaviour {
                    TestBehaviour::Async | TestBehaviour::Review
                        if now < r.at + self.async_delay =>
                    {
                        ProcessorView::Pending
                    }
                    TestBehaviour::Async | TestBehaviour::Review | TestBehaviour::Timeout => {
                        settled(r.amount)
                    }
                    // Reports a smaller amount than was asked: no transition explains that.
                    TestBehaviour::SyncMismatch => ProcessorView::Captured {
                        amount: r.amount - 1,
                    },
                    _ => ProcessorView::Unchanged,
                })
            }
        };
        Box::pin(future::ready(view))
    }

    fn refund(
        &self,
        reference: &str,
        amount: i64,
        _currency: &str,
        now: DateTime<Utc>,
        _key: &str,
    ) -> Answer<RefundResult> {
        let result = match Reference::decode(reference) {
            None => Err(ProcessorError::Refused("unknown reference".into())),
            // Cards whose refunds fail answer "pending", and fail once the delay has passed.
            Some(r) => Ok(RefundResult {
                reference: Reference {
                    behaviour: r.behaviour,
                    amount,
                    capture: true,
                    at: now,
                }
                .encode()
                .replacen("sbx_", "sbxr_", 1),
                status: if r.behaviour == TestBehaviour::RefundFails {
                    RefundStatus::Pending
                } else {
                    RefundStatus::Succeeded
                },
            }),
        };
        Box::pin(future::ready(result))
    }

    fn sync_refund(&self, refund_reference: &str, now: DateTime<Utc>) -> Answer<RefundResult> {
        let decoded = refund_reference
            .strip_prefix("sbxr_")
            .and_then(|rest| Reference::decode(&format!("sbx_{rest}")));
        let result = match decoded {
            None => Err(ProcessorError::Refused("unknown refund reference".into())),
            Some(r) => Ok(RefundResult {
                reference: refund_reference.to_owned(),
                status: match r.behaviour {
                    TestBehaviour::RefundFails if now < r.at + self.async_delay => {
                        RefundStatus::Pending
                    }
                    TestBehaviour::RefundFails => {
                        RefundStatus::Failed("the card's issuer refused the refund".into())
                    }
                    _ => RefundStatus::Succeeded,
                },
            }),
        };
        Box::pin(future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_trip() {
        let at = Utc.timestamp_millis_opt(1_790_000_000_123).unwrap();
        let r = Reference {
            behaviour: TestBehaviour::PartialAuthorization,
            amount: 250,
            capture: true,
            at,
        }
        .encode();
        let d = Reference::decode(&r).unwrap();
        assert_eq!(
            (d.behaviour, d.amount, d.capture, d.at),
            (TestBehaviour::PartialAuthorization, 250, true, at)
        );
        assert!(Reference::decode("sbx_nonsense").is_none());
    }
}
