//! What a receiver's answer means and when to try again: the spec's delivery rules as a pure
//! function of the answer, the delivery's failure counts and the schedules.

use chrono::{DateTime, Duration, Utc};
pub use payd_model::webhooks::ErrorKind;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The receiver answered with this status (and perhaps `Retry-After` seconds).
    Status {
        code: u16,
        retry_after: Option<u64>,
    },
    Timeout,
    Network,
    /// Never sent: the URL's host has no address the outbound guard permits.
    Blocked,
}

/// The classification of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Delivered,
    /// Network error, timeout, 5xx, 408, 429, 1xx, 3xx: the transient schedule.
    Transient,
    /// 401, 403: the auth schedule.
    Auth,
    /// Any other 4xx, or an address the guard refuses: not retried.
    Rejected,
}

pub fn classify(answer: Answer) -> Class {
    match answer {
        Answer::Timeout | Answer::Network => Class::Transient,
        Answer::Blocked => Class::Rejected,
        Answer::Status { code, .. } => match code {
            200..=299 => Class::Delivered,
            401 | 403 => Class::Auth,
            408 | 429 => Class::Transient,
            400..=499 => Class::Rejected,
            _ => Class::Transient,
        },
    }
}

/// The error kind recorded with an attempt that did not deliver.
pub fn error_kind(answer: Answer) -> Option<ErrorKind> {
    match (answer, classify(answer)) {
        (_, Class::Delivered) => None,
        (Answer::Timeout, _) => Some(ErrorKind::Timeout),
        (Answer::Network, _) => Some(ErrorKind::Network),
        (Answer::Blocked, _) => Some(ErrorKind::BlockedAddress),
        (_, Class::Auth) => Some(ErrorKind::Auth),
        (_, Class::Rejected) => Some(ErrorKind::Rejected),
        (_, Class::Transient) => Some(ErrorKind::Transient),
    }
}

/// The delivery's state after an automatic attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    pub transient_failures: i32,
    pub auth_failures: i32,
    /// `None`: no further attempt (delivered, rejected, or a schedule ran out).
    pub retry_at: Option<DateTime<Utc>>,
    pub delivered: bool,
}

/// Applies one attempt's answer. `jitter` is a fraction in [-0.1, 0.1] (0 when jitter is off).
pub fn after_attempt(
    answer: Answer,
    transient_failures: i32,
    auth_failures: i32,
    transient: &[u64],
    auth: &[u64],
    now: DateTime<Utc>,
    jitter: f64,
) -> Next {
    let wait = |schedule: &[u64], failures: i32| -> Option<Duration> {
        let secs = *schedule.get(usize::try_from(failures - 1).ok()?)?;
        let ms = (secs as f64 * 1000.0 * (1.0 + jitter)).max(0.0) as i64;
        Some(Duration::milliseconds(ms))
    };
    let mut next = Next {
        transient_failures,
        auth_failures,
        retry_at: None,
        delivered: false,
    };
    match classify(answer) {
        Class::Delivered => next.delivered = true,
        Class::Rejected => {}
        Class::Auth => {
            next.auth_failures += 1;
            next.retry_at = wait(auth, next.auth_failures).map(|d| now + d);
        }
        Class::Transient => {
            next.transient_failures += 1;
            next.retry_at = wait(transient, next.transient_failures).map(|d| {
                let at = now + d;
                // Invariant: a 429's Retry-After is a floor, never shortened by the schedule.
                match answer {
                    Answer::Status {
                        code: 429,
                        retry_after: Some(s),
                    } => at.max(now + Duration::seconds(s.min(86_400) as i64)),
                    _ => at,
                }
            });
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSIENT: [u64; 9] = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400];
    const AUTH: [u64; 6] = [60, 120, 240, 480, 600, 960];

    fn status(code: u16) -> Answer {
        Answer::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn classification_follows_the_spec() {
        for (code, class) in [
            (200, Class::Delivered),
            (204, Class::Delivered),
            (500, Class::Transient),
            (503, Class::Transient),
            (408, Class::Transient),
            (429, Class::Transient),
            (301, Class::Transient),
            (101, Class::Transient),
            (401, Class::Auth),
            (403, Class::Auth),
            (400, Class::Rejected),
            (404, Class::Rejected),
            (410, Class::Rejected),
        ] {
            assert_eq!(classify(status(code)), class, "{code}");
        }
        assert_eq!(classify(Answer::Timeout), Class::Transient);
        assert_eq!(classify(Answer::Network), Class::Transient);
    }

    #[test]
    fn auth_failures_retry_six_times_over_41_minutes() {
        let t0 = crate::clock::wall_now();
        let (mut now, mut auth, mut attempts) = (t0, 0, 1);
        loop {
            let n = after_attempt(status(401), 0, auth, &TRANSIENT, &AUTH, now, 0.0);
            auth = n.auth_failures;
            match n.retry_at {
                Some(at) => {
                    now = at;
                    attempts += 1;
                }
                None => break,
            }
        }
        assert_eq!(attempts, 7, "the first attempt and six retries");
        assert_eq!((now - t0).num_minutes(), 41);
    }

    #[test]
    fn transient_failures_follow_the_schedule_and_retry_after_is_a_floor() {
        let t0 = crate::clock::wall_now();
        let n = after_attempt(status(503), 0, 0, &TRANSIENT, &AUTH, t0, 0.0);
        assert_eq!(n.retry_at, Some(t0 + Duration::seconds(5)));
        let n = after_attempt(
            Answer::Status {
                code: 429,
                retry_after: Some(120),
            },
            0,
            0,
            &TRANSIENT,
            &AUTH,
            t0,
            0.0,
        );
        assert_eq!(n.retry_at, Some(t0 + Duration::seconds(120)));
        let n = after_attempt(
            Answer::Status {
                code: 429,
                retry_after: Some(1),
            },
            1,
            0,
            &TRANSIENT,
            &AUTH,
            t0,
            0.0,
        );
        assert_eq!(n.retry_at, Some(t0 + Duration::seconds(300)));
        let n = after_attempt(status(500), 9, 0, &TRANSIENT, &AUTH, t0, 0.0);
        assert_eq!(n.retry_at, None, "the schedule ran out");
        let n = after_attempt(status(400), 0, 0, &TRANSIENT, &AUTH, t0, 0.0);
        assert_eq!((n.retry_at, n.delivered), (None, false));
        let total: u64 = TRANSIENT.iter().sum();
        assert!(
            (total as f64 / 86400.0 - 3.0).abs() < 0.2,
            "about three days"
        );
    }
}
