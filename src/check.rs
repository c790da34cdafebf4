//! `sluice check`: a one-screen summary of a valid configuration.

use crate::config::Spec;
use crate::errlog::Severity;
use crate::limiter::Limit;
use std::fmt::Write as _;

fn rate_text(milli: u64) -> String {
    if milli % 1000 == 0 {
        format!("{}r/s", milli / 1000)
    } else {
        format!("{milli} milli-req/s")
    }
}

/// Render the summary of `spec`.
pub fn summary(file: &str, spec: &Spec) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{file}: syntax is ok, configuration is valid");
    let _ = writeln!(s, "zones:");
    for z in &spec.zones {
        let _ = writeln!(
            s,
            "  {:<16} key {:<24} size {:>8} B ({} states)  rate {}{}",
            z.name,
            z.key.source(),
            z.size,
            z.size / crate::limiter::memory::BYTES_PER_STATE,
            rate_text(z.rate.milli()),
            match z.backend {
                crate::config::Backend::Memory => "",
                crate::config::Backend::Redis => "  backend redis",
            }
        );
    }
    if let Some(r) = &spec.redis {
        let _ = writeln!(
            s,
            "redis: {} timeout {} ms, on_error {}, prefix \"{}\"",
            r.url
                .split_once('@')
                .map_or(r.url.clone(), |(_, h)| format!("redis://***@{h}")),
            r.timeout.as_millis(),
            r.on_error.as_str(),
            r.prefix
        );
    }
    for srv in &spec.servers {
        let level = srv.level.inherit(&spec.http);
        let _ = writeln!(
            s,
            "server {}{}",
            srv.listen,
            if srv.server_name.is_empty() {
                String::new()
            } else {
                format!(" ({})", srv.server_name)
            }
        );
        for loc in &srv.locations {
            let eff = loc.level.inherit(&level);
            let limits = eff
                .limit_req
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|l| {
                    let mut t = spec.zones[l.zone].name.clone();
                    if l.burst > 0 {
                        let _ = write!(t, " burst={}", l.burst / 1000);
                    }
                    if l.delay == Limit::NODELAY {
                        t.push_str(" nodelay");
                    } else if l.delay > 0 {
                        let _ = write!(t, " delay={}", l.delay / 1000);
                    }
                    t
                })
                .collect::<Vec<_>>();
            let action = match &loc.action {
                crate::config::Action::Return(r) => format!("return {}", r.status),
                crate::config::Action::Proxy(p) => format!(
                    "proxy_pass http://{}{}",
                    p.authority,
                    p.uri.as_deref().unwrap_or("")
                ),
            };
            let _ = writeln!(
                s,
                "  location {:<14} {:<40} {}  [status {}{}{}]",
                loc.path,
                if limits.is_empty() {
                    "no limit".to_string()
                } else {
                    format!("limit_req {}", limits.join(", "))
                },
                action,
                eff.status
                    .unwrap_or(crate::config::DEFAULT_LIMIT_REQ_STATUS),
                match eff.log_level {
                    Some(l) if l != Severity::Error => format!(", log {}", l.name()),
                    _ => String::new(),
                },
                if eff.dry_run == Some(true) {
                    ", dry run"
                } else {
                    ""
                },
            );
        }
    }
    if let Some(a) = spec.ops.admin {
        let _ = writeln!(s, "admin {a} (/metrics, /healthz)");
    }
    if let Some(p) = &spec.ops.pid_file {
        let _ = writeln!(s, "pid_file {}", p.display());
    }
    if spec.ops.watch {
        let _ = writeln!(s, "watch: reloads when the file changes");
    }
    s
}
