//! Rows a caller owns, read with the owner in the query: one [`find_owned`] for every resource
//! whose rows belong to a merchant, a mode and (a shop's rows) a shop. The id's type names the
//! table, so a payment id can only find a payment; a row outside the scope is never loaded.
//!
//! Invariant: a row is found only if its merchant and mode are the scope's, and its shop too
//! when the scope is one shop's (a merchant-wide row, a customer or a file, has no shop).

use payd_entity::{customer, dispute, file, invoice, payment, payout, product, refund};
use payd_entity::{subscription, wallet_case};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::{
    auth::keys::Scope,
    ids::{
        CaseId, CustomerId, DisputeId, FileId, Id, InvoiceId, PaymentId, PayoutId, ProductId,
        RefundId, SubscriptionId,
    },
};

/// The columns that say whose a row is.
pub struct Owner<C> {
    pub id: C,
    pub merchant: C,
    pub test_mode: C,
    /// `None`: the row is the merchant's, not one shop's.
    pub shop: Option<C>,
}

/// An id of a row that has an owner: its table and the columns that name the owner.
pub trait OwnedId: Id {
    type Entity: EntityTrait;
    fn owner() -> Owner<<Self::Entity as EntityTrait>::Column>;
}

/// The row `id` names, if the scope owns it; `None` for anyone else's (another merchant, mode
/// or shop), as for no row.
pub async fn find_owned<I: OwnedId>(
    db: &impl ConnectionTrait,
    id: &I,
    scope: &Scope,
) -> Result<Option<<I::Entity as EntityTrait>::Model>, DbErr> {
    let owner = I::owner();
    let mut query = I::Entity::find()
        .filter(owner.id.eq(&**id))
        .filter(owner.merchant.eq(scope.merchant_id.as_str()))
        .filter(owner.test_mode.eq(scope.test_mode));
    if let (Some(shop), Some(profile_id)) = (owner.shop, scope.profile_id.as_deref()) {
        query = query.filter(shop.eq(profile_id));
    }
    query.one(db).await
}

macro_rules! owned {
    ($id:ty => $entity:ident, shop) => {
        owned!(@ $id => $entity, Some($entity::Column::ProfileId));
    };
    ($id:ty => $entity:ident) => {
        owned!(@ $id => $entity, None);
    };
    (@ $id:ty => $entity:ident, $shop:expr) => {
        impl OwnedId for $id {
            type Entity = $entity::Entity;
            fn owner() -> Owner<$entity::Column> {
                Owner {
                    id: $entity::Column::Id,
                    merchant: $entity::Column::MerchantId,
                    test_mode: $entity::Column::TestMode,
                    shop: $shop,
                }
            }
        }
    };
}

owned!(PaymentId => payment, shop);
owned!(RefundId => refund, shop);
owned!(DisputeId => dispute, shop);
owned!(CaseId => wallet_case, shop);
owned!(PayoutId => payout, shop);
owned!(SubscriptionId => subscription, shop);
owned!(InvoiceId => invoice, shop);
owned!(ProductId => product, shop);
owned!(CustomerId => customer);
owned!(FileId => file);
