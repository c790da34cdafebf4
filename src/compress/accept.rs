//! What the request says about compression: `Accept-Encoding` (nginx's
//! own test for gzip, and RFC 9110's q-values for the codings beyond it)
//! and nginx's `msie6` test of `User-Agent`.
//!
//! Why nginx's gzip test and not a general parser for gzip: nginx reads
//! `Accept-Encoding` its own way (`ngx_http_gzip_accept_encoding`): the
//! first `gzip` that starts the value or follows `,` or a space counts, a
//! `;q=` after it with a value of 0 (or a malformed one) refuses it, and
//! nothing else is looked at (`*` does not offer gzip, `x-gzip` does not
//! count, a later `gzip;q=0` does not take an earlier `gzip` back). A
//! client that nginx answers compressed, sluice answers compressed.

use super::Coding;

/// Whether `value` (the request's first `Accept-Encoding`) offers gzip, as
/// nginx 1.22 decides it (`ngx_http_gzip_ok`, `ngx_http_gzip_accept_encoding`).
pub(super) fn nginx_gzip(value: &[u8]) -> bool {
    if value.len() < 4 {
        return false;
    }
    // nginx's fast path, for "gzip, deflate" and the like.
    if value.starts_with(b"gzip,") {
        return true;
    }
    let mut start = 0;
    let at = loop {
        let Some(i) = find_ci(&value[start..], b"gzip") else {
            return false;
        };
        let p = start + i;
        // (nginx's `p == start`: a `gzip` right after the last miss counts.)
        if i == 0 || matches!(value[p - 1], b',' | b' ') {
            break p + 4;
        }
        start = p + 4;
    };
    let mut rest = value[at..].iter();
    loop {
        match rest.next() {
            None | Some(b',') => return true,
            Some(b';') => break,
            Some(b' ') => continue,
            Some(_) => return false,
        }
    }
    loop {
        match rest.next() {
            None => return true,
            Some(b'q' | b'Q') => break,
            Some(b' ') => continue,
            Some(_) => return false,
        }
    }
    let rest = rest.as_slice();
    match rest.split_first() {
        Some((b'=', q)) if rest.len() >= 2 => quantity(q) > 0,
        _ => false,
    }
}

/// nginx's `ngx_http_gzip_quantity`: a q-value in thousandths, 0 for an
/// invalid one (`q=1.5`, `q=0.0001`, `q=x`).
fn quantity(q: &[u8]) -> u32 {
    let mut q = q.iter();
    let whole = match q.next() {
        Some(c @ (b'0' | b'1')) => u32::from(c - b'0') * 100,
        _ => return 0,
    };
    match q.next() {
        None | Some(b',' | b' ') => return whole,
        Some(b'.') => {}
        Some(_) => return 0,
    }
    // nginx adds each digit to the hundredths (its own arithmetic, kept:
    // "0.5" is 5, "0.05" is 5 too, and only 0 refuses).
    let (mut sum, mut n) = (whole, 0);
    for &c in q {
        match c {
            b',' | b' ' => break,
            b'0'..=b'9' => {
                sum += u32::from(c - b'0');
                n += 1;
            }
            _ => return 0,
        }
    }
    if sum > 100 || n > 3 { 0 } else { sum }
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The coding to answer with among `offered` (in the configuration's
/// order, which breaks ties): the one the client prefers by its q-values
/// (RFC 9110 12.5.3), `*` standing for the codings it does not name; gzip
/// only if nginx's own test accepts it ([`nginx_gzip`]). `None`: none.
pub(super) fn choose(value: &[u8], offered: &[Coding]) -> Option<Coding> {
    let mut best: Option<(u32, Coding)> = None;
    for &coding in offered {
        let q = match coding {
            Coding::Gzip if !nginx_gzip(value) => 0,
            // nginx accepts gzip with q-values it cannot weigh (its test
            // above): those count as 1.
            Coding::Gzip => weight(value, b"gzip").unwrap_or(1000).max(1),
            Coding::Zstd => weight(value, b"zstd").unwrap_or(0),
            Coding::Br => weight(value, b"br").unwrap_or(0),
        };
        if q > 0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, coding));
        }
    }
    best.map(|(_, c)| c)
}

/// The q-value (thousandths) `value` gives `name`, or `*`'s when it does
/// not name it; `None`: neither is named.
fn weight(value: &[u8], name: &[u8]) -> Option<u32> {
    let mut star = None;
    for item in value.split(|&b| b == b',') {
        let mut parts = item.split(|&b| b == b';');
        let coding = parts.next().unwrap_or_default().trim_ascii();
        let q = parts
            .filter_map(|p| {
                let (k, v) = p.trim_ascii().split_at_checked(2)?;
                k.eq_ignore_ascii_case(b"q=").then(|| q_value(v))
            })
            .next()
            .unwrap_or(1000);
        if coding.eq_ignore_ascii_case(name) {
            return Some(q);
        }
        if coding == b"*" {
            star = Some(q);
        }
    }
    star
}

/// An RFC 9110 q-value in thousandths (0 when malformed).
fn q_value(v: &[u8]) -> u32 {
    let v = v.trim_ascii();
    let (whole, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    let ok = whole.len() == 1 && frac.len() <= 3 && frac.iter().all(u8::is_ascii_digit);
    if !ok {
        return 0;
    }
    let mut q = match whole[0] {
        b'0' => 0,
        b'1' => 1000,
        _ => return 0,
    };
    for (i, &d) in frac.iter().enumerate() {
        q += u32::from(d - b'0') * [100, 10, 1][i];
    }
    q.min(1000)
}

/// nginx's `msie6`: a `User-Agent` of MSIE 4, 5, or 6 without `SV1`
/// (`ngx_http_process_user_agent`), and never Opera's.
pub(super) fn msie6(ua: &[u8]) -> bool {
    let find = |hay: &[u8], n: &[u8]| hay.windows(n.len()).position(|w| w == n);
    if find(ua, b"Opera").is_some() {
        return false;
    }
    let Some(m) = find(ua, b"MSIE ") else {
        return false;
    };
    if m + 7 >= ua.len() || ua[m + 6] != b'.' {
        return false;
    }
    match ua[m + 5] {
        b'4' | b'5' => true,
        b'6' => find(&ua[m + 8..], b"SV1").is_none(),
        _ => false,
    }
}
