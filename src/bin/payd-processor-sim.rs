//! `payd-processor-sim`: the reference simulator of the remote processor protocol.
//! `payd-processor-sim --listen 127.0.0.1:9090 --secret <shared secret>`

use clap::Parser;
use payd::processors::sim::{serve, Sim};

#[derive(Parser)]
#[command(
    name = "payd-processor-sim",
    version,
    about = "A simulated remote processor for payd"
)]
struct Cli {
    #[arg(long, default_value = "127.0.0.1:9090")]
    listen: String,
    /// The secret shared with payd's processor account.
    #[arg(long, env = "PAYD_SIM_SECRET")]
    secret: String,
}

fn main() -> std::io::Result<()> {
    let cli = Cli::parse();
    actix_web::rt::System::new().block_on(async move {
        let (port, _handle, server) = serve(&cli.listen, Sim::new(&cli.secret))?;
        eprintln!("payd-processor-sim listening on port {port}");
        server.await
    })
}
