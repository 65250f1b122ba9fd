//! `POST /files`: upload an evidence file as `multipart/form-data` (parts `file` and
//! `purpose`), bounded by `limits.max_file_bytes`.

use actix_multipart::{Field, Multipart};
use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use payd_entity::file;
use sha2::{Digest, Sha256};

use super::{clean_filename, sniff, File};
use crate::{
    auth::SecretKey,
    error::{ApiError, ErrorType},
    ids::new_id,
    state::AppState,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/files").route(web::post().to(upload_file)));
}

/// A form has at most these many parts.
const MAX_PARTS: usize = 4;

/// Upload a file to attach to a dispute as evidence.
#[utoipa::path(post, path = "/files", tag = "disputes",
    request_body(content = super::UploadFileForm, content_type = "multipart/form-data"),
    responses((status = 200, body = File), (status = 400, body = crate::error::ErrorBody),
        (status = 413, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn upload_file(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state.settings.limits.max_file_bytes;
    let mut form = Multipart::new(req.headers(), payload);
    let (mut upload, mut purpose) = (None, None);
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
            "file" => {
                let filename = part
                    .content_disposition()
                    .and_then(|cd| cd.get_filename())
                    .map_or_else(|| "upload".to_owned(), clean_filename);
                let bytes = read_part(&mut part, "file", limit).await?;
                upload = Some((filename, bytes));
            }
            "purpose" => {
                let bytes = read_part(&mut part, "purpose", 64).await?;
                purpose = Some(String::from_utf8_lossy(&bytes).trim().to_owned());
            }
            other => {
                return Err(ApiError::invalid_param(
                    other,
                    format!("unknown form part {other:?}; send `file` and `purpose`"),
                ))
            }
        }
    }
    if form.next().await.is_some() {
        return Err(ApiError::invalid_param(
            "file",
            "too many form parts; send `file` and `purpose`",
        ));
    }
    match purpose.as_deref() {
        Some("dispute_evidence") => {}
        None => {
            return Err(ApiError::invalid_param(
                "purpose",
                "purpose is required (dispute_evidence)",
            ))
        }
        Some(p) => {
            return Err(ApiError::invalid_param(
                "purpose",
                format!("unknown purpose {p:?}; the only purpose is dispute_evidence"),
            ))
        }
    }
    let (filename, bytes) =
        upload.ok_or_else(|| ApiError::invalid_param("file", "the `file` part is required"))?;
    if bytes.is_empty() {
        return Err(ApiError::invalid("file_empty", "the file is empty").param("file"));
    }
    let content_type = sniff(&bytes).ok_or_else(|| {
        ApiError::invalid(
            "file_type_unsupported",
            "send a PDF, PNG, JPEG or UTF-8 text file",
        )
        .param("file")
    })?;
    let row = file::Model {
        id: new_id("file"),
        merchant_id: caller.merchant_id.as_str().to_owned(),
        test_mode: caller.test_mode(),
        purpose: "dispute_evidence".to_owned(),
        filename,
        content_type: content_type.to_owned(),
        size: bytes.len() as i64,
        sha256: hex::encode(Sha256::digest(&bytes)),
        bytes,
        created_at: state.clock.now(),
    };
    let row = super::store::insert(&state.db, row).await?;
    Ok(HttpResponse::Ok().json(File::render(&row)))
}

/// A part's bytes: 413 past `limit`, 400 when the body breaks off.
async fn read_part(part: &mut Field, name: &str, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    while let Some(chunk) = part.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::invalid(
                "invalid_multipart",
                format!("the {name} part is broken: {e}"),
            )
            .param(name)
        })?;
        if out.len() + chunk.len() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorType::PayloadTooLarge,
                "file_too_large",
                format!("the {name} part is larger than {limit} bytes"),
            )
            .param(name));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
