//! Persistence of payments: the row, its attempts and history, its scheduled jobs, written
//! together in one transaction guarded by the row's `version`.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{payment, payment_attempt, payment_status_history, processor_account, refund};
use payd_model::payments::Trigger;
use sea_orm::{
    sea_query::OnConflict, ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
    IntoActiveModel, PaginatorTrait, QueryFilter, QueryOrder, QueryTrait,
};

use super::{
    api::ListPaymentsRequest,
    intent::Intent,
    machine::{State, Status},
};
pub use crate::commit::CommitError;
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    commit::{self, Change, Event, Job, Write},
    customers, disputes,
    ids::{new_id, MerchantId, ProfileId},
    ledger,
    pagination::{created_between, paginate, List, Page, PageError},
    recovery::RequestKey,
};

/// Scheduled job: expire an unconfirmed payment or a lapsed authorization.
pub const EXPIRY_JOB: &str = "payment_expiry";
/// Scheduled job: ask the processor about a pending payment.
pub const SETTLE_JOB: &str = "payment_settle";
/// Scheduled job: ask the processor about a pending refund (the entity is the refund).
pub const REFUND_SETTLE_JOB: &str = "refund_settle";
/// Scheduled job: the buyer of a captured sandbox payment (card …0259) disputes it.
pub const DISPUTE_OPEN_JOB: &str = "dispute_open";

/// An event a transition announces.
pub struct Announcement {
    pub event_type: &'static str,
    /// `payment_details`, `refund_details`.
    pub content_type: &'static str,
    pub object_id: String,
    /// The object's JSON as the API renders it.
    pub object: String,
}

impl Announcement {
    /// The outbox event of this announcement, for an object of this merchant, shop and mode.
    fn event(self, merchant_id: &MerchantId, profile_id: &ProfileId, test_mode: bool) -> Event {
        Event {
            merchant_id: merchant_id.clone(),
            profile_id: Some(profile_id.clone()),
            test_mode,
            event_type: self.event_type.to_owned(),
            object_id: self.object_id,
            content_type: self.content_type,
            object: self.object,
        }
    }
}

/// A card to save for the payment's customer, and the mandate to create with it.
pub struct SaveCard {
    pub customer_id: crate::ids::CustomerId,
    pub card: crate::processors::StoredCard,
    /// The mandate's terms and its (already chosen) id.
    pub mandate: Option<(super::api::MandateRequest, crate::ids::MandateId)>,
}

/// What a transition writes besides the payment row.
pub struct Changes {
    pub trigger: Trigger,
    pub attempts: Vec<payment_attempt::Model>,
    pub save: Option<SaveCard>,
    /// A single-use mandate this transition's charge used up.
    pub spend_mandate: Option<payd_entity::mandate::Model>,
    /// The processor operation this commit records before sending it; every other commit
    /// clears the payment's pending operation (it records that operation's outcome, or runs
    /// after its reconciliation).
    pub intent: Option<Intent>,
    /// A refund this transition created (version 0) or changed.
    pub refund: Option<refund::Model>,
    /// A dispute this transition opened (announced and given its deadline by the dispute store).
    pub dispute: Option<payd_entity::dispute::Model>,
    /// When the processor will open a dispute on what this transition captured.
    pub dispute_due: Option<DateTime<Utc>>,
    pub events: Vec<Announcement>,
    /// The `Idempotency-Key` of the request this transition serves: its recovery point is set
    /// to the transition's refund, or else its payment.
    pub bind: Option<RequestKey>,
    /// The payment's own insert ([`created`]) when this is the first commit of a payment
    /// created with `confirm: true`: written first, in the same transaction.
    pub created: Option<Created>,
}

impl Changes {
    /// A transition made by `trigger` that writes only the payment; the other writes are set
    /// on it (`Changes { attempts, ..Changes::of(trigger) }`).
    pub fn of(trigger: Trigger) -> Self {
        Self {
            trigger,
            attempts: Vec::new(),
            save: None,
            spend_mandate: None,
            intent: None,
            refund: None,
            dispute: None,
            dispute_due: None,
            events: Vec::new(),
            bind: None,
            created: None,
        }
    }
}

/// A new payment not yet written: what its insert writes besides the row (its lines' writes
/// and its first history row), and the request's `Idempotency-Key`, whose recovery point the
/// payment becomes in the commit that writes it.
#[derive(Debug, Clone)]
pub struct Created {
    writes: Vec<Write>,
    key: Option<RequestKey>,
}

/// Writes the machine's new state into a copy of the row.
pub fn with_state(m: &payment::Model, s: &State, now: DateTime<Utc>) -> payment::Model {
    let mut next = m.clone();
    next.status = s.status;
    next.amount = s.amount;
    next.amount_authorized = s.authorized;
    next.amount_captured = s.captured;
    next.amount_refunded = s.refunded;
    next.confirm_attempts = s.attempts;
    next.captured_at = s.captured_at;
    next.updated_at = now;
    next
}

/// A new payment `m` (version 0), to be written by [`insert`] or by its confirm's first
/// commit ([`Changes::created`]); either names the payment as the recovery point of the
/// request's `Idempotency-Key`.
pub fn created(m: &payment::Model, key: Option<RequestKey>, catalog: Vec<Write>) -> Created {
    let mut writes = catalog;
    writes.push(history(
        &m.id,
        None,
        m.status,
        Trigger::Create,
        m.created_at,
    ));
    Created { writes, key }
}

impl Created {
    /// The change that inserts `row` (the payment as created, or as its first commit leaves
    /// it) with what its creation writes.
    fn insert(self, row: &payment::Model, at: DateTime<Utc>) -> (Change, Option<RequestKey>) {
        let change = Change::at(at)
            .write(commit::insert(row.clone()))
            .write_all(self.writes);
        (change, self.key)
    }
}

/// Writes a new payment alone, as created, with the expiry job it is due.
pub async fn insert(db: &Db, m: &payment::Model, created: Created) -> Result<(), CommitError> {
    let (change, key) = created.insert(m, m.created_at);
    let mut change = change.and(jobs(m, m.created_at, Duration::zero(), Jobs::None));
    if let Some(key) = key {
        change = change.write(key.bind(&m.id));
    }
    commit::commit(db, change).await?;
    Ok(())
}

/// What a commit wrote.
pub struct Committed {
    pub payment: payment::Model,
    pub refund: Option<refund::Model>,
    /// Webhook deliveries queued by its events.
    pub deliveries: usize,
}

/// The row as `commit` writes it: `after` one version above `before`. The payment's events
/// are rendered from this, so that their object carries the version its change commits.
pub fn raised(before: &payment::Model, mut after: payment::Model) -> payment::Model {
    after.version = before.version + 1;
    after
}

/// Replaces the row if nobody wrote since `before` (compare-and-set on `version`), with its
/// history row, attempts, saved card, refund, dispute, events and jobs, in one commit.
pub async fn commit(
    db: &Db,
    before: &payment::Model,
    after: payment::Model,
    changes: Changes,
    settle_delay: Duration,
) -> Result<Committed, CommitError> {
    let mut after = raised(before, after);
    after.pending_operation = changes.intent.clone().map(Json);
    let now = after.updated_at;
    // A payment this commit creates is inserted as the commit leaves it (no compare-and-set:
    // nobody else knows it), and has no jobs yet.
    let (mut change, existing, bind) = match changes.created {
        Some(created) => {
            let (insert, key) = created.insert(&after, now);
            (insert, Jobs::None, changes.bind.or(key))
        }
        None => {
            let cas = Write::Cas(
                payment::Entity::update_many()
                    .set(after.clone().into_active_model().reset_all())
                    .filter(payment::Column::Id.eq(before.id.as_str()))
                    .filter(payment::Column::Version.eq(before.version))
                    .into_query(),
            );
            (Change::at(now).write(cas), Jobs::Unknown, changes.bind)
        }
    };
    if after.status != before.status {
        change = change.write(history(
            &after.id,
            Some(before.status),
            after.status,
            changes.trigger,
            now,
        ));
    }
    for a in changes.attempts {
        change = change.write(attempt(a));
    }
    change = change.and(jobs(&after, now, settle_delay, existing));
    if let Some(save) = changes.save {
        change = change.and(save_card(db, &after, save, now).await?);
    }
    if let Some(mandate) = changes.spend_mandate {
        change = change.and(
            customers::store::set_mandate_status(
                &mandate,
                payd_model::mandates::Status::Inactive,
                now,
            )
            .0,
        );
    }
    let refund = match changes.refund {
        Some(r) => {
            let (refund_change, r) = refund_change(r, now, settle_delay);
            change = change.and(refund_change);
            Some(r)
        }
        None => None,
    };
    let refund_id = refund.as_ref().map(|r| r.id.as_str());
    for w in ledger::store::payment_writes(before, &after, refund_id, now) {
        change = change.write(w);
    }
    if let Some(d) = &changes.dispute {
        change = change.and(disputes::store::insert(d, now));
    }
    if let Some(due) = changes.dispute_due {
        change = change.job(Job::ScheduleIfAbsent {
            kind: DISPUTE_OPEN_JOB,
            entity_id: after.id.to_string(),
            at: due,
        });
    }
    for e in changes.events {
        change = change.event(e.event(&after.merchant_id, &after.profile_id, after.test_mode));
    }
    if let Some(key) = &bind {
        change = change.write(key.bind(refund.as_ref().map_or(&after.id, |r| &r.id)));
    }
    let committed = commit::commit(db, change).await?;
    Ok(Committed {
        payment: after,
        refund,
        deliveries: committed.deliveries,
    })
}

/// Writes a refund whose change leaves its payment as it is (a refund the processor confirmed,
/// or acknowledged as pending): the refund under its own compare-and-set, its settle job and
/// its events. Returns the refund as written and the deliveries queued.
pub async fn commit_refund(
    db: &Db,
    r: refund::Model,
    events: Vec<Announcement>,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<(refund::Model, usize), CommitError> {
    let (mut change, r) = refund_change(r, now, settle_delay);
    for e in events {
        change = change.event(e.event(&r.merchant_id, &r.profile_id, r.test_mode));
    }
    let committed = commit::commit(db, change).await?;
    Ok((r, committed.deliveries))
}

/// Saves the card for the payment's customer (once per fingerprint) and creates its mandate,
/// announcing `mandate_active`. A customer deleted before or meanwhile gets nothing saved.
async fn save_card(
    db: &impl ConnectionTrait,
    p: &payment::Model,
    save: SaveCard,
    now: DateTime<Utc>,
) -> Result<Change, DbErr> {
    let Some(customer) = payd_entity::customer::Entity::find_by_id(save.customer_id.clone())
        .one(db)
        .await?
        .filter(|c| c.redacted_at.is_none())
    else {
        return Ok(Change::at(now));
    };
    let saved = customers::store::find_saved(db, &customer.id, &save.card.fingerprint).await?;
    let mandate = save
        .mandate
        .map(|(terms, id)| customers::store::NewMandate {
            id,
            profile_id: p.profile_id.clone(),
            single_use: terms.single_use,
            amount_limit: terms.amount_limit,
            currency: Some(terms.currency),
            end_at: terms.ends_at,
        });
    Ok(customers::store::save_card(
        &customer, &save.card, saved, mandate, now,
    ))
}

/// The refund as `refund_change` writes it: version 1 when new (version 0), else one up.
/// A refund's events are rendered from this, so that their object carries the version their
/// change commits.
pub fn refund_raised(r: &refund::Model) -> refund::Model {
    refund::Model {
        version: r.version + 1,
        ..r.clone()
    }
}

/// Inserts a new refund or updates a changed one (compare-and-set on its version), and keeps
/// its settle job exactly while it is pending.
fn refund_change(
    current: refund::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> (Change, refund::Model) {
    let r = refund_raised(&current);
    let write = if current.version == 0 {
        commit::insert(r.clone())
    } else {
        let expected = current.version;
        Write::Cas(
            refund::Entity::update_many()
                .set(r.clone().into_active_model().reset_all())
                .filter(refund::Column::Id.eq(r.id.as_str()))
                .filter(refund::Column::Version.eq(expected))
                .into_query(),
        )
    };
    let change = Change::at(now)
        .write(write)
        .job(refund_job(&r, now, settle_delay));
    (change, r)
}

/// A refund's settle job: due after `settle_delay` while it is pending, none once settled.
fn refund_job(r: &refund::Model, now: DateTime<Utc>, settle_delay: Duration) -> Job {
    if r.status.is_open() {
        Job::Schedule {
            kind: REFUND_SETTLE_JOB,
            entity_id: r.id.to_string(),
            at: now + settle_delay,
        }
    } else {
        Job::Cancel {
            kinds: vec![REFUND_SETTLE_JOB],
            entity_id: r.id.to_string(),
        }
    }
}

/// Keeps a still-pending refund's settle job (after a sync that changed nothing).
pub async fn resync_refund_job(
    db: &Db,
    r: &refund::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<(), CommitError> {
    let change = Change::at(now).job(refund_job(r, now, settle_delay));
    commit::commit(db, change).await.map(drop)
}

/// A test-only fault (`sandbox.fail_outcome_commits`): the first commit of a processor's
/// answer to each listed operation fails as a database error would, leaving the intent to its
/// reconciliation.
#[derive(Debug, Default)]
pub struct FailOutcomes(std::sync::Mutex<Vec<String>>);

impl FailOutcomes {
    /// From the setting's comma-separated operations.
    pub fn new(ops: &str) -> Self {
        let ops = ops.split_terminator(',').map(|op| op.trim().to_owned());
        Self(std::sync::Mutex::new(ops.collect()))
    }

    /// Whether this commit of an answer to `op` fails (only the first one does).
    pub fn take(&self, op: &str) -> bool {
        let mut ops = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let found = ops.iter().position(|o| o == op);
        found.map(|i| ops.swap_remove(i)).is_some()
    }
}

/// The payment's refunds, oldest first.
pub async fn refunds_of(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<refund::Model>, DbErr> {
    refund::Entity::find()
        .filter(refund::Column::PaymentId.eq(payment_id))
        .order_by_asc(refund::Column::Id)
        .all(db)
        .await
}

pub async fn find_refund(
    db: &impl ConnectionTrait,
    id: &crate::ids::RefundId,
) -> Result<Option<refund::Model>, DbErr> {
    refund::Entity::find_by_id(id.clone()).one(db).await
}

/// Re-schedules the payment's jobs as its status needs them (after a job that changed
/// nothing, so that its row is not lost).
pub async fn resync_jobs(
    db: &Db,
    m: &payment::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<(), CommitError> {
    let change = jobs(m, now, settle_delay, Jobs::Unknown);
    commit::commit(db, change).await.map(drop)
}

/// Schedules the payment's settle job now: a sync with its processor that the scheduler runs
/// (and runs again after a failure) whatever becomes of the request that asked for it.
pub async fn sync_soon(db: &Db, payment_id: &str, now: DateTime<Utc>) -> Result<(), CommitError> {
    due_now(db, SETTLE_JOB, payment_id, now).await
}

/// Schedules a job of `kind` for `entity_id`, due now.
pub async fn due_now(
    db: &Db,
    kind: &'static str,
    entity_id: &str,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let change = Change::at(now).job(Job::Schedule {
        kind,
        entity_id: entity_id.to_owned(),
        at: now,
    });
    commit::commit(db, change).await.map(drop)
}

/// Inserts an attempt, or records the outcome of one its intent inserted as `pending`.
fn attempt(a: payment_attempt::Model) -> Write {
    use payment_attempt::Column;
    let outcome = OnConflict::column(Column::Id)
        .update_columns([
            Column::Status,
            Column::ProcessorReference,
            Column::ErrorCode,
            Column::ErrorMessage,
        ])
        .to_owned();
    commit::append_upsert(a, "attempt_outcome", outcome)
}

fn history(
    payment_id: &crate::ids::PaymentId,
    from: Option<Status>,
    to: Status,
    trigger: Trigger,
    now: DateTime<Utc>,
) -> Write {
    commit::append(payment_status_history::Model {
        id: new_id("psh"),
        payment_id: payment_id.clone(),
        from_status: from,
        to_status: to,
        trigger,
        created_at: now,
    })
}

/// Which jobs a payment may already have.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Jobs {
    /// None: the payment is being inserted.
    None,
    Unknown,
}

/// Invariant: a payment has an expiry job exactly while it can expire, and a settle job
/// exactly while it waits for the processor (a pending status, or an operation whose outcome
/// is not recorded).
fn jobs(m: &payment::Model, now: DateTime<Utc>, settle_delay: Duration, existing: Jobs) -> Change {
    let mut change = Change::at(now);
    let mut stale = Vec::with_capacity(2);
    let status = m.status;
    let expiry = if status.is_unconfirmed() || status == Status::RequiresCustomerAction {
        Some(m.expires_at)
    } else if status.is_capturable() {
        m.capture_before
    } else {
        None
    };
    match expiry {
        Some(at) => {
            change = change.job(Job::Schedule {
                kind: EXPIRY_JOB,
                entity_id: m.id.to_string(),
                at,
            })
        }
        None => stale.push(EXPIRY_JOB),
    }
    let pending = matches!(status, Status::Processing | Status::RequiresMerchantAction)
        || m.pending_operation.is_some();
    if pending {
        change = change.job(Job::Schedule {
            kind: SETTLE_JOB,
            entity_id: m.id.to_string(),
            at: now + settle_delay,
        });
    } else {
        stale.push(SETTLE_JOB);
    }
    if existing == Jobs::Unknown && !stale.is_empty() {
        change = change.job(Job::Cancel {
            kinds: stale,
            entity_id: m.id.to_string(),
        });
    }
    change
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &crate::ids::PaymentId,
) -> Result<Option<payment::Model>, DbErr> {
    payment::Entity::find_by_id(id.clone()).one(db).await
}

/// The payments of `merchant_id` in this mode, of shop `profile_id` if one is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListPaymentsRequest,
    page: &Page,
) -> Result<List<payment::Model>, PageError> {
    let mut q = payment::Entity::find()
        .filter(payment::Column::MerchantId.eq(merchant_id))
        .filter(payment::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(payment::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(s) = &f.status {
        q = q.filter(payment::Column::Status.eq(s.as_str()));
    }
    if let Some(c) = &f.currency {
        q = q.filter(payment::Column::Currency.eq(c.as_str()));
    }
    if let Some(c) = &f.customer_id {
        q = q.filter(payment::Column::CustomerId.eq(c.as_str()));
    }
    if let Some(a) = f.amount_gte {
        q = q.filter(payment::Column::Amount.gte(a));
    }
    if let Some(a) = f.amount_lte {
        q = q.filter(payment::Column::Amount.lte(a));
    }
    q = created_between(
        q,
        payment::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, payment::Column::Id, page).await
}

/// The number the payment's next attempt takes: attempts are numbered 1, 2, … within the
/// payment, across its confirms and each confirm's fallbacks. Only a confirm makes attempts, so
/// a payment never confirmed has none (and needs no query).
pub async fn next_attempt_number(
    db: &impl ConnectionTrait,
    m: &payment::Model,
) -> Result<i32, DbErr> {
    if m.confirm_attempts == 0 {
        return Ok(1);
    }
    let made = payment_attempt::Entity::find()
        .filter(payment_attempt::Column::PaymentId.eq(m.id.as_str()))
        .count(db)
        .await?;
    Ok(made as i32 + 1)
}

pub async fn find_attempt(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<payment_attempt::Model>, DbErr> {
    payment_attempt::Entity::find_by_id(id).one(db).await
}

pub async fn attempts(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<payment_attempt::Model>, DbErr> {
    payment_attempt::Entity::find()
        .filter(payment_attempt::Column::PaymentId.eq(payment_id))
        .order_by_asc(payment_attempt::Column::Number)
        .order_by_asc(payment_attempt::Column::Id)
        .all(db)
        .await
}

pub async fn history_of(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<payment_status_history::Model>, DbErr> {
    payment_status_history::Entity::find()
        .filter(payment_status_history::Column::PaymentId.eq(payment_id))
        .order_by_asc(payment_status_history::Column::Id)
        .all(db)
        .await
}

/// Whether `account` is the one that served payment `m`: the payment's merchant, shop and
/// mode, and the account its attempt chose. Names are unique within a shop and never change,
/// and `sandbox` is the implicit sandbox's alone, so the chosen name in the payment's shop and
/// mode is one account.
pub fn served_by(m: &payment::Model, account: &processor_account::Model) -> bool {
    of_shop(m, account) && m.processor.as_deref() == Some(account.name.as_str())
}

/// Whether the account is one of the payment's shop, in its mode: the only accounts that can
/// hold anything of the payment's.
pub fn of_shop(m: &payment::Model, account: &processor_account::Model) -> bool {
    m.merchant_id == account.merchant_id
        && m.profile_id == account.profile_id
        && m.test_mode == account.test_mode
}

/// The payment a processor account served and knows by this reference (a processor's event
/// names its own payment).
pub async fn by_processor_reference(
    db: &impl ConnectionTrait,
    account: &processor_account::Model,
    reference: &str,
) -> Result<Option<payment::Model>, DbErr> {
    Ok(payment::Entity::find()
        .filter(payment::Column::ProcessorReference.eq(reference))
        .filter(payment::Column::ProfileId.eq(account.profile_id.as_str()))
        .filter(payment::Column::Processor.eq(account.name.as_str()))
        .filter(payment::Column::TestMode.eq(account.test_mode))
        .one(db)
        .await?
        .filter(|m| served_by(m, account)))
}

/// What the payment's disputes take from refunds: an open one refuses them, and what the
/// buyer kept is no longer refundable.
pub async fn disputed(db: &Db, payment_id: &str) -> Result<super::refunds::Disputed, DbErr> {
    let mut out = super::refunds::Disputed::default();
    for d in disputes::store::of_payment(db, payment_id).await? {
        if d.status.is_open() {
            out.open = Some(d.id.into());
        } else if d.status.buyer_kept() {
            out.kept_by_buyer += d.amount;
        }
    }
    Ok(out)
}
