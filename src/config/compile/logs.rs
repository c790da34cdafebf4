//! Access and error logs: one access-line format for the whole file, each
//! level's `error_log` list, and the files and syslog sockets opened once
//! per path or server (shared by every level and both logs that name them,
//! and kept open across a reload through [`Sinks`]).

use super::super::compiled::{CompileError, Config};
use crate::accesslog::{self, AccessLog, Sinks};
use crate::errlog::{ErrorLog, Severity, TargetSpec, syslog};
use crate::vars::{Context, LogEscape, Template};
use std::sync::Arc;

/// The access logs of the configuration being compiled.
pub(super) struct AccessLogs<'p> {
    sinks: Sinks,
    previous: Option<&'p Sinks>,
    format: Arc<Template>,
    /// The top level's error log (the process's).
    main: Arc<ErrorLog>,
    /// The error logs opened, by their list (levels that inherit a list
    /// share its log).
    error_logs: Vec<(Arc<Vec<TargetSpec>>, Arc<ErrorLog>)>,
}

impl<'p> AccessLogs<'p> {
    /// `log_format` (or nginx's default, `combined` or its JSON form when
    /// `log_format_escape = "json"`), escaped as `escape` says.
    pub(crate) fn new(
        (format, escape): (Option<Template>, LogEscape),
        top: (&Option<Arc<Vec<TargetSpec>>>, Option<Severity>),
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
        let mut logs = AccessLogs {
            sinks: Sinks::default(),
            previous: previous.map(|p| &p.sinks),
            format: Arc::new(format.with_escape(escape)),
            main: Arc::new(ErrorLog::stderr(top.1.unwrap_or(Severity::Info))),
            error_logs: Vec::new(),
        };
        // Without `error_log`: stderr from `error_log_level` (info) up.
        if let Some(list) = top.0 {
            logs.main = logs.error_log(&Some(list.clone()))?;
        }
        Ok(logs)
    }

    /// The error log of a level whose (inherited) list is `list`; the
    /// top level's when no level has one.
    pub(crate) fn error_log(
        &mut self,
        list: &Option<Arc<Vec<TargetSpec>>>,
    ) -> Result<Arc<ErrorLog>, CompileError> {
        let Some(list) = list else {
            return Ok(self.main.clone());
        };
        if let Some((_, log)) = self.error_logs.iter().find(|(l, _)| Arc::ptr_eq(l, list)) {
            return Ok(log.clone());
        }
        let log = ErrorLog::open(list, &mut self.sinks, self.previous).map_err(|source| {
            CompileError::ErrorLog {
                target: list
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                source,
            }
        })?;
        let log = Arc::new(log);
        self.error_logs.push((list.clone(), log.clone()));
        Ok(log)
    }

    /// The process's error log.
    pub(crate) fn main_error_log(&self) -> Arc<ErrorLog> {
        self.main.clone()
    }

    /// The log a level's `access_log` names: `None` when unset or `"off"`.
    pub(crate) fn open(
        &mut self,
        target: &Option<Option<String>>,
    ) -> Result<Option<Arc<AccessLog>>, CompileError> {
        let Some(Some(target)) = target else {
            return Ok(None);
        };
        let params = match target.strip_prefix("syslog:") {
            Some(args) => {
                Some(
                    syslog::Params::parse(args).map_err(|e| CompileError::AccessLog {
                        path: target.clone(),
                        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
                    })?,
                )
            }
            None => None,
        };
        let sink = match &params {
            Some(p) => self.sinks.syslog(&p.server, self.previous),
            None => self.sinks.get(target, self.previous),
        }
        .map_err(|source| CompileError::AccessLog {
            path: target.clone(),
            source,
        })?;
        Ok(Some(Arc::new(AccessLog::new(
            sink,
            self.format.clone(),
            params,
        ))))
    }

    /// The files opened, for the next reload.
    pub(crate) fn into_sinks(self) -> Sinks {
        self.sinks
    }
}
