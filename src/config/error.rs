//! Configuration errors: every problem of a file, each as
//! `FILE:LINE:COL: message` followed by the offending line and a caret.

use std::fmt;
use std::ops::Range;

/// One problem, located in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub col: usize,
    pub message: String,
    /// The text of the offending line.
    pub source_line: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// All problems of one file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "{e}")?;
            let gutter = e.line.to_string().len();
            writeln!(f, "{:gutter$} |", "")?;
            writeln!(f, "{} | {}", e.line, e.source_line)?;
            write!(f, "{:gutter$} | {:>col$}", "", "^", col = e.col)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(ConfigErrors),
}

/// Collects problems as byte spans while a file is read; turns them into
/// located errors at the end.
#[derive(Default)]
pub(crate) struct Diagnostics {
    items: Vec<(Range<usize>, String)>,
}

impl Diagnostics {
    pub(crate) fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.items.push((span, message.into()));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn into_errors(mut self, file: &str, text: &str) -> ConfigErrors {
        self.items.sort_by_key(|(s, _)| s.start);
        self.items.dedup();
        // In offset order, lines counted on from the previous error's: a
        // file with thousands of errors is not read once per error.
        let mut counted = (0, 1);
        ConfigErrors(
            self.items
                .into_iter()
                .map(|(span, message)| locate(file, text, span.start, message, &mut counted))
                .collect(),
        )
    }
}

/// The error at byte `offset` of `text`. `counted` is an offset at or
/// before this one and its line number, moved here.
fn locate(
    file: &str,
    text: &str,
    offset: usize,
    message: String,
    counted: &mut (usize, usize),
) -> ConfigError {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let (from, mut line) = if counted.0 <= offset {
        *counted
    } else {
        (0, 1)
    };
    line += text.as_bytes()[from..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    *counted = (offset, line);
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    ConfigError {
        file: file.to_string(),
        line,
        col,
        message,
        source_line: text[line_start..line_end]
            .trim_end_matches('\r')
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_line_and_column() {
        let text = "a = 1\nbogus = 2\n";
        let mut d = Diagnostics::default();
        d.error(6..11, "unknown key \"bogus\"");
        let e = d.into_errors("f.toml", text);
        assert_eq!(e.0[0].to_string(), "f.toml:2:1: unknown key \"bogus\"");
        assert_eq!(e.0[0].source_line, "bogus = 2");
        assert!(e.to_string().contains("2 | bogus = 2"));
    }

    #[test]
    fn many_errors_in_any_order_each_on_its_line() {
        let text = "a = 1\nb = \"é\"\n\nc = 3\nd = 4";
        let mut d = Diagnostics::default();
        for (span, m) in [(22..23, "d"), (0..1, "a"), (16..17, "c"), (13..14, "in b")] {
            d.error(span, m);
        }
        let at: Vec<String> = d
            .into_errors("f", text)
            .0
            .iter()
            .map(|e| format!("{}:{} {}", e.line, e.col, e.source_line))
            .collect();
        assert_eq!(at, ["1:1 a = 1", "2:7 b = \"é\"", "4:1 c = 3", "5:1 d = 4"]);
    }
}
