//! A response's header blocks as RFC 9113 §8.3 allows them, into `http`
//! types: the head (`:status` first and alone among pseudo-fields, no
//! uppercase name, no connection-specific field) and the trailers (no
//! pseudo-field at all). A block that breaks a rule is malformed: its
//! stream is reset with PROTOCOL_ERROR, as nginx's grpc module does.

use crate::http2::hpack::Field;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

/// A response head: its status and fields.
pub(crate) struct Head {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// Its `content-length`, if it has one.
    pub(crate) length: Option<u64>,
}

/// Why a block is malformed (for the error log).
pub(super) type Malformed = &'static str;

/// The head a block carries.
pub(super) fn head(fields: Vec<Field>) -> Result<Head, Malformed> {
    let mut fields = fields.into_iter();
    let status = match fields.next() {
        Some(f) if &f.name[..] == b":status" => status(&f.value)?,
        _ => return Err("no :status first"),
    };
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut length = None;
    for f in fields {
        let (name, value) = field(&f)?;
        if name == header::CONTENT_LENGTH {
            let n = crate::upstream::body::parse_number(value.as_bytes(), 10)
                .ok_or("invalid content-length")?;
            if length.is_some_and(|l| l != n) {
                return Err("two content-lengths");
            }
            length = Some(n);
        }
        headers.append(name, value);
    }
    Ok(Head {
        status,
        headers,
        length,
    })
}

/// The trailers a block carries.
pub(super) fn trailers(fields: Vec<Field>) -> Result<HeaderMap, Malformed> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for f in &fields {
        let (name, value) = field(f)?;
        map.append(name, value);
    }
    Ok(map)
}

fn status(v: &[u8]) -> Result<StatusCode, Malformed> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            let n = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            StatusCode::from_u16(n).map_err(|_| "invalid :status")
        }
        _ => Err("invalid :status"),
    }
}

/// A regular field: a lowercase token for a name, a value without NUL, CR
/// or LF, not one of the connection's own fields.
fn field(f: &Field) -> Result<(HeaderName, HeaderValue), Malformed> {
    if f.name.starts_with(b":") {
        return Err("a pseudo-field after the others or unknown");
    }
    if f.name.iter().any(u8::is_ascii_uppercase) {
        return Err("an uppercase field name");
    }
    let name = HeaderName::from_bytes(&f.name).map_err(|_| "an invalid field name")?;
    let connection = matches!(
        &f.name[..],
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    ) || (name == header::TE && &f.value[..] != b"trailers");
    if connection {
        return Err("a connection-specific field");
    }
    let value = HeaderValue::from_maybe_shared(f.value.clone()).map_err(|_| "an invalid value")?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn fields(list: &[(&'static str, &'static str)]) -> Vec<Field> {
        list.iter()
            .map(|(n, v)| Field {
                name: Bytes::from_static(n.as_bytes()),
                value: Bytes::from_static(v.as_bytes()),
            })
            .collect()
    }

    #[test]
    fn a_head_needs_its_status_first_and_regular_lowercase_fields() {
        let ok = head(fields(&[(":status", "200"), ("content-length", "3")])).unwrap();
        assert_eq!((ok.status, ok.length), (StatusCode::OK, Some(3)));
        for bad in [
            &[("content-type", "x"), (":status", "200")][..],
            &[(":status", "20")],
            &[(":status", "abc")],
            &[(":status", "099")],
            &[(":status", "200"), (":path", "/")],
            &[(":status", "200"), ("X-Up", "1")],
            &[(":status", "200"), ("connection", "close")],
            &[(":status", "200"), ("transfer-encoding", "chunked")],
            &[(":status", "200"), ("te", "gzip")],
            &[(":status", "200"), ("x", "a\nb")],
            &[(":status", "200"), ("content-length", "x")],
            &[
                (":status", "200"),
                ("content-length", "1"),
                ("content-length", "2"),
            ],
        ] {
            assert!(head(fields(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn trailers_refuse_pseudo_fields_and_bad_names() {
        let t = trailers(fields(&[("grpc-status", "0"), ("x-t", "1")])).unwrap();
        assert_eq!(t.len(), 2);
        assert!(trailers(fields(&[(":status", "200"), ("grpc-status", "0")])).is_err());
        assert!(trailers(fields(&[("Grpc-Status", "0")])).is_err());
    }
}
