//! What a stored file is for.

text_enum! {
    /// The purpose a file is stored with: evidence for a dispute, or a product image.
    pub enum Purpose {
        DisputeEvidence = "dispute_evidence",
        ProductImage = "product_image",
    }
}
