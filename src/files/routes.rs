//! `POST /files`: upload an evidence file as `multipart/form-data` (parts `file` and
//! `purpose`), bounded by `limits.max_file_bytes` and the merchant's file limits. The bytes
//! go to the database a chunk at a time as they arrive. `GET /files/{file_id}` reads the
//! file's record, `GET /files/{file_id}/contents` its bytes, a chunk at a time again.

use actix_multipart::{Field, Multipart};
use actix_web::{
    http::{
        header::{self, ContentDisposition, DispositionParam, DispositionType},
        StatusCode,
    },
    web, HttpRequest, HttpResponse,
};
use futures_util::StreamExt;
use payd_entity::file;
use sha2::{Digest, Sha256};

use super::{clean_filename, store, File, Kind, Sniffer, EVIDENCE};
use crate::{
    auth::{Caller, SecretKey},
    error::{ApiError, ErrorType},
    http::PathId,
    idempotency,
    state::AppState,
};

crate::http::routes! {
    "/files" => { post: upload_file },
    "/files/{file_id}" => { get: retrieve_file },
    "/files/{file_id}/contents" => { get: file_contents },
}

/// The caller's file, or 404 (another merchant's or mode's file reads as missing).
async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &crate::ids::FileId,
) -> Result<file::Model, ApiError> {
    crate::owned::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(|| ApiError::not_found("file").param("file_id"))
}

/// Retrieve an uploaded file's record.
///
/// Its purpose, name, type (read from its bytes when it was uploaded), size and SHA-256, not
/// its bytes (`GET /files/{file_id}/contents`). Read only; needs a secret key of the mode it
/// was uploaded in.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/files/{file_id}", tag = "disputes",
    params(("file_id" = String, Path)),
    responses((status = 200, body = File), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_file(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::FileId>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(File::render(&owned(&state, &caller, &id).await?)))
}

/// Download an uploaded file's bytes.
///
/// Streamed as stored, with the type read from the bytes when it was uploaded, its SHA-256 as
/// `ETag` and its name in `Content-Disposition`. Read only; needs a secret key of the mode it
/// was uploaded in.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/files/{file_id}/contents", tag = "disputes",
    params(("file_id" = String, Path)),
    responses(
        (status = 200, description = "the file's bytes", content(
            ("application/pdf"), ("image/png"), ("image/jpeg"), ("text/plain"))),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn file_contents(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::FileId>,
) -> Result<HttpResponse, ApiError> {
    let f = owned(&state, &caller, &id).await?;
    // As stored, chunk by chunk: a download holds one chunk at a time, not the whole file.
    let db = state.db.clone();
    let (file_id, inline) = (f.id.clone(), web::Bytes::from(f.bytes));
    let chunks = futures_util::stream::unfold(Some(0), move |seq| {
        let (db, file_id, inline) = (db.clone(), file_id.clone(), inline.clone());
        async move {
            let seq = seq?;
            match store::chunk(&db, &file_id, seq).await {
                Ok(Some(bytes)) => Some((Ok(web::Bytes::from(bytes)), Some(seq + 1))),
                // A file stored before uploads were chunked keeps its bytes in its row.
                Ok(None) if seq == 0 && !inline.is_empty() => Some((Ok(inline), None)),
                Ok(None) => None,
                // Cut off mid-way: the client sees fewer bytes than `Content-Length` says.
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            }
        }
    });
    let ascii_name: String = f
        .filename
        .chars()
        .map(|c| if c.is_ascii() { c } else { '_' })
        .collect();
    Ok(HttpResponse::Ok()
        .content_type(f.content_type.as_str())
        .no_chunking(f.size.max(0) as u64)
        .insert_header(ContentDisposition {
            disposition: DispositionType::Attachment,
            parameters: vec![DispositionParam::Filename(ascii_name)],
        })
        .insert_header((header::ETAG, format!("\"{}\"", f.sha256)))
        .streaming(chunks))
}

/// A form has at most these many parts.
const MAX_PARTS: usize = 4;

/// Bytes written to the database at a time: an upload in flight holds about this much.
const CHUNK: usize = 256 * 1024;

/// Upload a file to attach to a dispute as evidence.
///
/// A `multipart/form-data` body with one `file` part (and `purpose`); its type is read from
/// its bytes, not its name: PDF, PNG, JPEG or UTF-8 text. It is stored a chunk at a time,
/// within `limits.max_file_bytes` and the merchant's bounds on files and bytes; a refused
/// upload leaves nothing behind. Needs a secret key; a retry with the same `Idempotency-Key`
/// answers the same file.
///
/// Fails: `invalid_multipart` (400), `file_empty` (400), `file_type_unsupported` (400), `limit_reached` (409), `file_too_large` (413).
///
/// Events: none.
#[utoipa::path(post, path = "/files", tag = "disputes",
    request_body(content = super::UploadFileForm, content_type = "multipart/form-data"),
    responses((status = 201, body = File), (status = 400, body = crate::error::ErrorBody),
        (status = 413, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn upload_file(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // The retry of an upload whose file was stored but whose answer was lost: that file.
    if let Some(id) = idempotency::resumed::<crate::ids::FileId>(&req) {
        if let Ok(f) = owned(&state, &caller, &id).await {
            return Ok(HttpResponse::Created().json(File::render(&f)));
        }
    }
    let limits = &state.settings.limits;
    let row = upload(
        &state,
        &caller,
        &req,
        payload,
        EVIDENCE,
        limits.max_file_bytes,
    )
    .await?;
    Ok(HttpResponse::Created().json(File::render(&row)))
}

/// Stores an uploaded file of this kind (at most `max_bytes`) from a multipart form, a chunk
/// at a time, within the merchant's file limits; a refused upload leaves nothing behind.
pub async fn upload(
    state: &AppState,
    caller: &Caller,
    req: &HttpRequest,
    payload: web::Payload,
    kind: Kind,
    max_bytes: usize,
) -> Result<file::Model, ApiError> {
    let limits = &state.settings.limits;
    let (files, bytes) = store::usage(&state.db, caller.merchant_id.as_str()).await?;
    if files >= limits.max_files_per_merchant {
        return Err(ApiError::limit_reached(
            "limits.max_files_per_merchant",
            limits.max_files_per_merchant,
        ));
    }
    let mut writer = Writer {
        state,
        kind,
        limit: max_bytes,
        file_id: crate::ids::FileId::new(),
        room: limits.max_file_bytes_per_merchant.saturating_sub(bytes),
        seq: 0,
        size: 0,
        buf: Vec::new(),
        hash: Sha256::new(),
        sniffer: Sniffer::default(),
    };
    let received = receive(&mut writer, req, payload).await;
    let (filename, content_type) = match received {
        Ok(done) => done,
        Err(e) => {
            if writer.seq > 0 {
                let dropped = store::drop_chunks(&state.db, state.clock.now(), &writer.file_id);
                if let Err(drop) = dropped.await {
                    // Left for the daily purge of chunks that belong to no file.
                    tracing::warn!(error = %drop, file_id = %writer.file_id, "could not drop the chunks of a refused upload");
                }
            }
            return Err(e);
        }
    };
    let row = file::Model {
        id: writer.file_id,
        merchant_id: caller.merchant_id.clone(),
        test_mode: caller.test_mode(),
        purpose: kind.purpose,
        filename,
        content_type: content_type.to_owned(),
        size: writer.size as i64,
        sha256: hex::encode(writer.hash.finalize()),
        bytes: Vec::new(),
        created_at: state.clock.now(),
    };
    let bounds = store::Bounds {
        files: limits.max_files_per_merchant,
        bytes: limits.max_file_bytes_per_merchant,
    };
    let file_id = row.id.clone();
    match store::insert(
        &state.db,
        row,
        idempotency::request_key(req).as_ref(),
        bounds,
    )
    .await
    {
        Ok(row) => Ok(row),
        Err(e) => {
            // A refused file leaves nothing behind; a failed commit's chunks go to the purge.
            if let Err(drop) = store::drop_chunks(&state.db, state.clock.now(), &file_id).await {
                tracing::warn!(error = %drop, file_id = %file_id, "could not drop the chunks of a refused upload");
            }
            Err(e.into())
        }
    }
}

/// Reads the form, writing the file's bytes as they come; its filename and type.
async fn receive(
    writer: &mut Writer<'_>,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<(String, &'static str), ApiError> {
    let mut form = Multipart::new(req.headers(), payload);
    let (mut filename, mut purpose) = (None, None);
    for _ in 0..=MAX_PARTS {
        let Some(part) = form.next().await else { break };
        let mut part = part.map_err(|e| {
            ApiError::invalid(
                "invalid_multipart",
                format!("send a multipart/form-data body with a `file` part: {e}"),
            )
            .param("file")
        })?;
        match part.name().unwrap_or_default() {
            "file" if filename.is_some() => {
                return Err(ApiError::invalid_param("file", "send one `file` part"))
            }
            "file" => {
                filename = Some(
                    part.content_disposition()
                        .and_then(|cd| cd.get_filename())
                        .map_or_else(|| "upload".to_owned(), clean_filename),
                );
                writer.write_part(&mut part).await?;
            }
            "purpose" if writer.kind.purpose_part.is_some() => {
                let bytes = read_part(&mut part, "purpose", 64).await?;
                purpose = Some(String::from_utf8_lossy(&bytes).trim().to_owned());
            }
            other => {
                return Err(ApiError::invalid_param(
                    other,
                    format!("unknown form part {other:?}; send {}", parts(writer.kind)),
                ))
            }
        }
    }
    if form.next().await.is_some() {
        return Err(ApiError::invalid_param(
            "file",
            format!("too many form parts; send {}", parts(writer.kind)),
        ));
    }
    if let Some(expected) = writer.kind.purpose_part {
        match purpose.as_deref() {
            Some(p) if p == expected => {}
            None => {
                return Err(ApiError::invalid_param(
                    "purpose",
                    format!("purpose is required ({expected})"),
                ))
            }
            Some(p) => {
                return Err(ApiError::invalid_param(
                    "purpose",
                    format!("unknown purpose {p:?}; the only purpose is {expected}"),
                ))
            }
        }
    }
    let filename =
        filename.ok_or_else(|| ApiError::invalid_param("file", "the `file` part is required"))?;
    if writer.size == 0 {
        return Err(ApiError::invalid("file_empty", "the file is empty").param("file"));
    }
    let content_type = std::mem::take(&mut writer.sniffer)
        .finish()
        .filter(|t| writer.kind.types.contains(t))
        .ok_or_else(|| unsupported(writer.kind))?;
    Ok((filename, content_type))
}

/// The parts a form of this kind has.
fn parts(kind: Kind) -> &'static str {
    match kind.purpose_part {
        Some(_) => "`file` and `purpose`",
        None => "`file`",
    }
}

fn unsupported(kind: Kind) -> ApiError {
    ApiError::invalid("file_type_unsupported", kind.send).param("file")
}

fn too_large(name: &str, limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorType::PayloadTooLarge,
        "file_too_large",
        format!("the {name} part is larger than {limit} bytes"),
    )
    .param(name)
}

fn broken(name: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(
        "invalid_multipart",
        format!("the {name} part is broken: {e}"),
    )
    .param(name)
}

/// An upload's bytes on their way to the database, a chunk at a time.
struct Writer<'a> {
    state: &'a AppState,
    kind: Kind,
    /// The largest file of this kind.
    limit: usize,
    file_id: crate::ids::FileId,
    /// What the merchant may still store.
    room: u64,
    /// Chunks written so far.
    seq: i32,
    size: usize,
    buf: Vec<u8>,
    hash: Sha256,
    sniffer: Sniffer,
}

impl Writer<'_> {
    async fn write_part(&mut self, part: &mut Field) -> Result<(), ApiError> {
        let limit = self.limit;
        while let Some(piece) = part.next().await {
            let piece = piece.map_err(|e| broken("file", e))?;
            self.size += piece.len();
            if self.size > limit {
                return Err(too_large("file", limit));
            }
            if self.size as u64 > self.room {
                let max = self.state.settings.limits.max_file_bytes_per_merchant;
                return Err(ApiError::limit_reached(
                    "limits.max_file_bytes_per_merchant",
                    max,
                ));
            }
            self.hash.update(&piece);
            let mut rest = &piece[..];
            while !rest.is_empty() {
                let take = (CHUNK - self.buf.len()).min(rest.len());
                self.buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.buf.len() == CHUNK {
                    self.flush().await?;
                }
            }
        }
        self.flush().await
    }

    async fn flush(&mut self) -> Result<(), ApiError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if !self.sniffer.feed(&self.buf) {
            return Err(unsupported(self.kind));
        }
        let bytes = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        let now = self.state.clock.now();
        store::put_chunk(&self.state.db, now, &self.file_id, self.seq, bytes).await?;
        self.seq += 1;
        Ok(())
    }
}

/// A small part's bytes: 413 past `limit`, 400 when the body breaks off.
async fn read_part(part: &mut Field, name: &str, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    while let Some(chunk) = part.next().await {
        let chunk = chunk.map_err(|e| broken(name, e))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large(name, limit));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
