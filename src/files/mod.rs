//! Uploaded files (dispute evidence): the object, its storage, and what payd accepts. Bytes
//! are kept in the database, in chunks written as they arrive, with their SHA-256; the type
//! is read from the bytes, not from what the client declared.

pub mod routes;
pub mod store;

use chrono::{DateTime, Utc};
use payd_model::files::Purpose;
use serde::Serialize;
use utoipa::ToSchema;

use crate::mount::{Env, Mount};

/// Files: the routes, and the purge of chunks no file kept.
pub fn mount(m: &mut Mount, env: &Env<'_>) {
    store::register_purge(&mut m.scheduler, env.db);
    m.routes(&[routes::ROUTES]);
}

/// An uploaded file (its bytes are kept, not returned).
#[derive(Debug, Serialize, ToSchema)]
pub struct File {
    pub file_id: String,
    /// `dispute_evidence`.
    pub purpose: String,
    pub filename: String,
    /// `application/pdf`, `image/png`, `image/jpeg` or `text/plain`.
    pub content_type: String,
    /// Bytes.
    pub size: i64,
    /// Hex SHA-256 of the bytes, to check a copy against.
    pub sha256: String,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
}

impl File {
    pub fn render(f: &payd_entity::file::Model) -> Self {
        Self {
            file_id: f.id.to_string(),
            purpose: f.purpose.to_string(),
            filename: f.filename.clone(),
            content_type: f.content_type.clone(),
            size: f.size,
            sha256: f.sha256.clone(),
            test_mode: f.test_mode,
            created: f.created_at,
        }
    }
}

/// `POST /files`: a `multipart/form-data` body.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Describes the form for the OpenAPI document; the handler reads the parts.
pub struct UploadFileForm {
    /// The file (PDF, PNG, JPEG or UTF-8 text), with its filename.
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
    /// `dispute_evidence`.
    pub purpose: String,
}

const TEXT: &str = "text/plain";

/// The type a file's first bytes announce: PDF, PNG, JPEG or WebP.
fn magic(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"%PDF-") {
        Some("application/pdf")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// What one kind of upload takes: its form, the types it keeps, its size.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// The value of the form's `purpose` part, for a form that must carry one.
    pub purpose_part: Option<&'static str>,
    /// The purpose the file is stored with.
    pub purpose: Purpose,
    /// The types it keeps, as told by the bytes.
    pub types: &'static [&'static str],
    /// How the 400 of another type says what to send.
    pub send: &'static str,
}

/// Evidence for a dispute (`POST /files`).
pub const EVIDENCE: Kind = Kind {
    purpose_part: Some("dispute_evidence"),
    purpose: Purpose::DisputeEvidence,
    types: &["application/pdf", "image/png", "image/jpeg", TEXT],
    send: "send a PDF, PNG, JPEG or UTF-8 text file",
};

/// A product image (`POST /products/images`).
pub const PRODUCT_IMAGE: Kind = Kind {
    purpose_part: None,
    purpose: Purpose::ProductImage,
    types: &["image/png", "image/jpeg", "image/webp"],
    send: "send a PNG, JPEG or WebP image",
};

/// Reads a file's type as its bytes arrive: PDF, PNG or JPEG from the first bytes, or else
/// UTF-8 text without NUL bytes, checked to the last byte.
#[derive(Debug, Default)]
pub struct Sniffer {
    kind: Option<&'static str>,
    /// The start of a UTF-8 sequence cut by the end of the last piece.
    carry: Vec<u8>,
}

impl Sniffer {
    /// Feeds the next piece (the first should hold the file's first few bytes); `false` once
    /// the file cannot be of a type payd accepts.
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        let kind = *self
            .kind
            .get_or_insert_with(|| magic(piece).unwrap_or(TEXT));
        if kind != TEXT {
            return true;
        }
        if piece.contains(&0) {
            return false;
        }
        let mut text = std::mem::take(&mut self.carry);
        text.extend_from_slice(piece);
        match std::str::from_utf8(&text) {
            Ok(_) => true,
            // Cut mid-character: the rest comes with the next piece.
            Err(e) if e.error_len().is_none() => {
                self.carry = text[e.valid_up_to()..].to_vec();
                true
            }
            Err(_) => false,
        }
    }

    /// The file's type, once every piece was fed; `None` if it is not one payd accepts.
    pub fn finish(self) -> Option<&'static str> {
        self.kind.filter(|_| self.carry.is_empty())
    }
}

/// The type of a whole file (see [`Sniffer`]).
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let mut sniffer = Sniffer::default();
    sniffer.feed(bytes).then_some(())?;
    sniffer.finish()
}

/// A filename as stored: its last path segment, without control characters, at most 255
/// characters; `upload` when nothing is left.
pub fn clean_filename(raw: &str) -> String {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let name: String = last.chars().filter(|c| !c.is_control()).take(255).collect();
    match name.trim() {
        "" | "." | ".." => "upload".to_owned(),
        n => n.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes() {
        assert_eq!(sniff(b"%PDF-1.7\n..."), Some("application/pdf"));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff("Receipt: 2 × mug".as_bytes()), Some("text/plain"));
        assert_eq!(sniff(b"MZ\x90\0\x03"), None, "an executable is refused");
        assert_eq!(sniff(&[0xC3, 0x28]), None, "invalid UTF-8 is refused");
    }

    #[test]
    fn text_cut_mid_character_is_still_text() {
        let text = "Quittung: 2 × Tasse, 1 × Kännchen".as_bytes();
        for cut in 1..text.len() {
            let mut sniffer = Sniffer::default();
            assert!(
                sniffer.feed(&text[..cut]) && sniffer.feed(&text[cut..]),
                "{cut}"
            );
            assert_eq!(sniffer.finish(), Some("text/plain"), "{cut}");
        }
        let mut cut_short = Sniffer::default();
        assert!(cut_short.feed(&text[..13]));
        assert_eq!(
            cut_short.finish(),
            None,
            "a file ending mid-character is not text"
        );
        let mut late_nul = Sniffer::default();
        assert!(late_nul.feed(b"plain text"));
        assert!(!late_nul.feed(b"then \0"), "a NUL anywhere is refused");
        let mut pdf = Sniffer::default();
        assert!(pdf.feed(b"%PDF-1.7") && pdf.feed(&[0, 0xFF]));
        assert_eq!(pdf.finish(), Some("application/pdf"));
    }

    #[test]
    fn filenames_lose_their_paths_and_controls() {
        assert_eq!(clean_filename("../../etc/passwd"), "passwd");
        assert_eq!(clean_filename("C:\\docs\\receipt.pdf"), "receipt.pdf");
        assert_eq!(clean_filename("a\nb\u{0}.txt"), "ab.txt");
        assert_eq!(clean_filename(".."), "upload");
        assert_eq!(clean_filename(&"x".repeat(300)).len(), 255);
    }
}
