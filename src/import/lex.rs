//! nginx's configuration tokens, read as nginx reads them (its
//! `ngx_conf_read_token`): words separated by blanks, `'…'` and `"…"`
//! strings, `#` comments (only where a word could start: `a#b` is one
//! word), `;`, `{` and `}`, and `$var` / `${var}` (a `{` right after `$` is
//! part of the word, not a block). A backslash keeps the next character from
//! being special; in the word it is then dropped before `"`, `'` and `\`,
//! and `\t`, `\r`, `\n` become the control characters, exactly nginx's
//! unescaping (any other `\x` stays as written: regexes keep their `\.`).

/// One token and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Word { text: String, line: u32 },
    Semi { line: u32 },
    Open { line: u32 },
    Close { line: u32 },
}

/// A syntax error: the line and nginx's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub line: u32,
    pub message: String,
}

/// The whole text as tokens.
pub fn tokens(text: &str) -> Result<Vec<Token>, LexError> {
    Lexer {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        out: Vec::new(),
    }
    .run()
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    out: Vec<Token>,
}

fn blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

impl Lexer {
    fn next(&mut self) -> Option<char> {
        let c = *self.chars.get(self.pos)?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn run(mut self) -> Result<Vec<Token>, LexError> {
        while let Some(c) = self.peek() {
            let line = self.line;
            match c {
                c if blank(c) => {
                    self.next();
                }
                '#' => {
                    while let Some(c) = self.next() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                ';' | '{' | '}' => {
                    self.next();
                    self.out.push(match c {
                        ';' => Token::Semi { line },
                        '{' => Token::Open { line },
                        _ => Token::Close { line },
                    });
                }
                '"' | '\'' => {
                    self.next();
                    let raw = self.quoted(c, line)?;
                    self.after_quote()?;
                    self.out.push(Token::Word {
                        text: unescape(&raw),
                        line,
                    });
                }
                _ => {
                    let raw = self.word();
                    self.out.push(Token::Word {
                        text: unescape(&raw),
                        line,
                    });
                }
            }
        }
        Ok(self.out)
    }

    /// The raw text up to the closing `quote` (backslashes kept).
    fn quoted(&mut self, quote: char, line: u32) -> Result<String, LexError> {
        let mut raw = String::new();
        loop {
            match self.next() {
                None => {
                    return Err(LexError {
                        line,
                        message: format!(
                            "unexpected end of file, missing terminating {quote} character"
                        ),
                    });
                }
                Some('\\') => {
                    raw.push('\\');
                    if let Some(c) = self.next() {
                        raw.push(c);
                    }
                }
                Some(c) if c == quote => return Ok(raw),
                Some(c) => raw.push(c),
            }
        }
    }

    /// After a closing quote nginx wants a blank, `;` or `{` (or `)`).
    fn after_quote(&mut self) -> Result<(), LexError> {
        match self.peek() {
            None | Some(' ' | '\t' | '\r' | '\n' | ';' | '{') => Ok(()),
            Some(')') => {
                self.next();
                Ok(())
            }
            Some(c) => Err(LexError {
                line: self.line,
                message: format!("unexpected \"{c}\""),
            }),
        }
    }

    /// An unquoted word: up to a blank, `;` or `{` (not `}`: nginx keeps a
    /// `}` inside a word, as in `${var}`); `{` right after `$` belongs to it.
    fn word(&mut self) -> String {
        let mut raw = String::new();
        let mut variable = false;
        while let Some(c) = self.peek() {
            if c == '{' && variable {
                raw.push(c);
                self.next();
                variable = false;
                continue;
            }
            if blank(c) || c == ';' || c == '{' {
                break;
            }
            self.next();
            variable = c == '$';
            raw.push(c);
            if c == '\\' {
                if let Some(n) = self.next() {
                    raw.push(n);
                }
            }
        }
        raw
    }
}

/// nginx's unescaping of a token.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.peek() {
            Some('"' | '\'' | '\\') => out.push(it.next().unwrap_or('\\')),
            Some('t') => {
                it.next();
                out.push('\t');
            }
            Some('r') => {
                it.next();
                out.push('\r');
            }
            Some('n') => {
                it.next();
                out.push('\n');
            }
            _ => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        tokens(text)
            .unwrap()
            .into_iter()
            .map(|t| match t {
                Token::Word { text, .. } => text,
                Token::Semi { .. } => ";".into(),
                Token::Open { .. } => "{".into(),
                Token::Close { .. } => "}".into(),
            })
            .collect()
    }

    #[test]
    fn words_blocks_and_semicolons() {
        assert_eq!(
            words("http {\n  limit_req_status 429;\n}\n"),
            ["http", "{", "limit_req_status", "429", ";", "}"]
        );
        assert_eq!(words("a b;c{}"), ["a", "b", ";", "c", "{", "}"]);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            words(r#"return 429 "too many\n";"#),
            ["return", "429", "too many\n", ";"]
        );
        assert_eq!(
            words(r#"x 'a "b" c' "d \"e\" \\ \t" 'it\'s';"#),
            ["x", "a \"b\" c", "d \"e\" \\ \t", "it's", ";"]
        );
        // Other escapes stay as written (regexes).
        assert_eq!(
            words(r"location ~ \.php$ {"),
            ["location", "~", r"\.php$", "{"]
        );
        assert_eq!(words(r#"a "x;{}#";"#), ["a", "x;{}#", ";"]);
        // An escaped ; does not end the word, and keeps its backslash (nginx unescapes only
        // quotes, the backslash, \t, \r and \n).
        assert_eq!(words(r"a b\;c;"), ["a", r"b\;c", ";"]);
        assert_eq!(words("a '';"), ["a", "", ";"]);
    }

    #[test]
    fn comments_only_where_a_word_starts() {
        assert_eq!(
            words("a b; # c d;\n# e\nf g#h;"),
            ["a", "b", ";", "f", "g#h", ";"]
        );
    }

    #[test]
    fn variables_with_braces() {
        assert_eq!(
            words("key ${binary_remote_addr}x$uri;"),
            ["key", "${binary_remote_addr}x$uri", ";"]
        );
        assert_eq!(words("a $b {"), ["a", "$b", "{"]);
    }

    #[test]
    fn lines_are_counted() {
        let t = tokens("a;\n\n'b\nc' d;\n").unwrap();
        assert_eq!(
            t[2],
            Token::Word {
                text: "b\nc".into(),
                line: 3
            }
        );
        assert_eq!(
            t[3],
            Token::Word {
                text: "d".into(),
                line: 4
            }
        );
        assert_eq!(t[4], Token::Semi { line: 4 });
    }

    #[test]
    fn errors_name_their_line() {
        let e = tokens("a;\nb \"unterminated;\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("missing terminating"), "{}", e.message);
        let e = tokens("a;\n\nb \"x\"y;").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (3, "unexpected \"y\""));
    }
}
