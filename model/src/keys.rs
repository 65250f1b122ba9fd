//! An API key's kind and mode (also the mode an idempotency key was used in).

text_enum! {
    /// A key's mode: `test` objects (sandbox) and `live` objects never see each other.
    pub enum Mode {
        Test = "test",
        Live = "live",
    }
}

text_enum! {
    pub enum KeyKind {
        Secret = "secret",
        Publishable = "publishable",
    }
}
