//! Configuration: the TOML file users edit (config/reference.md), in stages.
//!
//! 1. parse (`parse/`): TOML text → a draft, every table read by its
//!    schema. Pure: it reads the text and nothing else, but for a
//!    `listen` host name, resolved as nginx resolves it when it reads its
//!    configuration (`values::parse_listen`).
//! 2. files (`files.rs`): the files the text names are readable (only when
//!    loading: [`load`], [`load_text`]).
//! 3. validate (`validate.rs`): what spans tables (zones a level names, a
//!    location's `proxy_pass` from its server, duplicates) → [`Spec`].
//! 4. compile (`compile/`): [`Spec`] → the [`Config`] that serves, with
//!    nginx's inheritance (http → server → location) resolved and zones
//!    allocated (kept across reloads).
//!
//! Stages 1 to 3 report into one list: every problem of the file at once,
//! each as `FILE:LINE:COL: message`, in file order; nothing starts on a bad
//! file. The names of keys are the product's contract and follow nginx's
//! directives (`limit_req_status`, `limit_req_log_level`, …).

mod address;
mod compile;
mod compiled;
mod compress;
mod error;
mod files;
mod grpc;
mod parse;
mod spec;
mod upstream_tls;
mod validate;
pub(crate) mod values;

pub(crate) use address::Address;
pub use compiled::*;
pub use error::{ConfigError, ConfigErrors, LoadError};
pub use spec::*;
pub(crate) use values::ProxyPass;

pub use crate::limiter::{OnError, RedisConfig};
use error::Diagnostics;

/// Parse and validate configuration text; `file` names it in errors. Pure:
/// the files the text names (`[redis]` TLS files) are not looked at (see
/// [`load_text`]); a `listen` host name is resolved.
pub fn parse_str(file: &str, text: &str) -> Result<Spec, ConfigErrors> {
    stages(file, text, false)
}

/// What [`load`] does once it has read the file: parse and validate `text`,
/// the contents of `file`, and check that the files it names (relative to
/// `file`'s directory) can be read.
pub fn load_text(file: &str, text: &str) -> Result<Spec, ConfigErrors> {
    stages(file, text, true)
}

/// Read, parse and validate a configuration file.
pub fn load(path: &std::path::Path) -> Result<Spec, LoadError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: name.clone(),
        source,
    })?;
    load_text(&name, &text).map_err(LoadError::Invalid)
}

/// Parse, (with `read_files`) the file step, validate.
fn stages(file: &str, text: &str, read_files: bool) -> Result<Spec, ConfigErrors> {
    let mut d = Diagnostics::default();
    let Some(mut draft) = parse::parse(file, text, &mut d) else {
        return Err(d.into_errors(file, text));
    };
    if read_files {
        files::check(&mut draft, file, &mut d);
    }
    let spec = validate::validate(draft, &mut d);
    if d.is_empty() {
        Ok(spec)
    } else {
        Err(d.into_errors(file, text))
    }
}

#[cfg(test)]
mod stage_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_algorithms;
#[cfg(test)]
mod tests_compress;
#[cfg(test)]
mod tests_grpc;
#[cfg(test)]
mod tests_grpc_answers;
#[cfg(test)]
mod tests_headers;
#[cfg(test)]
mod tests_logs;
#[cfg(test)]
mod tests_tls;
#[cfg(test)]
mod tests_upstream_tls;
#[cfg(test)]
mod tests_upstreams;
#[cfg(test)]
mod tests_vars;
