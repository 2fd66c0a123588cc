//! What asks for a reload besides the admin API: SIGHUP, and a change of the contents of
//! the configuration file or of the `mcpServers` file it includes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify_debouncer_full::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use crate::config::Config;
use crate::control::Reloads;
use crate::signals::Hangups;

/// How long a file must be quiet before a change of it is read.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// The cause of a reload asked for by a change of a watched file.
pub(super) const CAUSE_FILE: &str = "file changed";

/// Asks for a reload on each SIGHUP, until the gateway stops.
pub(super) fn watch_hangups(mut hangups: Hangups, reloads: Reloads) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            hangups.recv().await;
            reloads.ask("SIGHUP");
        }
    })
}

/// The files a configuration is read from, watched for changes: the directories that
/// hold them (editors and Kubernetes replace a file rather than write it, and a
/// ConfigMap's file is a link whose target changes), with their contents as last seen, so
/// that only a change of contents asks for a reload.
pub(super) struct Watched {
    files: Vec<(PathBuf, Option<Vec<u8>>)>,
    /// Stops watching when dropped.
    _watcher: Option<Debouncer<RecommendedWatcher, RecommendedCache>>,
}

impl Watched {
    /// Watches the files of `config`, read from `path`: the file itself and the
    /// `mcpServers` file it includes.
    pub(super) fn new(path: &Path, config: &Config, reloads: Reloads) -> Watched {
        let mut files = vec![path.to_path_buf()];
        if let Some(included) = &config.include_mcp_servers {
            files.push(path.parent().map_or_else(|| included.clone(), |dir| dir.join(included)));
        }
        let files: Vec<_> = files.into_iter().map(|f| (f.clone(), std::fs::read(&f).ok())).collect();
        // Only events about the watched files count (or about a ConfigMap's `..data`
        // links, which stand for them): a log written beside the configuration is not a
        // change of it.
        let names: Vec<std::ffi::OsString> = files.iter().filter_map(|(f, _)| f.file_name().map(Into::into)).collect();
        let relevant = move |path: &Path| {
            path.file_name()
                .is_some_and(|name| names.iter().any(|n| n == name) || name.to_string_lossy().starts_with(".."))
        };
        let handler = move |result: DebounceEventResult| {
            if result.is_ok_and(|events| events.iter().any(|e| e.paths.iter().any(|p| relevant(p)))) {
                reloads.ask(CAUSE_FILE);
            }
        };
        let watcher = match new_debouncer(DEBOUNCE, None, handler) {
            Ok(mut watcher) => {
                let mut dirs: Vec<PathBuf> = files.iter().map(|(f, _)| directory_of(f)).collect();
                dirs.dedup();
                for dir in dirs {
                    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch for changes of the configuration; reload with SIGHUP or POST /admin/reload");
                    }
                }
                Some(watcher)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for changes of the configuration; reload with SIGHUP or POST /admin/reload");
                None
            }
        };
        Watched { files, _watcher: watcher }
    }

    /// Whether a watched file's contents differ from those last seen (and remembers the
    /// new ones).
    pub(super) fn changed(&mut self) -> bool {
        let mut changed = false;
        for (path, seen) in &mut self.files {
            let now = std::fs::read(&*path).ok();
            if now != *seen {
                *seen = now;
                changed = true;
            }
        }
        changed
    }

    /// Whether these are the files of `config`, read from `path`.
    pub(super) fn covers(&self, path: &Path, config: &Config) -> bool {
        let included =
            config.include_mcp_servers.as_ref().map(|i| path.parent().map_or_else(|| i.clone(), |d| d.join(i)));
        self.files.get(1).map(|(f, _)| f) == included.as_ref()
    }
}

/// The directory that holds `file` (`.` for a bare file name).
fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
