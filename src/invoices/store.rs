//! Persistence of invoices and credit notes, their numbering series, their PDFs and their
//! share links. An invoice's change commits under a compare-and-set on its `version`; a
//! number is taken under a compare-and-set on its series' counter in the same commit, so a
//! number is given exactly once and none is skipped.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{invoice, invoice_counter, invoice_pdf, invoice_share_link, payment};
use sea_orm::{
    sea_query::{Expr, OnConflict},
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QuerySelect, QueryTrait,
};
use sha2::{Digest, Sha256};

use super::{
    api::{Invoice, ListInvoicesQuery},
    machine::{Kind, Status},
};
use crate::commit::Db;
use crate::{
    auth::keys::Scope,
    commit::{self, Change, Event, Job, Write},
    conflict::Conflict,
    ids::InvoiceId,
    pagination::{created_between, paginate, List, Page, PageError},
};

pub use crate::commit::CommitError;

/// Scheduled job: renders a finalized invoice's PDF if the finalize that committed it did not
/// get to (a crash between the two).
pub const PDF_JOB: &str = "invoice_pdf";

/// The event of an invoice or credit note.
pub fn event(m: &invoice::Model, event_type: &str) -> Result<Event, DbErr> {
    Ok(Event {
        merchant_id: m.merchant_id.clone(),
        profile_id: Some(m.profile_id.clone()),
        test_mode: m.test_mode,
        event_type: event_type.to_owned(),
        object_id: m.id.to_string(),
        content_type: "merchant_invoice_details",
        object: serde_json::to_string(&Invoice::render(m)?).unwrap_or_default(),
    })
}

/// A new draft.
pub async fn insert(db: &Db, m: &invoice::Model) -> Result<(), CommitError> {
    commit::commit(
        db,
        Change::at(m.created_at).write(commit::insert(m.clone())),
    )
    .await?;
    Ok(())
}

/// The compare-and-set of an invoice's row: `after` (its version one up) replaces `before` if
/// nobody wrote since.
pub fn cas(before: &invoice::Model, after: &mut invoice::Model) -> Write {
    after.version = before.version + 1;
    Write::Cas(
        invoice::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(invoice::Column::Id.eq(before.id.as_str()))
            .filter(invoice::Column::Version.eq(before.version))
            .into_query(),
    )
}

/// The condition that the payment has nothing refunded, checked inside the commit that
/// finalizes its invoice (a refund committed before it refuses the finalize).
pub fn unrefunded(payment_id: &str) -> Write {
    Write::Require {
        query: payment::Entity::find()
            .select_only()
            .column(payment::Column::Id)
            .filter(payment::Column::Id.eq(payment_id))
            .filter(payment::Column::AmountRefunded.eq(0))
            .into_query(),
        exists: true,
        refusal: Conflict::PaymentRefunded,
    }
}

/// A number of a series: its prefix and six digits at least.
pub fn number(prefix: &str, n: i64) -> String {
    format!("{prefix}{n:06}")
}

/// The next number of a merchant's series in one mode (1 for a series never used).
pub async fn next_number(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    series: &str,
) -> Result<i64, DbErr> {
    Ok(
        invoice_counter::Entity::find_by_id((merchant_id.to_owned(), test_mode, series.to_owned()))
            .one(db)
            .await?
            .map_or(1, |c| c.next_number),
    )
}

/// Takes number `n` of a series: the counter must still stand at `n` (else the change is a
/// lost race, and the caller reads the counter again).
pub fn take_number(merchant_id: &str, test_mode: bool, series: &str, n: i64) -> Vec<Write> {
    let first = invoice_counter::Model {
        merchant_id: merchant_id.to_owned(),
        test_mode,
        series: series.to_owned(),
        next_number: 1,
    };
    let create = invoice_counter::Entity::insert(first.into_active_model())
        .on_conflict(
            OnConflict::columns([
                invoice_counter::Column::MerchantId,
                invoice_counter::Column::TestMode,
                invoice_counter::Column::Series,
            ])
            .do_nothing()
            .to_owned(),
        )
        .into_query();
    let advance = invoice_counter::Entity::update_many()
        .col_expr(invoice_counter::Column::NextNumber, Expr::value(n + 1))
        .filter(invoice_counter::Column::MerchantId.eq(merchant_id))
        .filter(invoice_counter::Column::TestMode.eq(test_mode))
        .filter(invoice_counter::Column::Series.eq(series))
        .filter(invoice_counter::Column::NextNumber.eq(n))
        .into_query();
    vec![Write::Insert(create), Write::Cas(advance)]
}

/// The PDF job of a finalized invoice: due soon, run only if its PDF is still missing then.
pub fn pdf_job(invoice_id: &str, now: DateTime<Utc>) -> Job {
    Job::Schedule {
        kind: PDF_JOB,
        entity_id: invoice_id.to_owned(),
        at: now + Duration::seconds(30),
    }
}

/// The invoices of a billing cycle that are open or uncollectible.
pub async fn unpaid_of_cycle(
    db: &impl ConnectionTrait,
    cycle_id: &str,
) -> Result<Vec<invoice::Model>, DbErr> {
    invoice::Entity::find()
        .filter(invoice::Column::CycleId.eq(cycle_id))
        .filter(invoice::Column::Kind.eq(Kind::Invoice))
        .filter(invoice::Column::Status.is_in([Status::Open, Status::Uncollectible]))
        .all(db)
        .await
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &crate::ids::InvoiceId,
) -> Result<Option<invoice::Model>, DbErr> {
    invoice::Entity::find_by_id(id.clone()).one(db).await
}

/// An invoice within the scope; `None` for anyone else's and for a deleted draft.
pub async fn find_owned(
    db: &impl ConnectionTrait,
    id: &InvoiceId,
    scope: &Scope,
) -> Result<Option<invoice::Model>, DbErr> {
    let found = crate::owned::find_owned(db, id, scope).await?;
    Ok(found.filter(|m| m.status != Status::Deleted))
}

/// Whether the scope sees the invoice (a deleted draft is seen by nobody).
pub fn visible(m: &invoice::Model, scope: &Scope) -> bool {
    scope.sees(&m.merchant_id, m.test_mode, &m.profile_id) && m.status != Status::Deleted
}

/// The invoices and credit notes of `merchant_id` in this mode, of shop `profile_id` if one
/// is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListInvoicesQuery,
    page: &Page,
) -> Result<List<invoice::Model>, PageError> {
    let mut q = invoice::Entity::find()
        .filter(invoice::Column::MerchantId.eq(merchant_id))
        .filter(invoice::Column::TestMode.eq(test_mode))
        .filter(invoice::Column::Status.ne(Status::Deleted));
    if let Some(p) = profile_id {
        q = q.filter(invoice::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(k) = &f.kind {
        q = q.filter(invoice::Column::Kind.eq(k.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(invoice::Column::Status.eq(s.as_str()));
    }
    if let Some(c) = &f.customer_id {
        q = q.filter(invoice::Column::CustomerId.eq(c.as_str()));
    }
    if let Some(o) = &f.original_invoice_id {
        q = q.filter(invoice::Column::OriginalInvoiceId.eq(o.as_str()));
    }
    q = created_between(
        q,
        invoice::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, invoice::Column::Id, page).await
}

pub async fn pdf(
    db: &impl ConnectionTrait,
    id: &crate::ids::InvoiceId,
) -> Result<Option<invoice_pdf::Model>, DbErr> {
    invoice_pdf::Entity::find_by_id(id.clone()).one(db).await
}

/// Keeps a rendered PDF unless one is kept already, and answers the one kept: every
/// download is the same bytes, whoever rendered first.
pub async fn keep_pdf(
    db: &Db,
    invoice_id: &crate::ids::InvoiceId,
    bytes: Vec<u8>,
    now: DateTime<Utc>,
) -> Result<invoice_pdf::Model, CommitError> {
    let row = invoice_pdf::Model {
        invoice_id: invoice_id.clone(),
        sha256: hex::encode(Sha256::digest(&bytes)),
        bytes,
        created_at: now,
    };
    let insert = invoice_pdf::Entity::insert(row.into_active_model())
        .on_conflict(
            OnConflict::column(invoice_pdf::Column::InvoiceId)
                .do_nothing()
                .to_owned(),
        )
        .into_query();
    let change = Change::at(now)
        .write(Write::Insert(insert))
        .job(Job::Cancel {
            kinds: vec![PDF_JOB],
            entity_id: invoice_id.to_string(),
        });
    commit::commit(db, change).await?;
    pdf(db, invoice_id)
        .await?
        .ok_or(CommitError::Db(DbErr::RecordNotFound(format!(
            "the PDF of {invoice_id}"
        ))))
}

/// The hash a share link's token is kept as.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub async fn insert_link(db: &Db, link: &invoice_share_link::Model) -> Result<(), CommitError> {
    commit::commit(
        db,
        Change::at(link.created_at).write(commit::insert(link.clone())),
    )
    .await?;
    Ok(())
}

/// A live link: not revoked, not expired at `now`.
pub async fn live_link(
    db: &impl ConnectionTrait,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<invoice_share_link::Model>, DbErr> {
    Ok(invoice_share_link::Entity::find()
        .filter(invoice_share_link::Column::TokenHash.eq(token_hash(token)))
        .one(db)
        .await?
        .filter(|l| l.revoked_at.is_none() && now < l.expires_at))
}

pub async fn find_link(
    db: &impl ConnectionTrait,
    invoice_id: &str,
    link_id: &str,
) -> Result<Option<invoice_share_link::Model>, DbErr> {
    Ok(invoice_share_link::Entity::find_by_id(link_id)
        .one(db)
        .await?
        .filter(|l| l.invoice_id == invoice_id))
}

/// Revokes a link (a second revocation keeps the first time).
pub async fn revoke_link(
    db: &Db,
    link: &invoice_share_link::Model,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let update = invoice_share_link::Entity::update_many()
        .col_expr(invoice_share_link::Column::RevokedAt, Expr::value(now))
        .filter(invoice_share_link::Column::Id.eq(link.id.as_str()))
        .filter(invoice_share_link::Column::RevokedAt.is_null())
        .into_query();
    commit::commit(db, Change::at(now).write(Write::Update(update))).await?;
    Ok(())
}
