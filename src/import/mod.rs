//! `sluice import-nginx`: an nginx.conf (with its `include`s) translated
//! into sluice's TOML, everything it cannot translate reported.
//!
//! 1. read (`lex.rs`, `tree.rs`): nginx's tokens and blocks, our own
//!    reader, each directive with its file and line; includes expanded.
//! 2. translate (`top.rs`, `level.rs`, `server.rs`, `upstream.rs`): each
//!    directive into a key of a TOML document (`doc.rs`) commented with the
//!    nginx line it came from, or into a [`Report`].
//! 3. check: the text is run through sluice's own configuration stages
//!    (parse, validate: what `sluice check` does without reading the files
//!    the text names) and a translation that does not pass is an internal
//!    error, never output.

mod compress;
mod doc;
mod headers;
mod level;
mod lex;
mod limits;
mod logs;
mod pages;
mod pass;
mod quic;
mod report;
mod server;
mod server_keys;
mod shape;
mod top;
mod tree;
mod upstream;
mod values;
mod vars;

pub use report::{Kind, Report};

use std::path::{Path, PathBuf};

/// What the command line adds to the file.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The server that now serves what nginx served from files (`root`,
    /// `try_files`, …): such locations proxy to it. Without it they
    /// answer 404.
    pub backend: Option<String>,
    /// nginx's prefix (`nginx -p`): relative `access_log`, `pid`,
    /// `client_body_temp_path` paths are made absolute under it.
    pub prefix: Option<PathBuf>,
    /// The directory the output is written to (relative certificate paths
    /// are kept when it is the nginx.conf's own).
    pub out_dir: Option<PathBuf>,
}

/// A translation: the TOML text and what it left out.
#[derive(Debug)]
pub struct Translation {
    pub toml: String,
    pub reports: Vec<Report>,
    /// How the file was read, when not as a whole nginx.conf: said on
    /// stderr before the reports.
    pub notices: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file cannot be read, or is not nginx syntax (`FILE:LINE: …`).
    #[error("{0}")]
    Read(String),
    /// A command-line value is wrong.
    #[error("{0}")]
    Usage(String),
    /// The file reads, but nginx would refuse it (`no "events" section in
    /// configuration`), or it leaves sluice nothing to listen on:
    /// `FILE[:LINE]: …`.
    #[error("{0}")]
    Config(String),
    /// The translation does not pass sluice's check: a bug of the
    /// translator.
    #[error("internal: the translation does not check: {0}")]
    Internal(String),
}

/// Translate the nginx configuration at `path`.
pub fn import(path: &Path, opts: &Options) -> Result<Translation, ImportError> {
    if let Some(b) = &opts.backend {
        crate::config::values::parse_proxy_pass(b)
            .map_err(|e| ImportError::Usage(format!("--backend: {e}")))?;
    }
    let tree = tree::read(path).map_err(|e| ImportError::Read(e.0))?;
    let (tree, site) = shape::whole(path, tree).map_err(ImportError::Config)?;
    let conf_dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut cx = Cx::new(opts, conf_dir);
    let mut notices = Vec::new();
    cx.site = site;
    if site {
        notices.push(format!(
            "{}: read as the contents of an http block (a site file)",
            path.display()
        ));
        cx.note(
            "The file has no http block: it was read as the contents of one, as nginx reads a \
             site file (sites-available/*, conf.d/*.conf) through an include inside http.",
        );
    }
    let toml = top::translate(&mut cx, &tree).map_err(ImportError::Config)?;
    notices.extend(check(&toml)?);
    Ok(Translation {
        toml,
        reports: cx.reports,
        notices,
    })
}

/// Parse and validate `toml` as `sluice check` does (without reading the
/// certificate files it names, which may live on another machine).
///
/// A cycle of `map` variables is the nginx file's own, not the
/// translator's: nginx loads it and answers 500 to each request that reads
/// one of them ("cycle while evaluating variable"), sluice refuses it. It
/// is reported at the nginx line the failing key came from (the comment
/// above it).
///
/// A `listen` host name this machine cannot resolve is not an error: the
/// file is for the machine sluice runs on (a Docker service name, say),
/// which resolves it when it loads the file. `Ok` says each such line.
fn check(toml: &str) -> Result<Vec<String>, ImportError> {
    let Err(errors) = crate::config::parse_str("import.toml", toml) else {
        return Ok(Vec::new());
    };
    let lines: Vec<&str> = toml.lines().collect();
    let unresolved = |e: &crate::config::ConfigError| {
        e.message.starts_with("host not found in ") && e.message.ends_with(" of the \"listen\" key")
    };
    let (hosts, errors): (Vec<_>, Vec<_>) = errors.0.into_iter().partition(unresolved);
    if errors.is_empty() {
        let notice = |e: &crate::config::ConfigError| {
            let at = origin(&lines, e.line).unwrap_or_else(|| "import.toml".into());
            let host = e.message.trim_end_matches(" of the \"listen\" key");
            format!(
                "{at}: {host} on this machine: sluice resolves it when it loads the file, on the \
                 machine it runs on (nginx does at start)"
            )
        };
        return Ok(hosts.iter().map(notice).collect());
    }
    let cycle = |e: &crate::config::ConfigError| {
        e.message
            .starts_with("cycle while evaluating variable")
            .then(|| origin(&lines, e.line))
            .flatten()
    };
    if let Some(origins) = errors.iter().map(cycle).collect::<Option<Vec<_>>>() {
        let lines = errors.iter().zip(origins).map(|(e, at)| {
            format!(
                "{at}: {}: nginx loads this and answers 500 to every request that reads \
                 the variable; sluice refuses it",
                e.message
            )
        });
        return Err(ImportError::Config(lines.collect::<Vec<_>>().join("\n")));
    }
    let real: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    Err(ImportError::Internal(format!(
        "\n{}\n--- the translation ---\n{toml}",
        real.join("\n")
    )))
}

/// `FILE:LINE` of the nginx directive that TOML line `line` (1-based) was
/// translated from: the nearest `# FILE:LINE: directive` comment above it.
fn origin(lines: &[&str], line: usize) -> Option<String> {
    lines[..line.min(lines.len())].iter().rev().find_map(|l| {
        let comment = l.strip_prefix("# ")?;
        // `FILE:LINE: …`, FILE possibly holding colons itself.
        let end = comment.find(": ")?;
        let (file, number) = comment[..end].rsplit_once(':')?;
        (!file.is_empty() && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
            .then(|| comment[..end].to_string())
    })
}

/// The translation's state: the options, what was reported, and what the
/// whole file says that single directives need.
pub(crate) struct Cx<'a> {
    opts: &'a Options,
    conf_dir: PathBuf,
    pub reports: Vec<Report>,
    /// Variables the configuration makes (`map`, `geo`, `set`, …): name →
    /// `map at FILE:LINE`.
    made: Vec<(String, String)>,
    /// The `log_format` the first access log uses, and its line.
    used_format: Option<(String, String)>,
    /// The addresses that speak TLS (some server's `listen … ssl`).
    pub tls_addrs: Vec<String>,
    /// The addresses that read the PROXY protocol header (some server's
    /// `listen … proxy_protocol`).
    pub pp_addrs: Vec<String>,
    /// Every address some server listens on.
    pub all_addrs: Vec<String>,
    /// What differs everywhere (see [`Cx::note`]).
    pub notes: Vec<String>,
    /// The `map` and `geo` variables translated (`[maps]`, `[geos]`).
    pub vars: Vec<String>,
    /// (address, lowercased server name) already taken, in file order.
    pub names_on: Vec<(String, String)>,
    /// What makes nginx refuse the whole file (a TLS listen without a
    /// certificate): the translation is then a user error.
    pub fatal: Option<String>,
    /// The file's `limit_req_zone` and `limit_conn_zone` lines.
    pub zones: Vec<limits::ZoneDef>,
    /// The names of the file's `upstream` blocks.
    pub upstreams: Vec<String>,
    /// Whether the file is a site file (read as the contents of `http`).
    pub site: bool,
}

impl<'a> Cx<'a> {
    fn new(opts: &'a Options, conf_dir: PathBuf) -> Cx<'a> {
        Cx {
            opts,
            conf_dir,
            reports: Vec::new(),
            made: Vec::new(),
            used_format: None,
            tls_addrs: Vec::new(),
            pp_addrs: Vec::new(),
            all_addrs: Vec::new(),
            notes: Vec::new(),
            vars: Vec::new(),
            names_on: Vec::new(),
            fatal: None,
            zones: Vec::new(),
            upstreams: Vec::new(),
            site: false,
        }
    }

    /// `--backend`: where what nginx served from files is now.
    pub fn backend(&self) -> Option<&str> {
        self.opts.backend.as_deref()
    }

    pub fn report(&mut self, kind: Kind, d: &tree::Directive, why: impl Into<String>) {
        self.reports.push(Report::new(kind, d, why));
    }

    /// A path nginx resolves against its prefix (logs, pid, temp files).
    pub fn path(&mut self, p: &str) -> String {
        match &self.opts.prefix {
            Some(prefix) if Path::new(p).is_relative() => prefix.join(p).display().to_string(),
            None if Path::new(p).is_relative() => {
                self.note(
                    "Relative paths of logs, pid and temporary files: nginx resolves them against \
                     its prefix (nginx -p), sluice against its working directory (--prefix DIR \
                     makes them absolute).",
                );
                p.to_string()
            }
            _ => p.to_string(),
        }
    }

    /// Something nginx refuses the file for, at its line: the import
    /// fails with every such line.
    pub fn refuse(&mut self, msg: String) {
        match &mut self.fatal {
            Some(f) if f.lines().any(|l| l == msg) => {}
            Some(f) => {
                f.push('\n');
                f.push_str(&msg);
            }
            None => self.fatal = Some(msg),
        }
    }

    /// A difference the whole translation has, said once at its top.
    pub fn note(&mut self, text: &str) {
        if !self.notes.iter().any(|n| n == text) {
            self.notes.push(text.to_string());
        }
    }

    /// A path nginx resolves against the conf prefix (certificates); sluice
    /// resolves it against the TOML file's directory.
    pub fn conf_path(&self, p: &str) -> String {
        if Path::new(p).is_absolute() {
            return p.to_string();
        }
        let same_dir = match &self.opts.out_dir {
            Some(out) => same(out, &self.conf_dir),
            None => false,
        };
        if same_dir {
            return p.to_string();
        }
        let dir = std::fs::canonicalize(&self.conf_dir).unwrap_or(self.conf_dir.clone());
        dir.join(p).display().to_string()
    }

    /// Why sluice lacks these variables, for a report.
    pub fn why_var(&self, vars: &[String]) -> String {
        let made: Vec<String> = vars
            .iter()
            .filter_map(|v| {
                self.made
                    .iter()
                    .find(|(n, _)| n == v)
                    .map(|(_, w)| format!("${v} is made by {w}"))
            })
            .collect();
        if made.is_empty() {
            "is not a variable sluice has".into()
        } else {
            format!("({}, not translated)", made.join("; "))
        }
    }

    /// An access log uses the `log_format` `name`: sluice has one format
    /// for the whole file, the first one used.
    pub fn use_log_format(&mut self, name: &str, d: &tree::Directive) {
        match &self.used_format {
            None => self.used_format = Some((name.to_string(), d.origin.short())),
            Some((first, _)) if first == name => {}
            Some((first, at)) => {
                let why = format!(
                    "sluice has one log_format for all access logs: this one writes \"{first}\" (as at {at}), not \"{name}\""
                );
                self.report(Kind::Partial, d, why);
            }
        }
    }
}

/// Reports in file order: files as they were first reported (the order
/// they were read in, near enough), lines within each.
pub(crate) fn sort(reports: &mut [Report]) {
    let mut files: Vec<String> = Vec::new();
    for r in reports.iter() {
        let f = r.file().to_string();
        if !files.contains(&f) {
            files.push(f);
        }
    }
    reports.sort_by_key(|r| {
        let f = files.iter().position(|f| f == r.file()).unwrap_or(0);
        (f, r.line_number())
    });
}

fn same(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compress;
#[cfg(test)]
mod tests_grpc;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_logs;
#[cfg(test)]
mod tests_pages;
#[cfg(test)]
mod tests_proxy;
#[cfg(test)]
mod tests_quic;
#[cfg(test)]
mod tests_read;
#[cfg(test)]
mod tests_shape;
#[cfg(test)]
mod tests_vars;
