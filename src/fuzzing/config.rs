//! The `config` fuzz target: TOML text through the parser, the summary
//! `sluice check` prints, and the compiled configuration, built twice (the
//! second time as a reload over the first).
//!
//! Why built and not only parsed: most of what can go wrong in a
//! configuration (zones that keep their state, locations in nginx's order,
//! inheritance) happens when it is compiled, and a reload of an unchanged
//! file must never fail where the first start did not.

/// TOML text → [`crate::config::parse_str`], then, when it parses, the
/// summary `sluice check` prints and [`crate::config::Config::compile`]
/// (twice: the second as a reload of the same file over the first).
///
/// Checked: no panic; errors are located inside the text; a configuration
/// that builds also builds as a reload of itself (nginx reloads an
/// unchanged file).
pub fn config(data: &[u8]) {
    // The file is read with `read_to_string`: text that is not UTF-8 never
    // reaches the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match crate::config::parse_str("fuzz.toml", text) {
        Ok(spec) => spec,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an error without a problem");
            let lines = text.split('\n').count();
            for e in &errors.0 {
                assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
                assert!(e.col >= 1, "column {}", e.col);
                assert!(!e.source_line.contains('\n'), "{e:?}");
                assert!(e.to_string().starts_with("fuzz.toml:"), "{e}");
            }
            let _ = errors.to_string();
            return;
        }
    };
    let _ = crate::check::summary("fuzz.toml", &spec);
    let Ok(first) = crate::config::Config::compile(harmless(spec), None) else {
        return;
    };
    let again = crate::config::parse_str("fuzz.toml", text)
        .map_err(|e| e.to_string())
        .expect("the same text parses again");
    if let Err(e) = crate::config::Config::compile(harmless(again), Some(&first)) {
        panic!("a configuration that built does not build as a reload of itself: {e}");
    }
}

/// `spec` without what would touch the file system when built: access logs
/// go to stderr instead of a file (a fuzzed path would be created), and TLS
/// files for Redis are ones that do not exist (a fuzzed `/dev/zero` would
/// be read forever). The build errors for those stay reachable.
fn harmless(mut spec: crate::config::Spec) -> crate::config::Spec {
    fn level(l: &mut crate::config::Level) {
        if let Some(Some(target)) = &mut l.access_log {
            if target != "stdout" && target != "stderr" {
                *target = "stderr".into();
            }
        }
        let files = l.proxy_ssl.files_mut().into_iter();
        for file in files.chain(l.grpc.ssl.files_mut()).flatten() {
            *file = std::sync::Arc::new(file.elsewhere("/nonexistent/sluice-fuzz.pem"));
        }
    }
    level(&mut spec.http);
    for s in &mut spec.servers {
        level(&mut s.level);
        for l in &mut s.locations {
            level(&mut l.level);
        }
    }
    if let Some(r) = &mut spec.redis {
        for p in [&mut r.tls_ca, &mut r.tls_cert, &mut r.tls_key]
            .into_iter()
            .flatten()
        {
            *p = "/nonexistent/sluice-fuzz.pem".into();
        }
    }
    spec
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A fuzzed configuration never writes a file: its access logs go to
    /// stderr.
    #[test]
    fn config_harness_keeps_access_logs_off_the_disk() {
        let text = r#"access_log = "/tmp/sluice-fuzz-must-not-exist.log"
[[servers]]
listen = "127.0.0.1:1"
proxy_pass = "http://127.0.0.1:2"
access_log = "/tmp/sluice-fuzz-must-not-exist-either.log"
"#;
        let spec = harmless(crate::config::parse_str("t.toml", text).expect("valid"));
        assert_eq!(spec.http.access_log, Some(Some("stderr".into())));
        assert_eq!(
            spec.servers[0].level.access_log,
            Some(Some("stderr".into()))
        );
        config(text.as_bytes());
        assert!(!Path::new("/tmp/sluice-fuzz-must-not-exist.log").exists());
    }
}
