//! The `payd` command line: `serve` (default), `migrate`, `backup`, `health`, `listen`,
//! `admin create-merchant`, `admin rotate-master-key`.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use clap::{Parser, Subcommand, ValueEnum};
use payd::{
    accounts::{api::CreatedMerchant, store},
    auth::Mode,
    clock::{Clock, SystemClock},
    db, sealed, telemetry, Application, Settings,
};

#[derive(Parser)]
#[command(name = "payd", version, about = "A self-hostable payment service")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (the default).
    Serve,
    /// Apply pending database migrations and exit. Needs only the database URL.
    Migrate,
    /// Write a consistent copy of the SQLite database to a new file while payd serves
    /// (docs/backups.md). Needs only the database URL.
    Backup {
        /// The new file to write; an existing one is refused.
        #[arg(long)]
        to: PathBuf,
    },
    /// Exit 0 when payd on this host answers `GET /health/ready` with 200, else 1: the
    /// container image's health check.
    Health {
        /// What to ask; by default `/health/ready` on 127.0.0.1 at the port of `listen`.
        #[arg(long)]
        url: Option<String>,
    },
    /// For development: forward a merchant's new events to a local URL, signed as real
    /// deliveries with a secret printed on the first line.
    Listen {
        /// Where to POST each event (`http://localhost:4242/webhooks`).
        #[arg(long)]
        forward_to: String,
        /// The merchant's secret key.
        #[arg(long, env = "PAYD_API_KEY", hide_env_values = true)]
        api_key: String,
        /// The payd service to follow.
        #[arg(long, env = "PAYD_BASE_URL", default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// Milliseconds between two polls of the events.
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
    },
    /// Operator tasks.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create a merchant with a default shop and print its id, shop id and keys as JSON.
    CreateMerchant {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum, default_value_t = KeyMode::Sandbox)]
        mode: KeyMode,
    },
    /// Seal every stored secret with a new master key (32 bytes, base64), in batches; safe to
    /// interrupt and run again. Then start payd with `security.master_key` set to the new key
    /// and the old one in `security.previous_master_keys`.
    RotateMasterKey {
        #[arg(long)]
        new_key: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum KeyMode {
    Sandbox,
    Production,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve);
    // What needs only the database or the listen address runs without the application's
    // secrets: an operator migrates or backs up with the database URL alone.
    let loaded = match command {
        Command::Migrate | Command::Backup { .. } | Command::Health { .. } => {
            Settings::load_for_database()
        }
        _ => Settings::load(),
    };
    let settings = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("payd: {}", telemetry::redact_credentials(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    telemetry::init(&settings.log);
    // Entered for the thread's life, so a task still holding a pooled connection when the
    // System stops is dropped with a runtime current (see `entered_runtime`).
    let system = actix_web::rt::System::with_tokio_rt(|| {
        payd_actors::entered_runtime().expect("start the main runtime")
    });
    let result = system.block_on(run(command, settings));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A connection string in an error never shows its password.
            eprintln!("payd: {}", telemetry::redact_credentials(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, settings: Settings) -> anyhow::Result<()> {
    match command {
        Command::Serve => {
            Application::build(settings, Arc::new(SystemClock))
                .await?
                .run_until_stopped()
                .await?
        }
        Command::Listen {
            forward_to,
            api_key,
            base_url,
            interval_ms,
        } => {
            payd::listen::run(payd::listen::Listen {
                base_url,
                api_key,
                forward_to,
                interval: std::time::Duration::from_millis(interval_ms.max(10)),
            })
            .await?
        }
        Command::Migrate => {
            let conn = db::connect_to(&settings.database, None).await?;
            let migrated = db::migrate(&settings.database.url, &conn).await?;
            println!("payd: {migrated}");
        }
        Command::Backup { to } => {
            let bytes = db::backup(&settings.database.url, &to).await?;
            println!("payd: backed up to {} ({bytes} bytes)", to.display());
        }
        Command::Health { url } => {
            let url = url.unwrap_or_else(|| ready_url(&settings.listen));
            let answer = awc::Client::default()
                .get(&url)
                .timeout(std::time::Duration::from_secs(3))
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
            anyhow::ensure!(
                answer.status().is_success(),
                "{url} answered {}",
                answer.status()
            );
        }
        Command::Admin {
            command: AdminCommand::CreateMerchant { name, mode },
        } => {
            let name = payd::accounts::api::parse_name("name", &name)
                .map_err(|e| anyhow::anyhow!(e.message))?;
            let mode = match (mode, settings.mode) {
                (KeyMode::Sandbox, _) => Mode::Test,
                (KeyMode::Production, payd::settings::DeploymentMode::Production) => Mode::Live,
                (KeyMode::Production, payd::settings::DeploymentMode::Sandbox) => {
                    anyhow::bail!(
                        "this deployment runs in sandbox mode (PAYD_MODE=production for live keys)"
                    )
                }
            };
            let conn = payd::commit::Db::connect(&settings.database).await?;
            db::migrate(&settings.database.url, conn.conn()).await?;
            let created = store::create_merchant(
                &conn,
                SystemClock.now(),
                &settings.security.key_pepper,
                &name,
                mode,
            )
            .await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&CreatedMerchant::from(created))?
            );
        }
        Command::Admin {
            command: AdminCommand::RotateMasterKey { new_key },
        } => {
            let ring = sealed::Keyring::from_settings(&settings.security)?;
            let rotated = ring.rotated_to(&new_key)?;
            let conn = payd::commit::Db::connect(&settings.database).await?;
            db::migrate(&settings.database.url, conn.conn()).await?;
            let resealed = sealed::reseal(&conn, &rotated).await?;
            println!(
                "payd: {resealed} stored secrets sealed with master key {}. Start payd with security.master_key set to the new key, and the old one in security.previous_master_keys until no instance runs with the old key.",
                rotated.current_id()
            );
        }
    }
    Ok(())
}

/// `/health/ready` on this host at the port of `listen` (an unspecified address is asked on
/// loopback).
fn ready_url(listen: &str) -> String {
    let port = listen.rsplit_once(':').map_or("8080", |(_, port)| port);
    format!("http://127.0.0.1:{port}/health/ready")
}
