//! `include_mcp_servers:`: the servers of an `mcpServers` file (Claude Desktop, Cursor,
//! VS Code) appended to `upstreams` with default settings, before `${VAR}` expansion and
//! validation, so they are checked like any other upstream. Problems are reported at
//! the `include_mcp_servers` line, naming the included file (with its own line when it
//! has one) and the server.

use std::path::{Path, PathBuf};

use super::Config;
use super::locate::{FieldPath, Problem, Segment};
use super::mcp_servers::read_mcp_servers;

/// What [`include`] added: where to report the included upstreams' problems.
pub(super) struct Included {
    /// The file as written in the config.
    file: String,
    /// Index in `upstreams` of the first included upstream.
    first: usize,
    /// The servers' names in the file, by upstream index from `first`.
    names: Vec<String>,
}

fn at() -> FieldPath {
    FieldPath::root().key("include_mcp_servers")
}

/// Appends the servers of `config.include_mcp_servers` to `config.upstreams` and its
/// warnings to `config.warnings`. `origin` is the config file's path: a relative include
/// is taken from its directory.
pub(super) fn include(config: &mut Config, origin: &str, out: &mut Vec<Problem>) -> Option<Included> {
    let written = config.include_mcp_servers.clone()?;
    let file = written.display().to_string();
    let path = resolve(Path::new(origin), &written);
    let servers = match read_mcp_servers(&path, &file, &config.name_separator) {
        Ok(servers) => servers,
        Err(err) => {
            let text = err.to_string();
            if err.errors().is_empty() {
                out.push(Problem::new(at(), text));
            }
            for issue in err.errors() {
                out.push(Problem::new(at(), issue.display(&file).to_string()));
            }
            return None;
        }
    };
    config.warnings.extend(servers.warnings);
    let first = config.upstreams.len();
    let mut names = Vec::new();
    for (upstream, original) in servers.upstreams.into_iter().zip(servers.original_names) {
        if let Some(i) = config.upstreams[..first].iter().position(|u| u.name == upstream.name) {
            let why = format!(
                "{file}: server {original:?} would be upstream {:?}, the name of upstreams[{i}]; rename one of them",
                upstream.name
            );
            out.push(Problem::new(at(), why));
            continue;
        }
        config.upstreams.push(upstream);
        names.push(original);
    }
    Some(Included { file, first, names })
}

/// `file` as seen from the directory of the config file `origin`.
fn resolve(origin: &Path, file: &Path) -> PathBuf {
    match origin.parent() {
        Some(dir) if file.is_relative() => dir.join(file),
        _ => file.to_path_buf(),
    }
}

impl Included {
    /// A problem of an included upstream, moved to the `include_mcp_servers` line and
    /// naming the file and server; other problems are returned as they are.
    pub(super) fn attribute(&self, problem: Problem) -> Problem {
        let segments = problem.path.segments();
        let Some((Segment::Key(list), Segment::Index(i))) = segments.first().zip(segments.get(1)) else {
            return problem;
        };
        let Some(name) = i.checked_sub(self.first).and_then(|k| self.names.get(k)).filter(|_| list == "upstreams")
        else {
            return problem;
        };
        let field = FieldPath::from_segments(segments[2..].to_vec());
        let field = if field.segments().is_empty() { String::new() } else { format!("{field}: ") };
        Problem::new(at(), format!("{}: server {name:?}: {field}{}", self.file, problem.message))
    }
}
