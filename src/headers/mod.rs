//! nginx's header directives, compiled: `proxy_set_header` (the request
//! head the upstream receives), `add_header` (fields added to responses),
//! `proxy_hide_header` and `proxy_pass_header` (fields of the upstream's
//! response the client does not see).
//!
//! Why here, apart from the upstream client: the same lists decide the head
//! sluice writes upstream (`crate::upstream`) and the responses the request
//! path sends (`crate::request`), and both are built once per location when
//! the configuration is compiled, so a request only walks short lists.
//!
//! What differs from nginx, on purpose: a value is written with the bytes a
//! header may not hold (CR, LF, NUL and the other controls but TAB)
//! percent-encoded. nginx writes `$uri` as decoded, so `%0D%0A` in a path
//! becomes a new header line upstream (a well-known CRLF injection); here it
//! stays `%0D%0A`.

use crate::vars::{RequestVars, ResponseVars, Template};
use http::{HeaderMap, HeaderName, HeaderValue, header};

/// `proxy_set_header` of a location, with sluice's defaults: the fields the
/// upstream's request head carries besides the client's own.
#[derive(Debug)]
pub struct ProxyHeaders {
    /// Written in this order: the configured ones, then the defaults whose
    /// name was not configured (`Host $proxy_host`, `X-Forwarded-For
    /// $proxy_add_x_forwarded_for`). A value that evaluates empty is not
    /// written (nginx's way to remove a field). A name may come several
    /// times (a list value in the TOML): each is written, in order.
    set: Vec<(HeaderName, Template)>,
}

/// Request fields sluice writes itself whatever `proxy_set_header` says: the
/// body's framing (never the client's or the configuration's word: one
/// request must not smuggle another) and the connection's own fields.
/// (`name` lowercase.)
pub fn managed(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection"
            | b"upgrade"
            | b"keep-alive"
            | b"te"
            | b"trailer"
            | b"transfer-encoding"
            | b"content-length"
            | b"expect"
            | b"proxy-connection"
    )
}

impl ProxyHeaders {
    /// `configured` (in file order) with the defaults it does not name.
    /// Fields sluice manages ([`managed`]) are left out: validation warns
    /// about them.
    pub fn new(configured: &[(HeaderName, Template)]) -> ProxyHeaders {
        let mut set: Vec<(HeaderName, Template)> = configured
            .iter()
            .filter(|(n, _)| !managed(n.as_str().as_bytes()))
            .cloned()
            .collect();
        for (name, value) in [
            ("host", "$proxy_host"),
            ("x-forwarded-for", "$proxy_add_x_forwarded_for"),
        ] {
            if !configured.iter().any(|(n, _)| n == name) {
                if let Ok(t) = Template::parse(value, crate::vars::Context::Proxy) {
                    set.push((HeaderName::from_static(name), t));
                }
            }
        }
        ProxyHeaders { set }
    }

    /// Whether the client's field of this name is replaced (so not
    /// forwarded as it came): every configured name, removed ones included.
    /// (`name` lowercase, as request fields are read.)
    pub fn replaces(&self, name: &[u8]) -> bool {
        self.set.iter().any(|(n, _)| n.as_str().as_bytes() == name)
    }

    /// Appends the fields, `name: value\r\n` each, to `out`.
    pub fn write(&self, out: &mut Vec<u8>, req: &RequestVars, proxy_host: &str) {
        let resp = ResponseVars {
            proxy_host,
            ..ResponseVars::default()
        };
        for (name, value) in &self.set {
            let line = out.len();
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            let start = out.len();
            value.eval(req, Some(&resp), out);
            if out.len() == start {
                out.truncate(line);
                continue;
            }
            sanitize_tail(out, start);
            out.extend_from_slice(b"\r\n");
        }
    }
}

impl ProxyHeaders {
    /// Each field evaluated, in order, for an HTTP/2 request head (a
    /// `grpc_pass` upstream's): `f(name, value)` for every value that is
    /// not empty, with the bytes a field may not hold percent-encoded, as
    /// [`ProxyHeaders::write`] does. There the `host` field is the
    /// `:authority` (nginx's grpc module: `grpc_pass`'s host, the default
    /// `$proxy_host`, unless `grpc_set_header` sets `Host`).
    pub fn each(&self, req: &RequestVars, proxy_host: &str, mut f: impl FnMut(&HeaderName, &[u8])) {
        let resp = ResponseVars {
            proxy_host,
            ..ResponseVars::default()
        };
        let mut value = Vec::new();
        for (name, t) in &self.set {
            value.clear();
            t.eval(req, Some(&resp), &mut value);
            if !value.is_empty() {
                sanitize_tail(&mut value, 0);
                f(name, &value);
            }
        }
    }
}

impl Default for ProxyHeaders {
    fn default() -> ProxyHeaders {
        ProxyHeaders::new(&[])
    }
}

/// `out[from..]` with the bytes no field value may hold percent-encoded.
fn sanitize_tail(out: &mut Vec<u8>, from: usize) {
    if !crate::http1::any_control_byte(&out[from..]) {
        return;
    }
    let bad = |b: u8| (b < 0x20 && b != b'\t') || b == 0x7f;
    let value = out.split_off(from);
    for b in value {
        if bad(b) {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
}

/// One `add_header NAME VALUE [always]`.
#[derive(Debug, Clone)]
pub struct AddHeader {
    pub name: HeaderName,
    pub value: Template,
    /// Also on statuses other than nginx's list ([`adds_to`]).
    pub always: bool,
}

/// nginx's `add_header` without `always` adds to these statuses only.
pub fn adds_to(status: u16) -> bool {
    matches!(
        status,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// Appends `list`'s fields to a response with `resp.status`: those without
/// `always` only on [`adds_to`] statuses, none whose value evaluates empty
/// (nginx's rules). Existing fields of the same name stay: nginx appends.
pub fn add(headers: &mut HeaderMap, list: &[AddHeader], req: &RequestVars, resp: &ResponseVars) {
    let listed = adds_to(resp.status);
    let mut value = Vec::new();
    for h in list {
        if !(h.always || listed) {
            continue;
        }
        value.clear();
        h.value.eval(req, Some(resp), &mut value);
        if value.is_empty() {
            continue;
        }
        sanitize_tail(&mut value, 0);
        if let Ok(v) = HeaderValue::from_bytes(&value) {
            headers.append(h.name.clone(), v);
        }
    }
}

/// Fields of the upstream's response the client does not get: nginx's
/// `proxy_hide_header` defaults, the configured ones, less
/// `proxy_pass_header`'s. (For `grpc_pass`: `grpc_hide_header`,
/// `grpc_pass_header`, and nginx's grpc module's defaults, the same less
/// `X-Pad`.)
#[derive(Debug, Default)]
pub struct HiddenHeaders {
    /// `None`: exactly nginx's defaults (the fast path).
    names: Option<Vec<HeaderName>>,
    /// The grpc module's defaults (`X-Pad` passed).
    grpc: bool,
}

/// nginx hides these by default (and sends its own `Date` and `Server`;
/// sluice sends its `Date`, and no `Server`): two standard names, and the
/// rest all beginning with `x-` ([`HiddenHeaders::hides`] looks those up
/// only for such a name). `x-pad` first: nginx's grpc module hides all but
/// that one (`ngx_http_grpc_hide_headers`).
const HIDDEN_STANDARD: [HeaderName; 2] = [header::DATE, header::SERVER];
const HIDDEN_X: &[&str] = &[
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// The `x-` names nginx's proxy module (`grpc`: its grpc module) hides by
/// default.
fn hidden_x(grpc: bool) -> &'static [&'static str] {
    &HIDDEN_X[usize::from(grpc)..]
}

/// Every name nginx hides by default.
fn hidden_by_default(grpc: bool) -> impl Iterator<Item = HeaderName> {
    HIDDEN_STANDARD
        .into_iter()
        .chain(hidden_x(grpc).iter().map(|n| HeaderName::from_static(n)))
}

impl HiddenHeaders {
    /// nginx's proxy module's defaults with `proxy_hide_header` and
    /// `proxy_pass_header`.
    pub fn new(hide: &[HeaderName], pass: &[HeaderName]) -> HiddenHeaders {
        HiddenHeaders::of_module(hide, pass, false)
    }

    /// nginx's grpc module's defaults with `grpc_hide_header` and
    /// `grpc_pass_header`.
    pub fn grpc(hide: &[HeaderName], pass: &[HeaderName]) -> HiddenHeaders {
        HiddenHeaders::of_module(hide, pass, true)
    }

    fn of_module(hide: &[HeaderName], pass: &[HeaderName], grpc: bool) -> HiddenHeaders {
        if hide.is_empty() && pass.is_empty() {
            return HiddenHeaders { names: None, grpc };
        }
        let mut names: Vec<HeaderName> = hidden_by_default(grpc)
            .chain(hide.iter().cloned())
            .filter(|n| !pass.contains(n))
            .collect();
        let mut seen = Vec::with_capacity(names.len());
        names.retain(|n| {
            let fresh = !seen.contains(n);
            seen.push(n.clone());
            fresh
        });
        HiddenHeaders {
            names: Some(names),
            grpc,
        }
    }

    /// Whether the upstream's field `name` (lowercase: the response parser
    /// lowercases each name first) is hidden. The upstream client asks
    /// before it passes a field on, so a hidden one (`Date`, `Server`, …)
    /// costs the response nothing (issue #31).
    pub fn hides(&self, name: &[u8]) -> bool {
        let is = |n: &str| n.as_bytes() == name;
        match &self.names {
            None => {
                HIDDEN_STANDARD.iter().any(|n| is(n.as_str()))
                    || name.starts_with(b"x-") && hidden_x(self.grpc).iter().any(|n| is(n))
            }
            Some(names) => names.iter().any(|n| is(n.as_str())),
        }
    }
}

#[cfg(test)]
mod tests;
