//! What the translation could not carry over, said once on stderr and once
//! at the top of the output: never dropped silently.
//!
//! Three kinds. *Not translated*: the directive does something sluice does
//! not do (`if`, `rewrite`, `map`, files, other modules), so the translated
//! file behaves differently there. *Translated in part*: the directive is
//! in the output, but a parameter or a part of it is not. *Ignored*: the
//! directive is about nginx's own processes, files and buffers (`user`,
//! `worker_processes`, `sendfile`, the `*_temp_path`s, `types`, …) and has
//! no meaning for sluice: nothing behaves differently without it.

use super::tree::Directive;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NotTranslated,
    Partial,
    Ignored,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::NotTranslated => "not translated",
            Kind::Partial => "translated in part",
            Kind::Ignored => "ignored (no meaning for sluice)",
        }
    }
}

/// One report: where, what, and why.
#[derive(Debug, Clone)]
pub struct Report {
    pub kind: Kind,
    /// `FILE:LINE` as the file was opened (stderr).
    pub at: String,
    /// `FILE:LINE` relative to the main file (the output's comments).
    pub short: String,
    /// The directive and its arguments, without the `;`.
    pub directive: String,
    pub why: String,
}

impl Report {
    pub fn new(kind: Kind, d: &Directive, why: impl Into<String>) -> Report {
        let args = d.args_text();
        Report {
            kind,
            at: d.origin.at(),
            short: d.origin.short(),
            directive: if args.is_empty() {
                d.name.clone()
            } else {
                format!("{} {args}", d.name)
            },
            why: why.into(),
        }
    }

    /// The file part of [`Report::at`].
    pub fn file(&self) -> &str {
        self.at
            .rsplit_once(':')
            .map_or(self.at.as_str(), |(f, _)| f)
    }

    /// The line part of [`Report::at`].
    pub fn line_number(&self) -> u32 {
        self.at
            .rsplit_once(':')
            .and_then(|(_, l)| l.parse().ok())
            .unwrap_or(0)
    }

    /// The stderr line: `FILE:LINE: not translated: DIRECTIVE ARGS (why)`.
    pub fn line(&self) -> String {
        format!(
            "{}: {}: {} ({})",
            self.at,
            self.kind.label(),
            self.directive,
            self.why
        )
    }
}

/// Directives nginx needs and sluice has no use for, by name (or name
/// suffix for the `*_temp_path` family).
pub fn ignored(name: &str) -> Option<&'static str> {
    Some(match name {
        "user" => "sluice runs as whoever starts it",
        "worker_processes" => "sluice runs one worker thread per CPU (SLUICE_WORKERS=N to choose)",
        "daemon" | "master_process" => "sluice always runs in the foreground, as one process",
        "worker_rlimit_nofile"
        | "worker_cpu_affinity"
        | "worker_priority"
        | "worker_rlimit_core"
        | "working_directory"
        | "lock_file"
        | "pcre_jit"
        | "timer_resolution"
        | "thread_pool"
        | "env" => "about nginx's own processes",
        "use" | "multi_accept" | "accept_mutex" | "accept_mutex_delay" => {
            "nginx's event loop; sluice's is tokio's"
        }
        "types" | "charset_types" => "sluice serves no files",
        "sendfile" | "sendfile_max_chunk" | "tcp_nopush" | "aio" | "directio"
        | "output_buffers" | "postpone_output" => "sluice serves no files",
        "tcp_nodelay" => "sluice always sets TCP_NODELAY",
        // nginx's `off` still sends `Server: nginx`, `on` adds its version:
        // sluice sends no Server field of its own (and hides the
        // upstream's), so no version is ever disclosed.
        "server_tokens" => "sluice sends no Server header, so never a version",
        "server_names_hash_bucket_size"
        | "server_names_hash_max_size"
        | "types_hash_max_size"
        | "types_hash_bucket_size"
        | "variables_hash_max_size"
        | "variables_hash_bucket_size"
        | "map_hash_max_size"
        | "map_hash_bucket_size"
        | "proxy_headers_hash_max_size"
        | "proxy_headers_hash_bucket_size" => "nginx's hash table sizes",
        "proxy_http_version" => "sluice speaks HTTP/1.1 to upstreams, with kept-alive connections",
        "proxy_buffering"
        | "proxy_buffers"
        | "proxy_buffer_size"
        | "proxy_busy_buffers_size"
        | "proxy_max_temp_file_size"
        | "proxy_temp_file_write_size" => "sluice streams responses without buffering them to disk",
        "ssl_session_cache" | "ssl_session_timeout" | "ssl_session_tickets" => {
            "rustls keeps its own session cache and tickets"
        }
        "open_file_cache"
        | "open_file_cache_valid"
        | "open_file_cache_min_uses"
        | "open_file_cache_errors"
        | "open_log_file_cache" => "nginx's file descriptor cache",
        "reset_timedout_connection"
        | "lingering_close"
        | "lingering_time"
        | "lingering_timeout" => "sluice closes timed-out connections itself",
        n if n.ends_with("_temp_path") => "sluice keeps no such temporary files",
        _ => return None,
    })
}

/// Why a directive has no translation, for the common ones.
pub fn why_not(name: &str) -> &'static str {
    match name {
        "if" => "sluice has no conditions",
        "rewrite" | "rewrite_log" | "break" | "uninitialized_variable_warn" => {
            "sluice does not rewrite URIs"
        }
        "map" | "geo" => "its variable is one sluice lacks",
        "split_clients" | "set" | "perl_set" | "js_set" => {
            "sluice has no variables of the configuration's own"
        }
        "try_files"
        | "root"
        | "alias"
        | "index"
        | "autoindex"
        | "autoindex_exact_size"
        | "autoindex_localtime"
        | "autoindex_format"
        | "disable_symlinks"
        | "etag"
        | "if_modified_since"
        | "log_not_found"
        | "internal"
        | "mp4"
        | "flv" => "sluice serves no files",
        "satisfy" => "sluice has no authentication for `satisfy any` to weigh against access rules",
        "auth_basic" | "auth_basic_user_file" | "auth_request" | "auth_request_set" => {
            "sluice has no authentication"
        }
        "limit_rate" | "limit_rate_after" => "sluice does not throttle bandwidth",
        "limit_except" => "sluice has no per-method blocks",
        "sub_filter" | "sub_filter_once" | "sub_filter_types" | "charset" | "source_charset"
        | "ssi" | "addition_types" => "sluice does not change response bodies",
        "stub_status" => "sluice's metrics are Prometheus, on [admin] listen",
        "return" => "sluice's return is a location's",
        "load_module" => "sluice has no dynamic modules",
        "stream" | "mail" => "sluice proxies HTTP only",
        "resolver" | "resolver_timeout" => "sluice resolves names with the system's resolver",
        "keepalive_requests" => "sluice has no limit of requests per connection",
        "proxy_redirect" | "proxy_cookie_domain" | "proxy_cookie_path" => {
            "sluice does not rewrite response headers"
        }
        "proxy_intercept_errors" | "grpc_intercept_errors" => {
            "sluice's error pages answer its own errors only"
        }
        "ssl_ciphers"
        | "ssl_prefer_server_ciphers"
        | "ssl_ecdh_curve"
        | "ssl_dhparam"
        | "ssl_stapling"
        | "ssl_stapling_verify"
        | "ssl_trusted_certificate"
        | "ssl_client_certificate"
        | "ssl_verify_client"
        | "ssl_verify_depth"
        | "ssl_buffer_size"
        | "ssl_conf_command"
        | "ssl_password_file"
        | "ssl_crl" => "not among sluice's TLS settings (rustls' safe defaults)",
        n => family(n),
    }
}

/// Why, for the directives of a module, by their prefix.
fn family(name: &str) -> &'static str {
    match name {
        "gzip_static" => "sluice serves no files (it compresses responses: gzip)",
        n if n.starts_with("gzip") => "sluice keeps zlib's own window and memory settings",
        n if n.starts_with("brotli") || n.starts_with("zstd") => {
            "a third-party module: sluice's `compress` (with `gzip_types`) and `*_comp_level`"
        }
        n if n.starts_with("proxy_cache") || n.starts_with("proxy_no_cache") => {
            "sluice does not cache"
        }
        n if n.starts_with("grpc_ssl_") => "not among sluice's TLS settings",
        n if n.starts_with("grpc_") => "not among sluice's grpc settings",
        n if n.starts_with("fastcgi_")
            || n.starts_with("uwsgi_")
            || n.starts_with("scgi_")
            || n.starts_with("memcached_") =>
        {
            "sluice proxies to HTTP upstreams only"
        }
        n if n.starts_with("ssl_") || n.starts_with("proxy_ssl_") => {
            "not among sluice's TLS settings"
        }
        n if n.starts_with("proxy_") => "not among sluice's proxy settings",
        n if n.starts_with("add_trailer") => "sluice adds no trailers",
        n if n.starts_with("http3_") || n.starts_with("quic_") => {
            "sluice's HTTP/3 settings are fixed (128 streams, no hq, no GSO, its own keys)"
        }
        _ => "no equivalent in sluice",
    }
}
