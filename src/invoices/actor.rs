//! The invoice actor: one per invoice id. It serializes every change of its invoice — edit,
//! delete, finalize, void, mark paid or uncollectible, the credit notes against it — and
//! commits each with a compare-and-set on the row's version.
//!
//! Finalize and a credit note take the next number of their series in the same commit, under
//! a compare-and-set of the series' counter: when another invoice took that number first, the
//! actor reads the counter again and retries, so numbers are neither shared nor skipped. The
//! PDF is rendered after the commit, off the actor's thread, and kept once; a crash between the
//! two leaves a job that renders it.

use actix::Message;
use chrono::{DateTime, Days, NaiveDate, Utc};
use payd_entity::{invoice, invoice_pdf};
use sea_orm::DbErr;

use super::{
    api::{self, Party},
    machine::{self, CreditAsk, Kind, Refusal, Status},
    pdf, settings, store,
    store::CommitError,
    tax::Place,
};
use crate::commit::Db;
use crate::fields::Metadata;
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    clock::{SharedClock, Timeline},
    commit::{self, Change},
    conflict::Conflict,
    row_actor::{Row, RowActor},
    wake::Wake,
};

/// How often finalize reads the counter again after losing its number to another invoice.
const NUMBER_TRIES: usize = 1_000;

pub struct InvoiceDeps {
    pub db: Db,
    pub clock: SharedClock,
    pub wake: Wake,
}

#[derive(Debug, thiserror::Error)]
pub enum InvoiceError {
    #[error("no such invoice")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the amounts overflow")]
    Overflow,
    #[error("the invoice was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    #[error("the PDF could not be rendered: {0}")]
    Render(String),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<CommitError> for InvoiceError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Refused(Conflict::PaymentRefunded) => Refusal::PaymentRefunded.into(),
            CommitError::LostRace => InvoiceError::LostRace,
            CommitError::Refused(c) => InvoiceError::Conflict(c),
            CommitError::Db(e) => InvoiceError::Db(e),
        }
    }
}

pub use super::api::Patch;

#[derive(Debug, Clone)]
pub enum Command {
    Update(Box<Patch>),
    Delete,
    Finalize,
    Void,
    MarkPaid,
    MarkUncollectible,
    CreditNote {
        ask: CreditAsk,
        reason: String,
        memo: Option<String>,
        metadata: Metadata,
    },
    /// Renders and keeps the PDF of a finalized invoice if it has none.
    RenderPdf,
}

/// A command's result: the invoice as it now is, the credit note it issued, its PDF.
#[derive(Debug, Clone)]
pub struct Done {
    pub invoice: invoice::Model,
    pub credit_note: Option<invoice::Model>,
    pub pdf: Option<invoice_pdf::Model>,
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Done, InvoiceError>")]
pub struct Exec {
    /// `None`: payd itself (a job).
    pub scope: Option<Scope>,
    pub command: Command,
    /// The timeline it was sent on (see `clock`).
    pub timeline: Timeline,
}

/// The registry of invoice actors.
pub type Invoices = payd_actors::Registry<RowActor<InvoiceRow>>;

/// An invoice's actor (one per invoice): how its row is found and how its commands run.
pub struct InvoiceRow;

impl Row for InvoiceRow {
    const KIND: &'static str = "invoice";
    type Model = invoice::Model;
    type Deps = InvoiceDeps;
    type Error = InvoiceError;
    type Done = Done;
    type Exec = Exec;
    type Id = crate::ids::InvoiceId;

    fn db(deps: &InvoiceDeps) -> &Db {
        &deps.db
    }

    async fn find(db: &Db, id: &crate::ids::InvoiceId) -> Result<Option<invoice::Model>, DbErr> {
        store::find(db, id).await
    }

    fn not_found() -> InvoiceError {
        InvoiceError::NotFound
    }

    fn is_not_found(error: &InvoiceError) -> bool {
        matches!(error, InvoiceError::NotFound)
    }

    fn owner(m: &invoice::Model) -> (&crate::ids::MerchantId, bool) {
        (&m.merchant_id, m.test_mode)
    }

    fn timeline(msg: &Exec) -> &Timeline {
        &msg.timeline
    }

    async fn exec(
        deps: &InvoiceDeps,
        current: invoice::Model,
        msg: Exec,
    ) -> (invoice::Model, Result<Done, InvoiceError>) {
        if let Some(scope) = &msg.scope {
            if !store::visible(&current, scope) {
                return (current, Err(InvoiceError::NotFound));
            }
        }
        commit::decide_fresh(
            current,
            async |m: &invoice::Model| step(deps, m, &msg.command).await,
            |result, m| match result {
                Err(InvoiceError::LostRace | InvoiceError::Refused(_)) => true,
                Ok(done) => done.invoice.version == m.version,
                Err(_) => false,
            },
            async |m: &invoice::Model| Ok(store::find(&deps.db, &m.id).await?),
            |done: &Done| &done.invoice,
            || InvoiceError::NotFound,
        )
        .await
    }
}

async fn step(
    deps: &InvoiceDeps,
    m: &invoice::Model,
    command: &Command,
) -> Result<Done, InvoiceError> {
    let now = deps.clock.now();
    let (kind, status) = (m.kind, m.status);
    let mut after = m.clone();
    after.updated_at = now;
    match command {
        Command::Update(patch) => {
            machine::edit(status, "edited")?;
            apply(&mut after, patch);
            price(&deps.db, &mut after, now).await?;
        }
        Command::Delete => {
            machine::edit(status, "deleted")?;
            after.status = Status::Deleted;
            after.source_key = None;
        }
        Command::Finalize => return finalize(deps, m, now).await,
        Command::Void => {
            after.status = machine::void(kind, status, m.amount_paid, m.amount_credited)?;
            after.voided_at = Some(now);
            after.source_key = None;
        }
        Command::MarkPaid => {
            after.status = machine::mark_paid(kind, status)?;
            after.amount_paid = m.total - m.amount_credited.min(m.total);
            after.paid_at = Some(now);
        }
        Command::MarkUncollectible => {
            after.status = machine::mark_uncollectible(kind, status)?;
        }
        Command::CreditNote {
            ask,
            reason,
            memo,
            metadata,
        } => return credit_note(deps, m, ask, reason, memo, metadata, now).await,
        Command::RenderPdf => {
            let pdf = match m.finalized_at {
                Some(_) => Some(render(deps, m, now).await?),
                None => None,
            };
            return Ok(Done {
                invoice: m.clone(),
                credit_note: None,
                pdf,
            });
        }
    }
    let mut change = Change::at(now).write(store::cas(m, &mut after));
    if after.status != m.status && after.status == Status::Void {
        change = change.event(store::event(&after, "merchant_invoice_voided")?);
    }
    let committed = commit::commit(&deps.db, change).await?;
    if committed.deliveries > 0 {
        deps.wake.now();
    }
    Ok(Done {
        invoice: after,
        credit_note: None,
        pdf: None,
    })
}

fn apply(after: &mut invoice::Model, patch: &Patch) {
    if let Some(lines) = &patch.lines {
        after.lines = Json(lines.clone());
    }
    if let Some(c) = &patch.currency {
        after.currency = c.clone();
    }
    if let Some(c) = &patch.customer_id {
        after.customer_id = Some(c.clone());
    }
    if let Some(b) = &patch.buyer {
        after.buyer = Some(Json(b.clone()));
    }
    if let Some(memo) = &patch.memo {
        after.memo = Some(memo.clone());
    }
    if let Some(d) = patch.due_date {
        after.due_date = Some(d.to_string());
    }
    if let Some(md) = &patch.metadata {
        after.metadata = Json(md.clone());
    }
}

/// The buyer an invoice bills: the one given, else its customer's name, email and address.
pub async fn buyer_of(db: &Db, m: &invoice::Model) -> Result<Option<Party>, DbErr> {
    if let Some(b) = &m.buyer {
        return Ok(Some(b.0.clone()));
    }
    let Some(customer_id) = &m.customer_id else {
        return Ok(None);
    };
    let scope = Scope::whole(&m.merchant_id, m.test_mode);
    let c = crate::owned::find_owned(db, customer_id, &scope)
        .await?
        .filter(|c| c.redacted_at.is_none());
    let Some(c) = c else {
        return Ok(None);
    };
    let address = c.address.map(|a| a.0);
    Ok(Some(Party {
        name: c.name.unwrap_or_default(),
        email: c.email,
        country: address.as_ref().and_then(|a| a.country.clone()),
        address,
        region: None,
        tax_id: None,
    }))
}

/// Prices a draft's lines by the tax rules (a payment's and a cycle's lines keep the tax they
/// were charged with) and sums them.
pub async fn price(
    db: &Db,
    after: &mut invoice::Model,
    at: DateTime<Utc>,
) -> Result<(), InvoiceError> {
    let mut lines = after.lines.0.clone();
    // A payment's and a cycle's lines keep the tax they were charged with.
    if after.payment_id.is_none() && after.cycle_id.is_none() {
        let buyer = buyer_of(db, after).await?;
        let place = Place {
            country: buyer.as_ref().and_then(|b| b.country.clone()),
            region: buyer.and_then(|b| b.region),
        };
        let shop =
            settings::Owned::of(&after.merchant_id, Some(&after.profile_id), after.test_mode);
        let rules = settings::rules_for(db, &shop).await?;
        lines = machine::reprice(&lines, &rules, &place, at).ok_or(InvoiceError::Overflow)?;
    }
    let t = machine::totals(&lines).ok_or(InvoiceError::Overflow)?;
    after.lines = Json(lines);
    (after.subtotal, after.tax, after.total) = (t.subtotal, t.tax, t.total);
    Ok(())
}

/// A billing cycle was paid (the `subscription_cycle_paid` job): its invoice, if one stands
/// open or uncollectible, is paid, as `mark-paid` makes it.
pub async fn cycle_paid(invoices: &Invoices, cycle_id: &str) -> Result<(), InvoiceError> {
    for m in store::unpaid_of_cycle(&invoices.deps().db, cycle_id).await? {
        let exec = Exec {
            scope: None,
            command: Command::MarkPaid,
            timeline: crate::clock::current(),
        };
        match invoices.send(&m.id, exec).await {
            // Paid or voided meanwhile: nothing left to do.
            Ok(Ok(_)) | Ok(Err(InvoiceError::Refused(_))) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(InvoiceError::Db(DbErr::Custom(e.to_string()))),
        }
    }
    Ok(())
}

/// What was paid of an invoice's source: a payment's capture covers it (refused once anything
/// of it is refunded); a paid billing cycle its amount.
async fn paid_of(deps: &InvoiceDeps, m: &invoice::Model) -> Result<i64, InvoiceError> {
    if let Some(payment_id) = &m.payment_id {
        let payment = crate::payments::store::find(&deps.db, payment_id).await?;
        machine::of_payment(payment.map_or(0, |p| p.amount_refunded))?;
        return Ok(m.total);
    }
    if let Some(cycle_id) = &m.cycle_id {
        let cycle = crate::subscriptions::store::find_cycle(&deps.db, cycle_id).await?;
        if let Some(c) = cycle.filter(|c| c.status == payd_model::subscriptions::CycleStatus::Paid)
        {
            return Ok(c.amount.min(m.total));
        }
    }
    Ok(0)
}

async fn finalize(
    deps: &InvoiceDeps,
    m: &invoice::Model,
    now: DateTime<Utc>,
) -> Result<Done, InvoiceError> {
    machine::edit(m.status, "finalized")?;
    let mut after = m.clone();
    after.updated_at = now;
    price(&deps.db, &mut after, now).await?;
    let paid = paid_of(deps, &after).await?;
    let status = machine::finalize(m.status, after.total, paid)?;
    let shop = settings::Owned::of(&m.merchant_id, Some(&m.profile_id), m.test_mode);
    let settings = settings::effective(&deps.db, &shop).await?;
    let issued = now.date_naive();
    let due = match &m.due_date {
        Some(d) => d.parse::<NaiveDate>().unwrap_or(issued),
        None => issued
            .checked_add_days(Days::new(settings.payment_terms_days.max(0) as u64))
            .unwrap_or(issued),
    };
    if due < issued {
        return Err(Refusal::DueBeforeIssue(due).into());
    }
    let seller = match settings.seller.clone() {
        Some(s) => s,
        None => merchant_as_seller(deps, &m.merchant_id).await?,
    };
    after.buyer = buyer_of(&deps.db, m).await?.map(Json);
    after.seller = Some(Json(seller));
    after.status = status;
    after.amount_paid = paid;
    after.paid_at = (status == Status::Paid).then_some(now);
    after.due_date = Some(due.to_string());
    after.locale = Some(settings.locale);
    after.footer = settings.footer.clone();
    after.finalized_at = Some(now);
    let series = settings.number_prefix.clone();
    let finalized = numbered(deps, m, &series, now, |n| {
        let mut after = after.clone();
        after.number = Some(store::number(&series, n));
        let mut change = Change::at(now).write(store::cas(m, &mut after));
        if let Some(payment_id) = &after.payment_id {
            change = change.write(store::unrefunded(payment_id));
        }
        (after, change)
    })
    .await?;
    let pdf = render(deps, &finalized.0, now).await?;
    Ok(Done {
        invoice: finalized.0,
        credit_note: None,
        pdf: Some(pdf),
    })
}

/// The merchant's name stands for the seller until the settings give one.
async fn merchant_as_seller(deps: &InvoiceDeps, merchant_id: &str) -> Result<Party, DbErr> {
    let id = crate::ids::MerchantId::parse(merchant_id);
    let name = match id {
        Some(id) => crate::accounts::store::find_merchant(&deps.db, &id)
            .await?
            .map(|m| m.name),
        None => None,
    };
    Ok(Party {
        name: name.unwrap_or_default(),
        ..Party::default()
    })
}

/// Commits a change that takes the next number `n` of `series` for a new number bearer
/// (`build(n)` → the bearer and the change around it), its `merchant_invoice_finalized` event
/// and its PDF job; on losing the number to another invoice, reads the counter again. A lost
/// race on the invoice itself is the caller's.
async fn numbered(
    deps: &InvoiceDeps,
    m: &invoice::Model,
    series: &str,
    now: DateTime<Utc>,
    build: impl Fn(i64) -> (invoice::Model, Change),
) -> Result<(invoice::Model, Change), InvoiceError> {
    for _ in 0..NUMBER_TRIES {
        let n = store::next_number(&deps.db, &m.merchant_id, m.test_mode, series).await?;
        let (bearer, around) = build(n);
        let mut change = Change::at(now);
        for w in store::take_number(&m.merchant_id, m.test_mode, series, n) {
            change = change.write(w);
        }
        change = change
            .and(around.clone())
            .event(store::event(&bearer, "merchant_invoice_finalized")?)
            .job(store::pdf_job(&bearer.id, now));
        match commit::commit(&deps.db, change).await {
            Ok(committed) => {
                if committed.deliveries > 0 {
                    deps.wake.now();
                }
                return Ok((bearer, around));
            }
            Err(CommitError::LostRace) => {
                // The invoice itself moved: that is a lost race for the caller to decide on.
                let fresh = store::find(&deps.db, &m.id).await?;
                if fresh.is_none_or(|f| f.version != m.version) {
                    return Err(InvoiceError::LostRace);
                }
                let pause = rand::random_range(0..4u64);
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(InvoiceError::LostRace)
}

async fn credit_note(
    deps: &InvoiceDeps,
    m: &invoice::Model,
    ask: &CreditAsk,
    reason: &str,
    memo: &Option<String>,
    metadata: &Metadata,
    now: DateTime<Utc>,
) -> Result<Done, InvoiceError> {
    let lines = m.lines.0.clone();
    let plan = machine::credit(m.kind, m.status, &lines, ask)?;
    let shop = settings::Owned::of(&m.merchant_id, Some(&m.profile_id), m.test_mode);
    let settings = settings::effective(&deps.db, &shop).await?;
    let mut original = m.clone();
    original.updated_at = now;
    original.lines = Json(plan.invoice_lines.clone());
    original.amount_credited = m.amount_credited + plan.totals.total;
    if m.status == Status::Open
        && machine::amount_due(m.total, m.amount_paid, original.amount_credited) == 0
    {
        original.status = Status::Paid;
        original.paid_at = Some(now);
    }
    let note = invoice::Model {
        id: crate::ids::InvoiceId::new(),
        merchant_id: m.merchant_id.clone(),
        profile_id: m.profile_id.clone(),
        test_mode: m.test_mode,
        kind: Kind::CreditNote,
        status: Status::Issued,
        number: None,
        currency: m.currency.clone(),
        customer_id: m.customer_id.clone(),
        payment_id: m.payment_id.clone(),
        subscription_id: m.subscription_id.clone(),
        cycle_id: m.cycle_id.clone(),
        original_invoice_id: Some(m.id.clone()),
        source_key: None,
        buyer: m.buyer.clone(),
        seller: m.seller.clone(),
        lines: Json(plan.credit_lines.clone()),
        subtotal: plan.totals.subtotal,
        tax: plan.totals.tax,
        total: plan.totals.total,
        amount_paid: 0,
        amount_credited: 0,
        memo: memo.clone(),
        footer: m.footer.clone(),
        reason: Some(reason.to_owned()),
        locale: m.locale,
        due_date: None,
        metadata: Json(metadata.clone()),
        finalized_at: Some(now),
        paid_at: None,
        voided_at: None,
        created_at: now,
        updated_at: now,
        version: 0,
    };
    let series = settings.credit_note_prefix.clone();
    let (issued, _) = numbered(deps, m, &series, now, |n| {
        let mut note = note.clone();
        note.number = Some(store::number(&series, n));
        let mut original = original.clone();
        let change = Change::at(now)
            .write(store::cas(m, &mut original))
            .write(commit::insert(note.clone()));
        (note, change)
    })
    .await?;
    original.version = m.version + 1;
    let pdf = render(deps, &issued, now).await?;
    Ok(Done {
        invoice: original,
        credit_note: Some(issued),
        pdf: Some(pdf),
    })
}

/// The PDF of a finalized invoice or credit note: the one kept, else rendered (off the
/// actor's thread) and kept.
async fn render(
    deps: &InvoiceDeps,
    m: &invoice::Model,
    now: DateTime<Utc>,
) -> Result<invoice_pdf::Model, InvoiceError> {
    if let Some(kept) = store::pdf(&deps.db, &m.id).await? {
        return Ok(kept);
    }
    let original = match &m.original_invoice_id {
        Some(id) => store::find(&deps.db, id).await?.and_then(|o| o.number),
        None => None,
    };
    let doc = api::document(m, original)?;
    let bytes = tokio::task::spawn_blocking(move || pdf::render(&doc))
        .await
        .map_err(|e| InvoiceError::Render(e.to_string()))?
        .map_err(InvoiceError::Render)?;
    Ok(store::keep_pdf(&deps.db, &m.id, bytes, now).await?)
}
