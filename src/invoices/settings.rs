//! Persistence of invoice settings and tax rules: a merchant's (kept under the empty shop id)
//! and each shop's, in each mode apart (a test key never changes what live invoices and
//! renewals use). A put replaces the whole settings or the whole rule set in one commit;
//! concurrent puts of one owner are serialized on the owner's settings row.

use chrono::{DateTime, Utc};
use payd_entity::{invoice_setting, tax_rule};
use sea_orm::{
    sea_query::OnConflict, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QueryTrait,
};

use super::{
    api::{Effective, SettingsInput},
    tax::{Owner, Rule},
};
use crate::commit::Db;
use crate::commit::{self, Change, CommitError, Write};
use crate::stored::Json;

/// The shop id the merchant's own settings and rules are kept under.
pub const MERCHANT: &str = "";

/// Stored settings of a merchant (`profile_id` = [`MERCHANT`]) or a shop; all unset when none
/// are stored.
pub async fn stored(db: &impl ConnectionTrait, owner: &Owned<'_>) -> Result<SettingsInput, DbErr> {
    let key = (
        owner.merchant_id.to_owned(),
        owner.profile_id.to_owned(),
        owner.test_mode,
    );
    Ok(invoice_setting::Entity::find_by_id(key)
        .one(db)
        .await?
        .map(|m| SettingsInput::of(&m))
        .unwrap_or_default())
}

/// The settings that apply to an owner: a shop's own over the merchant's over the defaults;
/// the merchant's over the defaults.
pub async fn effective(db: &impl ConnectionTrait, owner: &Owned<'_>) -> Result<Effective, DbErr> {
    let merchant = stored(db, &owner.merchant()).await?;
    let settings = match owner.is_merchant() {
        true => merchant,
        false => stored(db, owner).await?.over(merchant),
    };
    Ok(Effective::of(settings))
}

/// The upsert of an owner's settings row: every field when `fields` is given, else only its
/// time (which takes the row's lock for the rest of the commit).
fn upsert(owner: &Owned, fields: Option<&SettingsInput>, now: DateTime<Utc>) -> Write {
    let s = fields.cloned().unwrap_or_default();
    let row = invoice_setting::Model {
        merchant_id: owner.merchant_id.to_owned(),
        profile_id: owner.profile_id.to_owned(),
        test_mode: owner.test_mode,
        number_prefix: s.number_prefix,
        credit_note_prefix: s.credit_note_prefix,
        seller: s.seller.map(Json),
        footer: s.footer,
        payment_terms_days: s.payment_terms_days,
        locale: s.locale,
        updated_at: now,
    };
    use invoice_setting::Column as C;
    let updated: &[C] = match fields {
        Some(_) => &[
            C::NumberPrefix,
            C::CreditNotePrefix,
            C::Seller,
            C::Footer,
            C::PaymentTermsDays,
            C::Locale,
            C::UpdatedAt,
        ],
        None => &[C::UpdatedAt],
    };
    Write::Insert(
        invoice_setting::Entity::insert(row.into_active_model())
            .on_conflict(
                OnConflict::columns([C::MerchantId, C::ProfileId, C::TestMode])
                    .update_columns(updated.iter().copied())
                    .to_owned(),
            )
            .into_query(),
    )
}

/// Whose settings or rules: a merchant's (`profile_id` = [`MERCHANT`]) or a shop's, in one
/// mode.
pub struct Owned<'a> {
    pub merchant_id: &'a str,
    pub profile_id: &'a str,
    pub test_mode: bool,
}

impl<'a> Owned<'a> {
    /// A shop's settings or rules (`None`: the merchant's), in one mode.
    pub fn of(merchant_id: &'a str, profile_id: Option<&'a str>, test_mode: bool) -> Self {
        Self {
            merchant_id,
            profile_id: profile_id.unwrap_or(MERCHANT),
            test_mode,
        }
    }

    /// The merchant's own, in the same mode: what a shop's fall back to.
    fn merchant(&self) -> Self {
        Self::of(self.merchant_id, None, self.test_mode)
    }

    fn is_merchant(&self) -> bool {
        self.profile_id == MERCHANT
    }
}

pub async fn put(
    db: &Db,
    owner: &Owned<'_>,
    settings: &SettingsInput,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let change = Change::at(now).write(upsert(owner, Some(settings), now));
    commit::commit(db, change).await?;
    Ok(())
}

/// An owner's rules in the order saved.
pub async fn rules(
    db: &impl ConnectionTrait,
    owner: &Owned<'_>,
) -> Result<Vec<tax_rule::Model>, DbErr> {
    tax_rule::Entity::find()
        .filter(tax_rule::Column::MerchantId.eq(owner.merchant_id))
        .filter(tax_rule::Column::ProfileId.eq(owner.profile_id))
        .filter(tax_rule::Column::TestMode.eq(owner.test_mode))
        .order_by_asc(tax_rule::Column::Position)
        .all(db)
        .await
}

/// Replaces an owner's rules with `rules` (none: deletes them).
pub async fn put_rules(
    db: &Db,
    owner: &Owned<'_>,
    rules: &[tax_rule::Model],
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let delete = tax_rule::Entity::delete_many()
        .filter(tax_rule::Column::MerchantId.eq(owner.merchant_id))
        .filter(tax_rule::Column::ProfileId.eq(owner.profile_id))
        .filter(tax_rule::Column::TestMode.eq(owner.test_mode))
        .into_query();
    let mut change = Change::at(now)
        .write(upsert(owner, None, now))
        .write(Write::Delete(delete));
    for r in rules {
        change = change.write(commit::insert(r.clone()));
    }
    commit::commit(db, change).await?;
    Ok(())
}

/// The rule as the evaluator reads it.
pub fn rule_of(m: &tax_rule::Model) -> Rule {
    Rule {
        id: m.id.clone(),
        owner: match m.profile_id.as_str() {
            MERCHANT => Owner::Merchant,
            _ => Owner::Shop,
        },
        rate_bps: m.rate_bps,
        country: m.country.clone(),
        region: m.region.clone(),
        tax_category: m.tax_category.clone(),
        inclusive: m.inclusive,
        valid_from: m.valid_from,
        valid_until: m.valid_until,
    }
}

/// The rules that count for an owner: a shop's own and the merchant's; the merchant's alone.
pub async fn rules_for(db: &impl ConnectionTrait, owner: &Owned<'_>) -> Result<Vec<Rule>, DbErr> {
    let mut out: Vec<Rule> = rules(db, &owner.merchant())
        .await?
        .iter()
        .map(rule_of)
        .collect();
    if !owner.is_merchant() {
        out.extend(rules(db, owner).await?.iter().map(rule_of));
    }
    Ok(out)
}

/// The shop's tax rules for the subscriptions' cycles (`subscriptions::api::CycleTax`): a cycle
/// is taxed when it is made, by the rules an invoice of it would use then, for the customer's
/// country, so what it charges is what its invoice totals.
pub struct CycleTaxRules {
    pub db: Db,
}

impl crate::subscriptions::api::CycleTax for CycleTaxRules {
    fn tax<'a>(
        &'a self,
        s: &'a payd_entity::subscription::Model,
        lines: &'a [crate::subscriptions::api::CycleLine],
        at: DateTime<Utc>,
    ) -> futures_util::future::LocalBoxFuture<
        'a,
        Result<Vec<crate::subscriptions::api::LineTax>, DbErr>,
    > {
        Box::pin(async move {
            let shop = Owned::of(&s.merchant_id, Some(&s.profile_id), s.test_mode);
            let rules = rules_for(&self.db, &shop).await?;
            let scope = crate::auth::keys::Scope::whole(&s.merchant_id, s.test_mode);
            let customer = crate::owned::find_owned(&self.db, &s.customer_id, &scope).await?;
            let address = customer.and_then(|c| c.address).map(|a| a.0);
            let place = super::tax::Place {
                country: address.and_then(|a| a.country),
                region: None,
            };
            let rule = super::tax::choose(&rules, &place, None, at);
            lines
                .iter()
                .map(|l| {
                    let base = l.quantity.checked_mul(l.unit_amount);
                    let applied = base.and_then(|b| super::tax::apply(b, rule));
                    let applied = applied
                        .ok_or_else(|| DbErr::Custom("a cycle line's tax overflows".into()))?;
                    Ok(crate::subscriptions::api::LineTax {
                        rule_id: applied.rule_id,
                        rate_bps: applied.rate_bps,
                        inclusive: applied.inclusive,
                        amount: applied.amounts.tax,
                    })
                })
                .collect()
        })
    }
}
