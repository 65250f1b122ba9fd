//! Recovering an authorization whose answer was lost: the same request again under the same
//! `Idempotency-Key` while Stripe still keeps its first answer, then the PaymentIntent looked
//! for by its metadata among those the account made while it could have arrived
//! (docs.stripe.com/idempotency, docs.stripe.com/api/payment_intents/list).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    client::Failure, items, pair, retryable, str_of, Form, Inner, AUTHENTICATION_REQUIRED,
};
use crate::processors::{model::ProcessorView, Recovered};

/// How long after it was sent an authorization Stripe shows no trace of is still looked for,
/// beyond the request's timeout: Stripe's lists may lag a request that is still arriving.
pub(super) const RECOVERY_GRACE: chrono::Duration = chrono::Duration::minutes(10);
/// Stripe keeps an idempotency key's first answer for 24 hours (docs.stripe.com/idempotency):
/// a lost authorization is sent again under its key only well within them, never after, when
/// the same request would make a second PaymentIntent.
const RESEND_WITHIN: chrono::Duration = chrono::Duration::hours(23);
/// How far before its sending an authorization's PaymentIntent is looked for (clocks differ).
const CLOCK_SKEW: chrono::Duration = chrono::Duration::minutes(5);
/// How many pages of 100 PaymentIntents made since an authorization was sent are looked
/// through before payd gives up for now (and looks again at the next reconciliation).
const SEARCH_PAGES: usize = 50;

/// What a look for a lost authorization's PaymentIntent found.
enum Search {
    Found(Value),
    /// Every PaymentIntent made since the authorization was sent was looked at.
    Absent,
    /// More were made than payd looks through at once.
    NotYet,
}

impl Inner {
    /// The PaymentIntent sent under `reference` at `at`, by the `payd_reference` in its
    /// metadata, among those the account made while it could have arrived (a list by
    /// `created`, newest first): from a little before it was sent to the end of its recovery
    /// grace, so the window's size does not grow with the attempt's age.
    async fn search(&self, reference: &str, at: DateTime<Utc>) -> Result<Search, Failure> {
        let since = (at - CLOCK_SKEW).timestamp();
        let until =
            (at + RECOVERY_GRACE + CLOCK_SKEW).timestamp() + (self.config.timeout_ms / 1000) as i64;
        let mut after: Option<String> = None;
        for _ in 0..SEARCH_PAGES {
            let mut query = vec![
                pair("limit", 100),
                pair("created[gte]", since),
                pair("created[lte]", until),
            ];
            if let Some(last) = &after {
                query.push(pair("starting_after", last));
            }
            let page = self.get("payment_intents", query).await?;
            let data = items(&page);
            if let Some(found) = data
                .iter()
                .find(|pi| pi["metadata"]["payd_reference"].as_str() == Some(reference))
            {
                return Ok(Search::Found(found.clone()));
            }
            match data.last().and_then(|pi| pi["id"].as_str()) {
                Some(last) if page["has_more"] == Value::Bool(true) => after = Some(last.into()),
                _ => return Ok(Search::Absent),
            }
        }
        Ok(Search::NotYet)
    }

    /// An authorization whose answer was lost: the same request again under the same key
    /// (within Stripe's 24 hours), then its metadata among the PaymentIntents made since.
    pub(super) async fn recover(
        &self,
        reference: &str,
        at: DateTime<Utc>,
        resend: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Recovered, Failure> {
        if reference.starts_with("pi_") {
            let pi = self.payment_intent(reference).await?;
            return self.found(&pi).await;
        }
        let form: Option<Form> = resend.and_then(|f| serde_json::from_str(f).ok());
        if let Some(form) = form.filter(|_| now - at < RESEND_WITHIN) {
            match self.call("payment_intents", Some(reference), &form).await {
                Ok(pi) => return self.found(&pi).await,
                Err(Failure::Card {
                    code,
                    message,
                    intent,
                }) => {
                    // Only an off-session charge is declined `authentication_required`: it
                    // waits for the buyer, as its first answer would have had it.
                    let view = if code == AUTHENTICATION_REQUIRED && intent.is_some() {
                        ProcessorView::AwaitsBuyer
                    } else {
                        ProcessorView::Declined {
                            retryable: retryable(&code),
                        }
                    };
                    return Ok(Recovered {
                        view,
                        reference: intent,
                        error: Some((code, message)),
                        token: None,
                    });
                }
                // Stripe's stored answer is itself unknown (a 500 is kept for 24 hours), or
                // it cannot be asked now: look for the PaymentIntent.
                Err(f) => {
                    tracing::info!(reference, error = ?f, "a lost authorization sent again under its key: no answer yet")
                }
            }
        }
        let view = match self.search(reference, at).await? {
            Search::Found(pi) => return self.found(&pi).await,
            Search::Absent => ProcessorView::Unknown,
            Search::NotYet => ProcessorView::Pending,
        };
        Ok(Recovered {
            view,
            reference: None,
            error: None,
            token: None,
        })
    }

    /// What a PaymentIntent found says of the authorization: its status, its decline, and the
    /// card Stripe saved if it saved one (an approval recovered saves the card as its answer
    /// would have).
    async fn found(&self, pi: &Value) -> Result<Recovered, Failure> {
        let result = self.auth_result(pi).await?;
        Ok(Recovered {
            view: self.view(pi).await?,
            reference: Some(str_of(pi, "id")),
            error: result.error,
            token: result.token,
        })
    }
}
