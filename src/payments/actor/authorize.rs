//! Confirming: routing, authorizing at the chosen processor (and the fallbacks), declines, the
//! 3-D Secure challenge and its answer, saving the card.

use super::*;
use crate::stored::Json;
use payd_model::payments::Trigger;

/// Authorizes through routing (and saves the card, spends a single-use mandate).
pub(super) async fn confirm(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: &Option<StoredCard>,
    secret: &Option<SecretCard>,
    return_url: &Option<String>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    machine::check_confirm(&state)?;
    let card = match card {
        Some(card) => Some(card.clone()),
        None => card_of(m),
    };
    let card = card.ok_or(PaymentError::PaymentMethodRequired)?;
    // An off-session charge re-checks its mandate here, where a revoke cannot slip in
    // between the check and the commit (the mandate's version guards the commit).
    let mandate = match (&m.mandate_id, m.off_session) {
        (Some(id), true) => {
            let mandate = customers::store::find_mandate(&deps.db, id)
                .await?
                .ok_or(PaymentError::MandateNotFound)?;
            check_mandate(&mandate, &Money::new(m.amount, &m.currency), now)?;
            Some(mandate)
        }
        _ => None,
    };
    let (base, authorized) = authorize(deps, m, &card, secret.clone(), now).await?;
    confirmed(deps, &base, card, mandate, authorized, return_url).await
}

/// Commits a confirm's answer: the payment's new state, its attempts, the saved card and its
/// mandate, the single-use mandate it spent. An authorization still pending keeps its intent,
/// so that its reconciliation can tell a processor that never got the request.
pub(super) async fn confirmed(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: StoredCard,
    mandate: Option<mandate::Model>,
    authorized: Authorized,
    return_url: &Option<String>,
) -> Result<Done, PaymentError> {
    let Authorized {
        chosen,
        result,
        attempts,
        can_save,
        intent,
    } = authorized;
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    let next = machine::confirm(&state, result.outcome, now);
    let mut after = store::with_state(m, &next, now);
    let approved = matches!(result.outcome, Authorization::Approved { .. });
    // Saved at the processor too: the saved card charges there by its token.
    let card = StoredCard {
        token: result.token.clone().or(card.token),
        ..card
    };
    let save = saved_card(m, &mut after, &card, can_save)?;
    // Invariant: a single-use mandate is spent by the charge it approved, in the same commit.
    let spend_mandate =
        mandate.filter(|md| approved && md.mandate_type == payd_model::mandates::Kind::SingleUse);
    after.payment_method = Some(Json(card));
    after.processor = Some(chosen);
    after.processor_reference = result.reference.clone();
    after.last_error = last_error(&result);
    after.capture_before = capture_window(deps, &next, &result, now);
    if return_url.is_some() {
        after.return_url = return_url.clone();
    }
    let changes = Changes {
        attempts,
        save,
        spend_mandate,
        intent: intent.filter(|_| result.outcome == Authorization::Pending),
        ..Changes::of(Trigger::Confirm)
    };
    record_outcome(deps, m, after, changes).await
}

/// The buyer's answer to a 3-D Secure challenge.
pub(super) async fn complete_challenge(
    deps: &PaymentDeps,
    m: &payment::Model,
    approve: &bool,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(m));
    machine::check_challenge(&state)?;
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let intent = Intent::Challenge { approve: *approve };
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor
        .complete_challenge(&reference, *approve, &challenge_return(deps, m), now)
        .await;
    challenged(deps, &base, answer).await
}

/// Whether the processor's answer lets the payment save its card: a card the processor accepts
/// for later charges; at a processor that keeps cards itself (Stripe), only one it saved (once
/// the payment is approved: never a declined card, nor one still waiting for 3-D Secure).
pub(super) fn saves(processor: &dyn Processor, card: &StoredCard, result: &AuthResult) -> bool {
    processor.can_save(card) && (!processor.keeps_cards() || result.token.is_some())
}

/// The card a payment saves for its customer (`setup_future_usage`), with the mandate it asked
/// for (its id set on `after`), when `saves`.
fn saved_card(
    m: &payment::Model,
    after: &mut payment::Model,
    card: &StoredCard,
    saves: bool,
) -> Result<Option<SaveCard>, PaymentError> {
    let (Some(customer_id), Some(_), true) = (&m.customer_id, &m.setup_future_usage, saves) else {
        return Ok(None);
    };
    let mandate = m.mandate_request.as_ref().map(|r| r.0.clone());
    let mandate_id = mandate.as_ref().map(|_| crate::ids::MandateId::new());
    if mandate_id.is_some() {
        after.mandate_id = mandate_id.clone();
    }
    Ok(Some(SaveCard {
        customer_id: customer_id.clone(),
        card: card.clone(),
        mandate: mandate.zip(mandate_id),
    }))
}

/// Commits the processor's answer to a completed challenge (an authorization, or a decline),
/// and saves the card of an approved one that asked for it.
/// A refusal clears its intent and is answered; no answer leaves it to be reconciled.
pub(super) async fn challenged(
    deps: &PaymentDeps,
    base: &payment::Model,
    answer: Result<AuthResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), crate::payments::api::state_of(base));
    let result = match answer {
        Ok(result) => result,
        Err(e) => return Err(not_done(deps, base, Trigger::ChallengeRefused, e).await),
    };
    let next = machine::complete_challenge(&state, result.outcome, now);
    let mut after = store::with_state(base, &next, now);
    after.last_error = last_error(&result);
    after.capture_before = capture_window(deps, &next, &result, now);
    let approved = matches!(result.outcome, Authorization::Approved { .. });
    let save = match card_of(base) {
        Some(card) if approved => {
            let card = StoredCard {
                token: result.token.clone().or(card.token),
                ..card
            };
            after.payment_method = Some(Json(card.clone()));
            let (account, _) = processor_of(base)?;
            let processor = deps.processor_for(base, &account).await?;
            saved_card(base, &mut after, &card, saves(&*processor, &card, &result))?
        }
        _ => None,
    };
    let changes = Changes {
        save,
        ..Changes::of(Trigger::Challenge)
    };
    record_outcome(deps, base, after, changes).await
}

/// Until when an approved authorization may be captured: what the processor says (Stripe's
/// `capture_before`), else payd's own window; none unless the payment is capturable.
fn capture_window(
    deps: &PaymentDeps,
    next: &machine::State,
    result: &AuthResult,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let ours = deps.capture_before(next, now);
    ours.and(result.capture_before).or(ours)
}

/// What routing and the processors decided about a confirm.
pub(super) struct Authorized {
    /// The account whose answer counts.
    pub(super) chosen: String,
    pub(super) result: AuthResult,
    /// Every processor tried, in order.
    pub(super) attempts: Vec<payment_attempt::Model>,
    /// Whether the chosen processor keeps the card for later charges.
    pub(super) can_save: bool,
    /// The intent recorded for the chosen processor's attempt (none for a stateless one).
    pub(super) intent: Option<Intent>,
}

/// A decline decided without asking any processor, because none can be asked.
pub(super) struct Declined<'a> {
    /// The account the attempt is recorded against.
    pub(super) processor: &'a str,
    pub(super) retryable: bool,
    pub(super) code: &'static str,
    pub(super) message: &'static str,
    /// Why routing chose nothing.
    pub(super) reason: &'static str,
}

impl Declined<'_> {
    fn authorized(
        self,
        m: &payment::Model,
        number: i32,
        card: &StoredCard,
        now: DateTime<Utc>,
        can_save: bool,
    ) -> Authorized {
        let result = AuthResult {
            reference: None,
            outcome: Authorization::Declined {
                retryable: self.retryable,
            },
            error: Some((self.code.into(), self.message.into())),
            token: None,
            resend: None,
            capture_before: None,
        };
        let decision = RoutingDecision {
            algorithm: "none".into(),
            rule: None,
            candidates: vec![],
            chosen: self.processor.to_owned(),
            reason: self.reason.into(),
        };
        let attempt = attempt_row(m, number, self.processor, card, &decision, now);
        Authorized {
            chosen: self.processor.to_owned(),
            attempts: vec![answered(attempt, m, &result)],
            result,
            can_save,
            intent: None,
        }
    }
}

/// Routes the authorization and falls back to the next processor after a retryable decline
/// or an unreachable processor. Each attempt at a processor that keeps state is recorded as
/// an intent before it is sent (with the answers of the attempts before it); returns the row
/// the last intent left, and what was decided.
pub(super) async fn authorize(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: &StoredCard,
    secret: Option<SecretCard>,
    now: DateTime<Utc>,
) -> Result<(payment::Model, Authorized), PaymentError> {
    let first = store::next_attempt_number(&deps.db, m).await?;
    let (enabled, accounts, rules) = match routable(deps, m, card, first, now).await? {
        Ok(routable) => routable,
        Err(declined) => return Ok((m.clone(), declined)),
    };
    let decision = routing::decide(
        &rules,
        &accounts,
        &Facts {
            payment_id: &m.id,
            amount: m.amount,
            currency: &m.currency,
            brand: card.brand,
        },
    );
    first_takes(deps, m, &decision, &enabled, secret.is_some())?;
    let mut base = m.clone();
    let mut attempts: Vec<payment_attempt::Model> = Vec::new();
    let mut previous: Option<String> = None;
    let mut last = None;
    for candidate in &decision.candidates {
        // Candidates were routed among the accounts that resolve.
        let account = enabled.iter().find(|a| &a.name == candidate);
        let Some(processor) = deps.resolve(account) else {
            continue;
        };
        // A fallback that may not be sent the number typed in is not tried.
        if secret.is_some() && !processor.takes_card_numbers() {
            continue;
        }
        // Each attempt its own number, and so its own processor reference.
        let number = first + attempts.len() as i32;
        let this_decision = match &previous {
            None => decision.clone(),
            Some(p) => routing::fallback(&decision, p, candidate),
        };
        let reference = format!("{}.{number}.{candidate}", m.id);
        let attempt = attempt_row(m, number, candidate, card, &this_decision, now);
        let intent = Intent::Authorize {
            attempt_id: attempt.id.clone(),
            account: candidate.clone(),
            reference: reference.clone(),
            at: now,
            resend: None,
        };
        let mut after = base.clone();
        after.payment_method = Some(Json(card.clone()));
        let recorded = [attempts.as_slice(), std::slice::from_ref(&attempt)].concat();
        base = intend(deps, &base, &*processor, after, intent.clone(), recorded).await?;
        let save = save_for(deps, m, account).await?;
        let request = auth_request(deps, m, reference, card, &secret, save, now);
        let account_label = account.map_or(routing::DEFAULT_PROCESSOR, |a| a.id.as_str());
        let result = match processor.authorize(request).await {
            Ok(r) => r,
            Err(ProcessorError::Unavailable(why)) => unreached(why),
            Err(e) => {
                count_outcome(account_label, "unknown");
                return Err(e.into());
            }
        };
        count_outcome(account_label, outcome_label(&result));
        attempts.push(answered(attempt, m, &result));
        let retry = matches!(
            result.outcome,
            Authorization::Declined { retryable: true } | Authorization::Refused
        );
        let intent = processor
            .keeps_state()
            .then(|| intent.resending(result.resend.clone()));
        let can_save = saves(&*processor, card, &result);
        last = Some((candidate.clone(), result, can_save, intent));
        if !retry {
            break;
        }
        previous = Some(candidate.clone());
    }
    let (chosen, result, can_save, intent) =
        last.ok_or_else(|| PaymentError::Internal("no processor candidate".into()))?;
    let authorized = Authorized {
        chosen,
        result,
        attempts,
        can_save,
        intent,
    };
    Ok((base, authorized))
}

/// What one attempt asks its processor.
fn auth_request(
    deps: &PaymentDeps,
    m: &payment::Model,
    reference: String,
    card: &StoredCard,
    secret: &Option<SecretCard>,
    save: Option<SaveFor>,
    now: DateTime<Utc>,
) -> AuthRequest {
    AuthRequest {
        reference,
        payment_id: m.id.to_string(),
        amount: m.amount,
        currency: m.currency.clone(),
        capture: m.capture_method == CaptureMethod::Automatic,
        partial_allowed: m.enable_partial_authorization,
        card: card.clone(),
        secret: secret.clone(),
        save,
        off_session: m.off_session,
        return_url: challenge_return(deps, m),
        now,
    }
}

/// Where a processor's 3-D Secure page sends the buyer back to: payd's
/// `/checkout/{payment_id}/challenge/return`.
pub(super) fn challenge_return(deps: &PaymentDeps, m: &payment::Model) -> String {
    let page = crate::payments::api::buyer_path(&m.id, "/challenge/return", &m.client_secret);
    format!("{}{page}", deps.public_url.trim_end_matches('/'))
}

/// `payd_processor_outcomes_total{account, outcome}`: each authorization attempt's outcome by
/// processor account (its id; `sandbox` for a shop's implicit sandbox). One series per account
/// and outcome: a deployment's accounts number its shops' processors, a few per shop.
fn count_outcome(account: &str, outcome: &'static str) {
    metrics::counter!("payd_processor_outcomes_total", "account" => account.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// The `outcome` label of an attempt's answer: `approved`, `declined`, `challenge`, `review`,
/// `refused` (the account may not take this request), `unavailable` (not sent, or no answer
/// came: the circuit is open or the processor cannot be reached) or `unknown` (sent, and its
/// outcome is not known yet).
fn outcome_label(result: &AuthResult) -> &'static str {
    match (&result.outcome, &result.error) {
        (Authorization::Approved { .. }, _) => "approved",
        (Authorization::Declined { .. }, Some((code, _))) if code == UNAVAILABLE => "unavailable",
        (Authorization::Declined { .. }, _) => "declined",
        (Authorization::ChallengeRequired, _) => "challenge",
        (Authorization::ReviewRequired, _) => "review",
        (Authorization::Pending, _) => "unknown",
        (Authorization::Refused, _) => "refused",
    }
}

/// The error code of an attempt that never reached its processor.
const UNAVAILABLE: &str = "processor_unavailable";

/// The answer of an attempt whose request never left payd: a retryable decline, so routing
/// falls back.
fn unreached(why: String) -> AuthResult {
    AuthResult {
        reference: None,
        outcome: Authorization::Declined { retryable: true },
        error: Some((UNAVAILABLE.into(), why)),
        token: None,
        resend: None,
        capture_before: None,
    }
}

/// Refuses (400 naming the field) what the first routed processor cannot take as it is: an
/// amount its units cannot hold (never rounded), or a card typed in when it may not be sent
/// card numbers (a Stripe account not approved for raw card data, which takes a card only
/// from Stripe.js). A fallback that cannot take them declines its attempt, or is skipped.
fn first_takes(
    deps: &PaymentDeps,
    m: &payment::Model,
    decision: &RoutingDecision,
    enabled: &[processor_account::Model],
    typed_in: bool,
) -> Result<(), PaymentError> {
    let first = decision
        .candidates
        .first()
        .and_then(|c| enabled.iter().find(|a| &a.name == c));
    let Some(processor) = deps.resolve(first) else {
        return Ok(());
    };
    takes_amount(&*processor, m.amount, &m.currency)?;
    if typed_in && !processor.takes_card_numbers() {
        return Err(PaymentError::NotForProcessor {
            param: "payment_method_data.card",
            message: "the shop's Stripe account takes cards from Stripe.js only (payment_method_data.stripe): card numbers need raw_card_data on the account, which Stripe must approve".into(),
        });
    }
    Ok(())
}

/// The shop's accounts this payment may use, the names of those available now and the
/// shop's routing rules; or the decline when none is.
async fn routable(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: &StoredCard,
    first: i32,
    now: DateTime<Utc>,
) -> Result<Routable, PaymentError> {
    let (enabled, rules) = serving(deps, m).await?;
    // A card a processor holds and payd has no number of (a Stripe PaymentMethod) is charged at
    // that processor account only.
    let enabled: Vec<processor_account::Model> = enabled
        .into_iter()
        .filter(|a| card.token.as_ref().is_none_or(|t| t.account == a.id))
        .collect();
    if enabled.is_empty() && card.token.is_some() {
        let declined = Declined {
            processor: "none",
            retryable: false,
            code: "no_processor",
            message: "the processor account that holds the card cannot serve the payment",
            reason: "the account the card's token belongs to is not enabled in this mode",
        };
        return Ok(Err(declined.authorized(m, first, card, now, false)));
    }
    if enabled.is_empty() && !m.test_mode {
        let declined = Declined {
            processor: "none",
            retryable: false,
            code: "no_processor",
            message: "the shop has no processor for live payments",
            reason: "no processor account that serves live payments is enabled",
        };
        return Ok(Err(declined.authorized(m, first, card, now, false)));
    }
    let accounts = available(deps, &enabled);
    if accounts.is_empty() && !enabled.is_empty() {
        let declined = Declined {
            processor: &enabled[0].name,
            retryable: true,
            code: "processor_unavailable",
            message: "no processor of the shop is available now",
            reason: "every processor's circuit is open",
        };
        let can_save = deps
            .resolve(Some(&enabled[0]))
            .is_some_and(|p| p.can_save(card));
        return Ok(Err(declined.authorized(m, first, card, now, can_save)));
    }
    Ok(Ok((enabled, accounts, rules)))
}

/// The shop's accounts that may serve the payment (enabled, approved, of its mode) and its
/// mode's routing rules.
async fn serving(
    deps: &PaymentDeps,
    m: &payment::Model,
) -> Result<(Vec<processor_account::Model>, routing::RoutingRules), PaymentError> {
    // Invariant: a payment is served only by accounts of its own mode, by its mode's rules: a
    // live payment never reaches a test account or the sandbox (neither the implicit one of a
    // shop without accounts nor a sandbox account), a test payment never a live account.
    let read = processor_accounts::accounts_and_rules(&deps.db, &m.profile_id, m.test_mode);
    let key = routing_key(&m.profile_id, m.test_mode);
    let routing = deps.routing.get_or_read(&key, read).await?;
    let Some((accounts, rules)) = routing.as_deref() else {
        return Ok((Vec::new(), routing::RoutingRules::default()));
    };
    let enabled = accounts
        .iter()
        .filter(|a| a.enabled && a.approval == connect::Approval::Approved)
        .filter(|a| connect::serves(a, m.test_mode))
        .cloned()
        .collect();
    Ok((enabled, rules.clone()))
}

/// The names of the accounts routing may choose now: an open circuit takes its processor out
/// until it recovers.
fn available(deps: &PaymentDeps, enabled: &[processor_account::Model]) -> Vec<String> {
    enabled
        .iter()
        .filter(|a| deps.resolve(Some(a)).is_some_and(|p| p.available()))
        .map(|a| a.name.clone())
        .collect()
}

/// Where the buyer completes the payment's 3-D Secure (payd's page when it waits for none).
pub async fn challenge(deps: &PaymentDeps, m: &payment::Model) -> Result<Challenge, PaymentError> {
    if m.status != Status::RequiresCustomerAction {
        return Ok(Challenge::Here);
    }
    let Ok((account, reference)) = processor_of(m) else {
        return Ok(Challenge::Here);
    };
    let processor = deps.processor_for(m, &account).await?;
    Ok(processor.challenge(&reference).await?)
}

/// The account a payment would be sent to first if its buyer paid now, its card's brand not
/// yet known, with its processor: what the hosted checkout builds its card form for.
pub async fn first_account(
    deps: &PaymentDeps,
    m: &payment::Model,
) -> Result<Option<(processor_account::Model, Arc<dyn Processor>)>, PaymentError> {
    let (enabled, rules) = serving(deps, m).await?;
    let facts = Facts {
        payment_id: &m.id,
        amount: m.amount,
        currency: &m.currency,
        brand: crate::processors::model::Brand::Unknown,
    };
    let decision = routing::decide(&rules, &available(deps, &enabled), &facts);
    let first = decision
        .candidates
        .first()
        .and_then(|c| enabled.iter().find(|a| &a.name == c));
    Ok(first.and_then(|a| deps.resolve(Some(a)).map(|p| (a.clone(), p))))
}

/// The routing cache's key of a shop's configuration in one mode.
fn routing_key(profile_id: &str, test_mode: bool) -> String {
    let mode = if test_mode { "test" } else { "live" };
    format!("{profile_id}/{mode}")
}

/// What `routable` finds: the enabled accounts, the available ones' names and the rules; or
/// the decline.
type Routable = Result<
    (
        Vec<processor_account::Model>,
        Vec<String>,
        routing::RoutingRules,
    ),
    Authorized,
>;

/// The customer a payment saves its card for, with the customer it already has at the
/// account (a processor that keeps cards files them all under one).
pub(super) async fn save_for(
    deps: &PaymentDeps,
    m: &payment::Model,
    account: Option<&processor_account::Model>,
) -> Result<Option<SaveFor>, PaymentError> {
    let (Some(customer_id), Some(_)) = (&m.customer_id, &m.setup_future_usage) else {
        return Ok(None);
    };
    let known_customer = match account {
        Some(a) => customers::store::processor_customer(&deps.db, customer_id, &a.id).await?,
        None => None,
    };
    Ok(Some(SaveFor {
        customer_id: customer_id.to_string(),
        known_customer,
        off_session: m.setup_future_usage == Some(payd_model::payments::FutureUsage::OffSession),
    }))
}
