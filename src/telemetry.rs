//! Structured logs through `tracing`: pretty for people, JSON for machines. Nothing logged
//! carries a key, a secret or a card number: requests are logged by method, path and id only.

use tracing_subscriber::{fmt, EnvFilter};

use crate::settings::{LogFormat, LogSettings};

/// Installs the global subscriber; `RUST_LOG` overrides the configured filter.
pub fn init(log: &LogSettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Standard error, so that commands' own output (JSON on stdout) stays clean.
    let builder = fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    let _ = match log.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
