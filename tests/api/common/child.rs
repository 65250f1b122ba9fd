//! The `payd` binary run as a child process, as an operator runs it: for what needs a process
//! of its own (SIGTERM and SIGKILL, the CLI, start-up, and the metrics, whose recorder is
//! global to a process and would count every other test's server in this one).

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_payd");

pub fn payd(db_url: &str, data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PAYD_DATABASE_URL", db_url)
        .env("PAYD_LISTEN", "127.0.0.1:0")
        .env("PAYD_LOG__FORMAT", "json")
        .env("PAYD_SANDBOX__DATA_DIR", data_dir)
        .env("PAYD_ADMIN_KEY", super::ADMIN_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A running `payd serve` and the port it announced.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The "payd listening" log line.
    pub ready: String,
    pub lines: mpsc::Receiver<String>,
}

impl Server {
    // The child is waited for by `stop` or `Drop`.
    #[allow(clippy::zombie_processes)]
    pub fn start(mut cmd: Command) -> Server {
        let mut child = cmd.arg("serve").spawn().expect("payd starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) else {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("payd exited with {status}: {seen:?}");
                }
                continue;
            };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["message"] == "payd listening" {
                    let port = v["port"].as_u64().unwrap() as u16;
                    wait_until_serving(port, deadline);
                    return Server {
                        child,
                        port,
                        ready: line,
                        lines,
                    };
                }
            }
            seen.push(line);
        }
        let _ = child.kill();
        panic!("payd did not announce its port: {seen:?}");
    }

    pub fn output_so_far(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.stop()
    }

    /// Stops the server and returns its exit status and everything it printed on stdout.
    pub fn stop_and_read_stdout(mut self) -> (std::process::ExitStatus, String) {
        let status = self.stop();
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        }
        (status, out)
    }

    pub fn stop(&mut self) -> std::process::ExitStatus {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("payd did not stop on SIGTERM");
    }
}

impl Server {
    /// SIGKILL: no drain, no cleanup.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    /// A failed test leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls until the server answers HTTP (a bound port accepts connections before the server
/// runs; it installs its signal handlers as it starts serving).
pub fn wait_until_serving(port: u16, deadline: Instant) {
    use std::io::{Read, Write};
    while Instant::now() < deadline {
        if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let request = "GET /health/live HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
            let mut answer = String::new();
            if conn.write_all(request.as_bytes()).is_ok()
                && conn.read_to_string(&mut answer).is_ok()
                && answer.starts_with("HTTP/1.1 200")
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("payd never accepted connections on {port}");
}

pub async fn get(port: u16, path: &str, key: Option<&str>) -> (u16, serde_json::Value) {
    let mut req = super::client().get(format!("http://127.0.0.1:{port}{path}"));
    if let Some(key) = key {
        req = req.insert_header(("api-key", key));
    }
    let mut res = req.send().await.expect("request");
    let body = res.body().await.unwrap();
    (
        res.status().as_u16(),
        serde_json::from_slice(&body).unwrap_or_default(),
    )
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn post_json(
    port: u16,
    path: &str,
    key: &str,
    shop: Option<&str>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let mut req = super::client()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .insert_header(("api-key", key));
    if let Some(shop) = shop {
        req = req.insert_header(("x-profile-id", shop));
    }
    let mut res = req.send_json(&body).await.expect("request");
    let bytes = res.body().await.unwrap();
    (
        res.status().as_u16(),
        serde_json::from_slice(&bytes).unwrap_or_default(),
    )
}

pub fn fast_retries(mut cmd: Command) -> Command {
    cmd.env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
        .env("PAYD_LIMITS__REQUESTS_PER_SECOND", "0")
        .env(
            "PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE",
            "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1",
        )
        .env("PAYD_WEBHOOKS__POLL_INTERVAL_MS", "100")
        // A lease held by a killed instance runs out quickly.
        .env("PAYD_WEBHOOKS__LEASE_SECS", "2")
        .env("PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS", "2");
    cmd
}

/// Creates a merchant through the admin route; returns (secret key, shop).
pub async fn create_merchant(port: u16) -> (String, String) {
    let (status, m) = post_json(
        port,
        "/admin/merchants",
        super::ADMIN_KEY,
        None,
        serde_json::json!({"name": "Acme"}),
    )
    .await;
    assert_eq!(status, 201, "{m}");
    (
        m["secret_key"].as_str().unwrap().to_owned(),
        m["profile_id"].as_str().unwrap().to_owned(),
    )
}

/// Creates a merchant with an endpoint at `hook_url`; returns (secret key, shop).
pub async fn merchant_with_endpoint(port: u16, hook_url: &str) -> (String, String) {
    let (key, shop) = create_merchant(port).await;
    let mut res = super::client()
        .put(format!(
            "http://127.0.0.1:{port}/account/shops/{shop}/webhook"
        ))
        .insert_header(("api-key", key.as_str()))
        .send_json(&serde_json::json!({"url": hook_url}))
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "{:?}", res.body().await);
    (key, shop)
}

pub async fn pay(port: u16, key: &str, shop: &str) -> String {
    let body = serde_json::json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": super::card("4242424242424242")});
    let (status, p) = post_json(port, "/payments", key, Some(shop), body).await;
    assert_eq!(status, 201, "{p}");
    p["payment_id"].as_str().unwrap().to_owned()
}

/// The merchant a secret key belongs to.
pub async fn merchant_id_of(port: u16, key: &str) -> String {
    get(port, "/account", Some(key)).await.1["merchant_id"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}
