//! nginx.conf as a tree of directives, `include`s expanded in place.
//!
//! A directive is its name, its arguments (unescaped), an optional block,
//! and where it was written (file and line: every warning and every
//! comment of the translation points back there). `include` is resolved
//! as nginx resolves it: a relative path against the conf prefix (the
//! directory of the main file), and, when nothing is there, against the
//! including file's own directory (what people who move an `include`d
//! tree around expect); globs (`*`, `?`, `[…]`) expand in sorted order and
//! may match nothing; a file that includes itself, directly or not, is an
//! error rather than nginx's endless recursion.

use super::lex::{self, Token};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Where a directive was written.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: Rc<SourceFile>,
    pub line: u32,
}

/// A file read: its path as opened (for warnings) and a short name (the
/// path relative to the main file's directory, for the TOML's comments).
#[derive(Debug)]
pub struct SourceFile {
    pub path: String,
    pub short: String,
}

impl Origin {
    /// `FILE:LINE` for messages on stderr.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.path, self.line)
    }

    /// `FILE:LINE` for the translation's comments.
    pub fn short(&self) -> String {
        format!("{}:{}", self.file.short, self.line)
    }
}

#[derive(Debug, Clone)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub block: Option<Vec<Directive>>,
    pub origin: Origin,
}

impl Directive {
    /// The directive as nginx.conf text: `limit_req zone=api burst=20;`, or
    /// `location /api {` for a block.
    pub fn text(&self) -> String {
        let mut s = self.name.clone();
        for a in &self.args {
            s.push(' ');
            s.push_str(&quote(a));
        }
        s.push_str(if self.block.is_some() { " {" } else { ";" });
        s
    }

    /// The arguments as text, for warnings: `zone=api burst=20`.
    pub fn args_text(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|a| quote(a)).collect();
        args.join(" ")
    }

    pub fn arg(&self, i: usize) -> &str {
        self.args.get(i).map_or("", String::as_str)
    }

    /// The block's directives (none for a simple directive).
    pub fn children(&self) -> &[Directive] {
        self.block.as_deref().unwrap_or(&[])
    }
}

/// An argument as it could be written back: quoted when it must be.
pub fn quote(a: &str) -> String {
    // A backslash may stay: nginx keeps `\.` as written.
    let plain = !a.is_empty()
        && !a.starts_with('#')
        && !a.contains("\\\\")
        && !a
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, ';' | '{' | '"' | '\'') || c.is_control());
    if plain {
        return a.to_string();
    }
    let mut s = String::from("\"");
    for c in a.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            '\r' => s.push_str("\\r"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A file that cannot be read or parsed: `FILE:LINE: message` (no line
/// when the main file itself cannot be opened).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

/// An include that matched no file it could open: reported as a warning
/// by the translation, since a copied nginx.conf often names a `mime.types`
/// that did not come along.
#[derive(Debug, Clone)]
pub struct MissingInclude {
    pub directive: Directive,
    pub why: String,
}

/// The main file, its includes expanded.
#[derive(Debug)]
pub struct Tree {
    pub directives: Vec<Directive>,
    pub missing: Vec<MissingInclude>,
}

/// Read `path` and everything it includes.
pub fn read(path: &Path) -> Result<Tree, ReadError> {
    let prefix = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut r = Reader {
        prefix,
        stack: Vec::new(),
        missing: Vec::new(),
    };
    let directives = r.file(path, None)?;
    Ok(Tree {
        directives,
        missing: r.missing,
    })
}

struct Reader {
    prefix: PathBuf,
    /// The files being read, outermost first (cycles).
    stack: Vec<PathBuf>,
    missing: Vec<MissingInclude>,
}

impl Reader {
    /// One file's directives; `from` is the include that named it.
    fn file(&mut self, path: &Path, from: Option<&Origin>) -> Result<Vec<Directive>, ReadError> {
        let at = from.map_or(String::new(), |o| format!("{}: ", o.at()));
        let canon = std::fs::canonicalize(path)
            .map_err(|e| ReadError(format!("{at}cannot open {}: {e}", path.display())))?;
        if let Some(i) = self.stack.iter().position(|p| *p == canon) {
            let mut chain: Vec<String> = self.stack[i..]
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            chain.push(canon.display().to_string());
            return Err(ReadError(format!(
                "{at}include cycle: {}",
                chain.join(" includes ")
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| ReadError(format!("{at}cannot read {}: {e}", path.display())))?;
        let short = path
            .strip_prefix(&self.prefix)
            .unwrap_or(path)
            .display()
            .to_string();
        let file = Rc::new(SourceFile {
            path: path.display().to_string(),
            short,
        });
        let tokens = lex::tokens(&text)
            .map_err(|e| ReadError(format!("{}:{}: {}", file.path, e.line, e.message)))?;
        self.stack.push(canon);
        let mut p = Parser {
            tokens,
            pos: 0,
            file,
        };
        let parsed = p.block(false);
        let out = match parsed {
            Ok(ds) => self.expand(ds),
            Err(e) => Err(e),
        };
        self.stack.pop();
        out
    }

    /// `include`s replaced by what they name, at every depth.
    fn expand(&mut self, ds: Vec<Directive>) -> Result<Vec<Directive>, ReadError> {
        let mut out = Vec::new();
        for mut d in ds {
            if d.name == "include" && d.block.is_none() {
                out.extend(self.include(&d)?);
                continue;
            }
            if let Some(b) = d.block.take() {
                d.block = Some(self.expand(b)?);
            }
            out.push(d);
        }
        Ok(out)
    }

    fn include(&mut self, d: &Directive) -> Result<Vec<Directive>, ReadError> {
        if d.args.len() != 1 {
            return Err(ReadError(format!(
                "{}: invalid number of arguments in \"include\" directive",
                d.origin.at()
            )));
        }
        let pattern = Path::new(&d.args[0]);
        let own_dir = Path::new(&d.origin.file.path)
            .parent()
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let bases: Vec<PathBuf> = if pattern.is_absolute() {
            vec![PathBuf::new()]
        } else {
            vec![self.prefix.clone(), own_dir]
        };
        let globbed = has_glob(&d.args[0]);
        let mut tried = Vec::new();
        for base in &bases {
            let full = base.join(pattern);
            let files = if globbed {
                glob(&full)
            } else if full.is_file() {
                vec![full.clone()]
            } else {
                Vec::new()
            };
            tried.push(full.display().to_string());
            if !files.is_empty() {
                let mut out = Vec::new();
                for f in files {
                    out.extend(self.file(&f, Some(&d.origin))?);
                }
                return Ok(out);
            }
        }
        if !globbed {
            tried.dedup();
            self.missing.push(MissingInclude {
                directive: d.clone(),
                why: format!("no such file: {}", tried.join(", nor ")),
            });
        }
        Ok(Vec::new())
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The files a glob pattern names, sorted (glob(3)'s order); wildcards
/// may be in any component.
fn glob(pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::new()];
    let comps: Vec<_> = pattern.components().collect();
    for (i, c) in comps.iter().enumerate() {
        let part = c.as_os_str().to_string_lossy().to_string();
        let last = i + 1 == comps.len();
        let mut next = Vec::new();
        for dir in &found {
            if !has_glob(&part) {
                next.push(dir.join(c.as_os_str()));
                continue;
            }
            let base = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir.as_path()
            };
            let Ok(entries) = std::fs::read_dir(base) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| !n.starts_with('.') || part.starts_with('.'))
                .filter(|n| matches(part.as_bytes(), n.as_bytes()))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        found = if last {
            next.into_iter().filter(|p| p.is_file()).collect()
        } else {
            next.into_iter().filter(|p| p.is_dir()).collect()
        };
    }
    found
}

/// fnmatch: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`.
fn matches(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| matches(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && matches(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(end) = p.iter().skip(2).position(|&b| b == b']').map(|i| i + 2) else {
                return s.first() == Some(&b'[') && matches(&p[1..], &s[1..]);
            };
            let Some(&c) = s.first() else { return false };
            let (negate, set) = match p[1] {
                b'!' | b'^' => (true, &p[2..end]),
                _ => (false, &p[1..end]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && matches(&p[end + 1..], &s[1..])
        }
        Some(&b) => s.first() == Some(&b) && matches(&p[1..], &s[1..]),
    }
}

/// Tokens → directives, with nginx's syntax errors.
struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    file: Rc<SourceFile>,
}

impl Parser {
    fn err(&self, line: u32, message: &str) -> ReadError {
        ReadError(format!("{}:{line}: {message}", self.file.path))
    }

    /// Directives up to the end of the file (`nested` false) or the `}`
    /// that closes the block.
    fn block(&mut self, nested: bool) -> Result<Vec<Directive>, ReadError> {
        let mut out = Vec::new();
        let mut args: Vec<(String, u32)> = Vec::new();
        loop {
            let Some(t) = self.tokens.get(self.pos).cloned() else {
                let line = self.last_line();
                return match (nested, args.is_empty()) {
                    (false, true) => Ok(out),
                    (true, true) => Err(self.err(line, "unexpected end of file, expecting \"}\"")),
                    _ => Err(self.err(line, "unexpected end of file, expecting \";\" or \"}\"")),
                };
            };
            self.pos += 1;
            match t {
                Token::Word { text, line } => args.push((text, line)),
                Token::Semi { line } | Token::Open { line } if args.is_empty() => {
                    let c = if matches!(t, Token::Semi { .. }) {
                        ';'
                    } else {
                        '{'
                    };
                    return Err(self.err(line, &format!("unexpected \"{c}\"")));
                }
                Token::Semi { .. } => out.push(self.directive(std::mem::take(&mut args), None)),
                Token::Open { .. } => {
                    let inner = self.block(true)?;
                    out.push(self.directive(std::mem::take(&mut args), Some(inner)));
                }
                Token::Close { line } => {
                    if !args.is_empty() || !nested {
                        return Err(self.err(line, "unexpected \"}\""));
                    }
                    return Ok(out);
                }
            }
        }
    }

    fn last_line(&self) -> u32 {
        match self.tokens.last() {
            Some(
                Token::Word { line, .. }
                | Token::Semi { line }
                | Token::Open { line }
                | Token::Close { line },
            ) => *line,
            None => 1,
        }
    }

    fn directive(&self, args: Vec<(String, u32)>, block: Option<Vec<Directive>>) -> Directive {
        let line = args.first().map_or(1, |a| a.1);
        let mut words = args.into_iter().map(|a| a.0);
        Directive {
            name: words.next().unwrap_or_default(),
            args: words.collect(),
            block,
            origin: Origin {
                file: Rc::clone(&self.file),
                line,
            },
        }
    }
}
