//! What kind of file was given: a whole nginx.conf (`events` and `http` at
//! its top), or a site file as distributions ship them
//! (`sites-available/default`, `conf.d/*.conf`: `server`, `upstream`,
//! `map`, … at the top), which nginx reads through an `include` inside
//! `http` and which is translated as if it were one. Whatever nginx itself
//! would refuse to start on is said as nginx says it.

use super::tree::{Directive, Tree};
use std::path::Path;

/// Directives that belong in `http` and make a file a site file when they
/// stand at its top.
const HTTP_ONLY: &[&str] = &[
    "server",
    "upstream",
    "map",
    "geo",
    "split_clients",
    "limit_req_zone",
    "limit_conn_zone",
    "log_format",
    "proxy_cache_path",
];

/// The tree to translate, and whether it was a site file; or the error
/// nginx gives (`FILE: no "events" section in configuration`, …).
pub fn whole(path: &Path, mut tree: Tree) -> Result<(Tree, bool), String> {
    let file = path.display();
    let top = |name: &str| tree.directives.iter().find(|d| d.name == name);
    if top("http").is_some() {
        if top("events").is_none() {
            return Err(format!(
                "{file}: no \"events\" section in configuration (nginx refuses to start on it)"
            ));
        }
        return Ok((tree, false));
    }
    let site = tree
        .directives
        .iter()
        .find(|d| HTTP_ONLY.contains(&d.name.as_str()));
    let Some(first) = site else {
        return Err(format!(
            "{file}: no \"http\" block and no \"server\" block: nothing for sluice to serve"
        ));
    };
    if top("events").is_some() {
        // A main file with a server outside http: nginx's own words.
        return Err(format!(
            "{}: \"{}\" directive is not allowed here (outside an \"http\" block)",
            first.origin.at(),
            first.name
        ));
    }
    let http = Directive {
        name: "http".into(),
        args: Vec::new(),
        origin: tree.directives[0].origin.clone(),
        block: Some(std::mem::take(&mut tree.directives)),
    };
    tree.directives = vec![http];
    Ok((tree, true))
}

/// Why nothing is left to listen on, when every server was left out:
/// `FILE:LINE: listen nginx:80: why; …`, from the first listen reported.
pub fn no_server(http: &Directive, reports: &[super::Report]) -> String {
    let listens: Vec<&super::Report> = reports
        .iter()
        .filter(|r| r.kind == super::Kind::NotTranslated && r.directive.starts_with("listen "))
        .collect();
    let Some(first) = listens.first() else {
        return format!(
            "{}: no \"server\" block: nothing for sluice to listen on",
            http.origin.at()
        );
    };
    let more = match listens.len() {
        1 => String::new(),
        n => format!(" (and {} more listen lines like it)", n - 1),
    };
    format!(
        "{}: {}: {}{more}; no server is left for sluice to listen on",
        first.at, first.directive, first.why
    )
}
