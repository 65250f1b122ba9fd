//! The security actions the audit log records.

text_enum! {
    /// One security action on a merchant's account (`GET /account/audit-log`).
    pub enum Action {
        ShopUpdated = "shop.updated",
        ApiKeyCreated = "api_key.created",
        ApiKeyRevoked = "api_key.revoked",
        MerchantSuspended = "merchant.suspended",
        MerchantReinstated = "merchant.reinstated",
        ProcessorAccountAdded = "processor_account.added",
        ProcessorAccountUpdated = "processor_account.updated",
        WebhookEndpointUrlChanged = "webhook_endpoint.url_changed",
        WebhookEndpointSecretRotated = "webhook_endpoint.secret_rotated",
    }
}
