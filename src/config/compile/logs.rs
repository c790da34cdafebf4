//! Access logs: one line format for the whole file, and the files opened
//! once per path (shared by every level that names them, and kept open
//! across a reload through [`Sinks`]).

use super::super::compiled::{CompileError, Config};
use crate::accesslog::{self, AccessLog, Sinks};
use crate::vars::{Context, LogEscape, Template};
use std::sync::Arc;

/// The access logs of the configuration being compiled.
pub(super) struct AccessLogs<'p> {
    sinks: Sinks,
    previous: Option<&'p Sinks>,
    format: Arc<Template>,
}

impl<'p> AccessLogs<'p> {
    /// `log_format` (or nginx's default, `combined` or its JSON form when
    /// `log_format_escape = "json"`), escaped as `escape` says.
    pub(crate) fn new(
        format: Option<Template>,
        escape: LogEscape,
        previous: Option<&'p Config>,
    ) -> Result<AccessLogs<'p>, CompileError> {
        let format = match format {
            Some(f) => f,
            None => Template::parse(
                match escape {
                    LogEscape::Json => accesslog::DEFAULT_JSON_FORMAT,
                    _ => accesslog::DEFAULT_FORMAT,
                },
                Context::Log,
            )
            .map_err(|e| CompileError::DefaultLogFormat(e.message))?,
        };
        Ok(AccessLogs {
            sinks: Sinks::default(),
            previous: previous.map(|p| &p.sinks),
            format: Arc::new(format.with_escape(escape)),
        })
    }

    /// The log a level's `access_log` names: `None` when unset or `"off"`.
    pub(crate) fn open(
        &mut self,
        target: &Option<Option<String>>,
    ) -> Result<Option<Arc<AccessLog>>, CompileError> {
        let Some(Some(target)) = target else {
            return Ok(None);
        };
        let sink =
            self.sinks
                .get(target, self.previous)
                .map_err(|source| CompileError::AccessLog {
                    path: target.clone(),
                    source,
                })?;
        Ok(Some(Arc::new(AccessLog::new(sink, self.format.clone()))))
    }

    /// The files opened, for the next reload.
    pub(crate) fn into_sinks(self) -> Sinks {
        self.sinks
    }
}
