//! Reading a template: text, `$name` and `${name}`, each name nginx's,
//! the configuration's own (`[maps]`, `[geos]`), or in a map's value a
//! capture of its regex; checked against where the template is used.

use super::{Context, LogEscape, Part, Template, TemplateError, Var};

/// The names a template may use besides nginx's variables.
#[derive(Clone, Copy, Default)]
pub struct Names<'n> {
    /// The configuration's maps and geos, by index.
    pub user: &'n [String],
    /// In a map entry's value: the entry's regex, whose captures `$1`…`$9`
    /// and named groups the value may use.
    pub captures: Option<&'n regex::bytes::Regex>,
}

impl Names<'_> {
    /// A capture group `name` names (`1`, or a group's name).
    fn capture(&self, name: &str) -> Option<usize> {
        let re = self.captures?;
        if let Ok(n) = name.parse::<usize>() {
            return (n <= 9).then_some(n);
        }
        re.capture_names().position(|g| g == Some(name))
    }
}

impl Template {
    pub fn parse(src: &str, cx: Context) -> Result<Template, TemplateError> {
        Template::parse_named(src, cx, Names::default())
    }

    /// [`Template::parse`], with the configuration's own variables and a
    /// map value's captures.
    pub fn parse_named(src: &str, cx: Context, names: Names) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let b = src.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                let ch = src[i..].chars().next().unwrap_or('\0');
                text.push(ch);
                i += ch.len_utf8();
                continue;
            }
            let start = i;
            let (name, end) = read_name(src, start)?;
            i = end;
            if let Some(n) = names.capture(name) {
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Capture(n));
                continue;
            }
            let user = || names.user.iter().position(|u| u == name).map(Var::User);
            let var = Var::parse(name)
                .or_else(user)
                .ok_or_else(|| TemplateError {
                    offset: start,
                    message: format!("unknown \"{name}\" variable"),
                })?;
            if var.context() > cx {
                return Err(TemplateError {
                    offset: start,
                    message: match var.context() {
                        Context::Proxy => format!(
                            "variable \"${name}\" is only available in proxy_set_header, add_header, error pages, return and access logs"
                        ),
                        Context::Response => format!(
                            "variable \"${name}\" is only available in error pages, return and access logs"
                        ),
                        _ => format!("variable \"${name}\" is only available in access logs"),
                    },
                });
            }
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Var(var));
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Template {
            parts,
            source: src.to_string(),
            dash_empty: cx == Context::Log,
            escape: LogEscape::None,
        })
    }
}

/// The name of the variable at `start` (a `$`): the name and where the
/// text goes on.
fn read_name(src: &str, start: usize) -> Result<(&str, usize), TemplateError> {
    let b = src.as_bytes();
    let mut i = start + 1;
    let braced = b.get(i) == Some(&b'{');
    if braced {
        i += 1;
    }
    let name_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let name = &src[name_start..i];
    if braced {
        if b.get(i) != Some(&b'}') {
            return Err(TemplateError {
                offset: start,
                message: "the closing bracket in a variable name is missing".into(),
            });
        }
        i += 1;
    }
    if name.is_empty() {
        return Err(TemplateError {
            offset: start,
            message: "invalid variable name: \"$\" must be followed by a name (write \"${...}\" to join text)".into(),
        });
    }
    Ok((name, i))
}
