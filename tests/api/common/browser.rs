//! A real browser for tests: headless Chromium driven through ChromeDriver, and the page
//! helpers the browser tests share (tests/api/browser.rs, tests/api/embed.rs).
//!
//! Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's `chromium` and
//! `chromium-driver`). When `CI` is true or `PAYD_BROWSER_TESTS=1` a browser test must run and
//! fails if they are missing; otherwise it is skipped, with one line saying why.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use actix_web::rt::time::{sleep, timeout};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long any one thing the page should do may take.
pub const WAIT: Duration = Duration::from_secs(15);
/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(100);
/// The bound on all three scenarios together, in case a WebDriver command hangs.
pub const ALL_SCENARIOS: Duration = Duration::from_secs(180);

pub fn truthy(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Whether to run: always when required (and then the browser must be there), otherwise only
/// when it is installed.
pub fn browser_available() -> bool {
    let required = truthy("CI") || truthy("PAYD_BROWSER_TESTS");
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        !required,
        "the browser test must run (CI or PAYD_BROWSER_TESTS is set) but {} not found: \
         apt-get install chromium chromium-driver",
        missing.join(" and ")
    );
    // Straight to stderr, past the test harness's capture, so a skip is seen.
    let _ = writeln!(
        std::io::stderr(),
        "browser test skipped: {} not installed (set PAYD_BROWSER_TESTS=1 to require it)",
        missing.join(" and ")
    );
    false
}

/// A ChromeDriver child process on a port it chose itself; killed when dropped.
pub struct ChromeDriver {
    child: Child,
    pub port: u16,
}

impl ChromeDriver {
    pub fn start() -> Self {
        let mut child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        // It prints "ChromeDriver was started successfully on port N."; a thread reads its
        // output to the end so that it never blocks on a full pipe.
        let stdout = child.stdout.take().expect("chromedriver stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line
                    .split_once("started successfully on port ")
                    .and_then(|(_, rest)| rest.trim_end_matches('.').trim().parse::<u16>().ok())
                {
                    let _ = tx.send(port);
                }
            }
        });
        let port = match rx.recv_timeout(WAIT) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromedriver did not say which port it listens on");
            }
        };
        Self { child, port }
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser session in a fresh profile.
pub async fn open_browser(driver: &ChromeDriver, profile: &Path) -> Client {
    let args = [
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let url = format!("http://127.0.0.1:{}", driver.port);
    let client = timeout(
        Duration::from_secs(60),
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&url),
    )
    .await
    .expect("chromedriver started a browser in time")
    .expect("browser session");
    client
        .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
            Some(WAIT),
            Some(WAIT),
            Some(Duration::ZERO),
        ))
        .await
        .expect("set WebDriver timeouts");
    client
}

/// The page in the browser.
pub struct Page<'a> {
    pub c: &'a Client,
}

impl Page<'_> {
    /// `data-status` on <body>, or what kept it from being read (the page may be navigating).
    pub async fn status(&self) -> Result<Option<String>, String> {
        self.c
            .execute(
                "return document.body ? document.body.getAttribute('data-status') : null;",
                vec![],
            )
            .await
            .map(|v| v.as_str().map(str::to_owned))
            .map_err(|e| e.to_string())
    }

    pub async fn text(&self, css: &str) -> String {
        match self.c.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// An input's current value.
    pub async fn value(&self, css: &str) -> String {
        self.element(css)
            .await
            .prop("value")
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// The id of the element that has the focus.
    pub async fn focused(&self) -> String {
        self.c
            .execute(
                "return document.activeElement ? document.activeElement.id : '';",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    pub async fn url(&self) -> String {
        self.c
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Waits until the page's `data-status` is `want`.
    pub async fn wait_status(&self, want: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen = self.status().await;
            if matches!(&seen, Ok(Some(s)) if s == want) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "the page never showed {want:?} within {WAIT:?}: data-status {seen:?}, \
                     #message {:?}, at {}",
                    self.text("#message").await,
                    self.url().await
                );
            }
            sleep(POLL).await;
        }
    }

    /// Waits until the browser is at a URL whose path is `path`.
    pub async fn wait_path(&self, path: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let url = self.c.current_url().await;
            if matches!(&url, Ok(u) if u.path() == path) {
                return;
            }
            if Instant::now() >= deadline {
                panic!("the browser never reached {path} within {WAIT:?}: at {url:?}");
            }
            sleep(POLL).await;
        }
    }

    /// Finds an element, waiting for the page to have it.
    pub async fn element(&self, css: &str) -> fantoccini::elements::Element {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.c.find(Locator::Css(css)).await {
                Ok(e) => return e,
                Err(e) if Instant::now() >= deadline => {
                    panic!("no {css} within {WAIT:?} at {}: {e}", self.url().await)
                }
                Err(_) => sleep(POLL).await,
            }
        }
    }

    /// Whether a `<script>` with inline code, added to the page, runs (the page's
    /// `Content-Security-Policy` forbids it on the hosted pages).
    pub async fn inline_script_runs(&self) -> bool {
        self.c
            .execute(
                "window.inlineRan = false;
                 var s = document.createElement('script');
                 s.textContent = 'window.inlineRan = true;';
                 document.documentElement.appendChild(s);
                 return window.inlineRan;",
                vec![],
            )
            .await
            .expect("add an inline script")
            == json!(true)
    }

    pub async fn attr(&self, css: &str, name: &str) -> String {
        self.element(css)
            .await
            .attr(name)
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub async fn click(&self, css: &str) {
        self.element(css).await.click().await.expect("click");
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let input = self.element(css).await;
        input.clear().await.expect("clear input");
        if !text.is_empty() {
            input.send_keys(text).await.expect("type");
        }
    }

    /// Types a card (expiry 12 / 35, CVC 123) and presses Pay.
    pub async fn pay_with(&self, number: &str) {
        self.type_into("#number", number).await;
        self.type_into("#exp", "1235").await;
        self.type_into("#cvc", "123").await;
        self.element("#submit")
            .await
            .click()
            .await
            .expect("click Pay");
    }
}
