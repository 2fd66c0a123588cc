//! Headless Chromium (Debian's `chromium`, which `tests/run` installs): a page's DOM
//! after its scripts ran, and screenshots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use super::TestDir;

/// Longest a Chromium run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// The browser binary.
pub struct Chromium {
    bin: PathBuf,
}

impl Chromium {
    /// `$SEAWALL_TEST_CHROMIUM`, else `/usr/bin/chromium`; panics with what to install
    /// when neither is there (a missing browser fails the test, never skips it).
    pub fn find() -> Chromium {
        let bin = std::env::var_os("SEAWALL_TEST_CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        assert!(
            bin.is_file(),
            "headless Chromium not found at {}: install Debian's `chromium` (`bash tests/run` does: apt-get \
             install -y chromium) or set SEAWALL_TEST_CHROMIUM to a Chromium binary",
            bin.display()
        );
        Chromium { bin }
    }

    /// Loads `url`, lets its scripts run for 5 s of virtual time (fetches finish first),
    /// and returns the serialised DOM.
    pub async fn dump_dom(&self, url: &str) -> String {
        let out = self.run(url, &["--dump-dom"]).await;
        let dom = String::from_utf8_lossy(&out).into_owned();
        assert!(dom.contains("<html"), "chromium printed no DOM for {url}:\n{dom}");
        dom
    }

    /// Loads `url` in a window of `width`×`height` and writes a PNG screenshot to `to`.
    pub async fn screenshot(&self, url: &str, to: &Path, width: u32, height: u32) {
        let file = format!("--screenshot={}", to.display());
        let size = format!("--window-size={width},{height}");
        self.run(url, &[&file, &size]).await;
        let png = std::fs::read(to).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", to.display()));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", to.display());
    }

    async fn run(&self, url: &str, extra: &[&str]) -> Vec<u8> {
        let profile = TestDir::new("chromium");
        let mut cmd = Command::new(&self.bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .kill_on_drop(true);
        let output = tokio::time::timeout(RUN_TIMEOUT, cmd.output())
            .await
            .unwrap_or_else(|_| panic!("chromium did not finish within {RUN_TIMEOUT:?} for {url}"))
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        assert!(
            output.status.success(),
            "chromium failed ({}) for {url}:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }
}
