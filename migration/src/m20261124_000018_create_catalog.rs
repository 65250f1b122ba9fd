//! The product catalog: categories, products, their prices (amount, currency and recurrence
//! never change), add-on groups, product images, the index of payment lines that name a
//! product or price (what the sales report and "never sold" read), and catalog import
//! previews.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ProductCategories::Table)
                    .col(string(ProductCategories::Id).primary_key())
                    .col(string(ProductCategories::MerchantId))
                    .col(string(ProductCategories::ProfileId))
                    .col(boolean(ProductCategories::TestMode))
                    .col(string(ProductCategories::Name))
                    .col(string_null(ProductCategories::ParentId))
                    .col(timestamp_with_time_zone(ProductCategories::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Products::Table)
                    .col(string(Products::Id).primary_key())
                    .col(string(Products::MerchantId))
                    .col(string(Products::ProfileId))
                    .col(boolean(Products::TestMode))
                    .col(string(Products::Name))
                    .col(text_null(Products::Description))
                    .col(string_null(Products::CategoryId))
                    .col(text_null(Products::Metadata))
                    .col(text(Products::Images))
                    .col(boolean(Products::Active))
                    .col(string_null(Products::DefaultPriceId))
                    .col(text_null(Products::Bundle))
                    .col(text(Products::AddonGroups))
                    .col(string_null(Products::ExternalId))
                    .col(big_integer(Products::Version))
                    .col(timestamp_with_time_zone(Products::CreatedAt))
                    .col(timestamp_with_time_zone(Products::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_products_shop")
                    .table(Products::Table)
                    .col(Products::MerchantId)
                    .col(Products::TestMode)
                    .col(Products::ProfileId)
                    .col(Products::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Prices::Table)
                    .col(string(Prices::Id).primary_key())
                    .col(string(Prices::ProductId))
                    .col(string(Prices::MerchantId))
                    .col(string(Prices::ProfileId))
                    .col(boolean(Prices::TestMode))
                    .col(big_integer(Prices::UnitAmount))
                    .col(string(Prices::Currency))
                    .col(string_null(Prices::RecurringInterval))
                    .col(big_integer_null(Prices::RecurringIntervalCount))
                    .col(string_null(Prices::Nickname))
                    .col(text_null(Prices::Metadata))
                    .col(boolean(Prices::Active))
                    .col(string_null(Prices::ExternalId))
                    .col(timestamp_with_time_zone(Prices::CreatedAt))
                    .col(timestamp_with_time_zone(Prices::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Prices::Table, Prices::ProductId)
                            .to(Products::Table, Products::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_prices_product")
                    .table(Prices::Table)
                    .col(Prices::ProductId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ProductImages::Table)
                    .col(string(ProductImages::Id).primary_key())
                    .col(string(ProductImages::MerchantId))
                    .col(boolean(ProductImages::TestMode))
                    .col(string(ProductImages::FileId))
                    .col(timestamp_with_time_zone(ProductImages::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(PaymentLines::Table)
                    .col(string(PaymentLines::PaymentId))
                    .col(string(PaymentLines::LineId))
                    .col(string_null(PaymentLines::ProductId))
                    .col(string_null(PaymentLines::PriceId))
                    .col(timestamp_with_time_zone(PaymentLines::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(PaymentLines::PaymentId)
                            .col(PaymentLines::LineId),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payment_lines_product")
                    .table(PaymentLines::Table)
                    .col(PaymentLines::ProductId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payment_lines_price")
                    .table(PaymentLines::Table)
                    .col(PaymentLines::PriceId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(CatalogPreviews::Table)
                    .col(string(CatalogPreviews::Id).primary_key())
                    .col(string(CatalogPreviews::MerchantId))
                    .col(string(CatalogPreviews::ProfileId))
                    .col(boolean(CatalogPreviews::TestMode))
                    .col(string(CatalogPreviews::Account))
                    .col(text(CatalogPreviews::Plan))
                    .col(string(CatalogPreviews::Fingerprint))
                    .col(timestamp_with_time_zone_null(CatalogPreviews::AppliedAt))
                    .col(text_null(CatalogPreviews::Result))
                    .col(timestamp_with_time_zone(CatalogPreviews::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            CatalogPreviews::Table.into_iden(),
            PaymentLines::Table.into_iden(),
            ProductImages::Table.into_iden(),
            Prices::Table.into_iden(),
            Products::Table.into_iden(),
            ProductCategories::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum ProductCategories {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Name,
    ParentId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Products {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Name,
    Description,
    CategoryId,
    Metadata,
    /// A JSON array of image ids.
    Images,
    Active,
    DefaultPriceId,
    /// A bundle's components as JSON; none for a product that is not a bundle.
    Bundle,
    /// The add-on groups as JSON.
    AddonGroups,
    /// The id of the product at the catalog processor it was imported from.
    ExternalId,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Prices {
    Table,
    Id,
    ProductId,
    MerchantId,
    ProfileId,
    TestMode,
    UnitAmount,
    Currency,
    RecurringInterval,
    RecurringIntervalCount,
    Nickname,
    Metadata,
    Active,
    ExternalId,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProductImages {
    Table,
    Id,
    MerchantId,
    TestMode,
    /// The stored bytes, in the files module's tables.
    FileId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum PaymentLines {
    Table,
    PaymentId,
    LineId,
    ProductId,
    PriceId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum CatalogPreviews {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    /// The processor account previewed.
    Account,
    /// What the import would do, as JSON.
    Plan,
    /// A hash of the shop catalog's products and their versions when the preview was made: a
    /// catalog that changed since makes the preview stale.
    Fingerprint,
    AppliedAt,
    /// The answer of the apply, as JSON: applying again returns it.
    Result,
    CreatedAt,
}
