//! Where sluice answers an HTTP/2 request otherwise than nginx 1.22 on purpose, and the
//! answers nginx must give for the harness itself to be right.

/// The cases where sluice deliberately differs from nginx 1.22: `(case, nginx's verdict,
/// sluice's intended verdict, why)`, verdicts as [`super::Outcome::verdict`] writes them. Such a case
/// passes when sluice gives nginx's verdict, or the intended one with an upstream that got no
/// request nginx's did not; an entry whose nginx verdict no longer holds fails the suite (the
/// list must say what nginx does).
pub(super) const DELIBERATE: &[(&str, &str, &str, &str)] = &[
    // RFC 9113 §8.2.1: "A field value MUST NOT start or end with an ASCII whitespace character";
    // §8.1.1: such a request is malformed, a stream error. nginx 1.22 forwards the value as it
    // is. sluice resets the stream, as nginx does for the other values §8.2.1 forbids (NUL, CR,
    // LF).
    ("values/space-leading", FWD, STREAM_RST, WHITESPACE),
    ("values/space-trailing", FWD, STREAM_RST, WHITESPACE),
    ("values/tab-leading", FWD, STREAM_RST, WHITESPACE),
    ("values/tab-trailing", FWD, STREAM_RST, WHITESPACE),
    ("values/space-only", FWD, STREAM_RST, WHITESPACE),
    // RFC 9110 §5.5: control bytes other than HTAB are invalid in a field value; nginx forwards
    // them, sluice refuses them on HTTP/1.1 already (config/operations.md "Security", hyper
    // and most backends cannot represent them).
    ("values/control-01", FWD, STREAM_400, CONTROL),
    ("values/control-1b", FWD, STREAM_400, CONTROL),
    ("values/del", FWD, STREAM_400, CONTROL),
    // hyper's limit of 100 header fields (config/operations.md "Security"); nginx counts only
    // bytes.
    ("values/many-fields-150", FWD, STREAM_400, COUNT),
    // RFC 9113 §8.3: a pseudo-header after a regular field makes the request malformed; nginx
    // 1.22 takes it anyway. 400: nginx's answer to every other misplaced pseudo-header.
    ("pseudo/after-regular", FWD, STREAM_400, PSEUDO_ORDER),
    (
        "pseudo/authority-after-regular",
        FWD,
        STREAM_400,
        PSEUDO_ORDER,
    ),
    // RFC 9113 §8.3.1: ":authority MUST NOT include the deprecated userinfo subcomponent for
    // "http" or "https" schemed URIs"; sluice refuses userinfo in an HTTP/1.1 target too.
    ("host/userinfo", FWD, STREAM_400, USERINFO),
    // RFC 9113 §8.3.1: :path is the path and query of the target URI, never a fragment (sluice
    // cuts a fragment it forwards, see `same_request`, or refuses it).
    ("path/fragment", FWD, STREAM_400, FRAGMENT),
    // RFC 9113 §8.2.2: connection-specific fields (Connection, Proxy-Connection, Keep-Alive,
    // Transfer-Encoding, Upgrade) and a TE other than "trailers" make a request malformed, a
    // stream error of type PROTOCOL_ERROR (§8.1.1). nginx 1.22 forwards the request and drops
    // the field (Proxy-Connection it passes on; a chunked body it forwards as the body's bytes).
    (
        "framing/connection-close",
        FWD,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    (
        "framing/connection-keep-alive",
        FWD,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    ("framing/keep-alive", FWD, STREAM_RST, CONNECTION_SPECIFIC),
    (
        "framing/proxy-connection",
        FWD,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    ("framing/upgrade", FWD, STREAM_RST, CONNECTION_SPECIFIC),
    (
        "framing/transfer-encoding-chunked",
        FWD,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    ("framing/te-gzip", FWD, STREAM_RST, CONNECTION_SPECIFIC),
    (
        "framing/te-trailers-gzip",
        FWD,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    // RFC 9113 §8.1.1: a content-length that disagrees with the DATA received makes the request
    // malformed, a stream error of type PROTOCOL_ERROR (the h2 crate under hyper resets it); so
    // does Transfer-Encoding (§8.2.2), with a content-length or not. nginx 1.22 answers 400. The
    // upstream gets no whole request either way.
    (
        "framing/content-length-5-data-3",
        STREAM_400,
        STREAM_RST,
        LENGTH,
    ),
    (
        "framing/content-length-5-data-7",
        STREAM_400,
        STREAM_RST,
        LENGTH,
    ),
    (
        "framing/content-length-0-data-3",
        STREAM_400,
        STREAM_RST,
        LENGTH,
    ),
    (
        "framing/content-length-5-no-data",
        STREAM_400,
        STREAM_RST,
        LENGTH,
    ),
    (
        "framing/content-length-5-data-3-then-4",
        STREAM_400,
        STREAM_RST,
        LENGTH,
    ),
    (
        "framing/transfer-encoding-and-content-length",
        STREAM_400,
        STREAM_RST,
        CONNECTION_SPECIFIC,
    ),
    // nginx 1.22 has no request trailers: a HEADERS frame after DATA is a connection error
    // ("client sent HEADERS frame with incorrect identifier"), the request never goes upstream.
    // RFC 9113 §8.1 allows trailers (without pseudo-headers); refusing the stream alone forwards
    // nothing nginx refuses and keeps the other streams.
    (
        "framing/trailers-with-pseudo",
        CONN_PROTOCOL,
        STREAM_RST,
        TRAILERS,
    ),
    (
        "framing/trailers-with-field",
        CONN_PROTOCOL,
        STREAM_RST,
        TRAILERS,
    ),
    (
        "framing/trailers-uppercase",
        CONN_PROTOCOL,
        STREAM_RST,
        TRAILERS,
    ),
    (
        "framing/trailers-content-length",
        CONN_PROTOCOL,
        STREAM_RST,
        TRAILERS,
    ),
    // One field longer than one large_client_header_buffers buffer (8k), a header list longer
    // than all four: nginx ends the connection (ENHANCE_YOUR_CALM); sluice answers the stream
    // as it answers the same head over HTTP/1.1 (400, 414 for the path, 431 for the list; RFC
    // 9113 §10.5.1 lets a server answer 431) and keeps the connection (config/reference.md "HTTP/2",
    // Protections).
    ("values/8k-plus-one", CONN_CALM, STREAM_400, SIZES),
    ("values/9k", CONN_CALM, STREAM_400, SIZES),
    ("values/name-9k", CONN_CALM, STREAM_400, SIZES),
    ("path/9k", CONN_CALM, "1=414 3=200↑ open", SIZES),
    (
        "values/list-over-32k",
        CONN_CALM,
        "1=431 3=200↑ open",
        SIZES,
    ),
    // nginx 1.22 refuses an empty :authority, :method or :scheme (or Host) with 400, then reads
    // the next literal field of the block with the empty value's bounds as its name, and ends
    // the connection ("client sent zero header name length"). RFC 9113 §8.1.1: a malformed
    // request is a stream error; the sibling is a valid request.
    ("host/empty-authority", QUIRK_400, STREAM_400, EMPTY_QUIRK),
    (
        "host/empty-authority-and-host",
        QUIRK_400,
        STREAM_400,
        EMPTY_QUIRK,
    ),
    (
        "host/empty-host-then-field",
        QUIRK_400,
        STREAM_400,
        EMPTY_QUIRK,
    ),
    ("method/empty", QUIRK_400, STREAM_400, EMPTY_QUIRK),
    ("scheme/empty", QUIRK_400, STREAM_400, EMPTY_QUIRK),
    // RFC 9113 §4.3: a field block that cannot be decoded is a connection error of type
    // COMPRESSION_ERROR; nginx says FRAME_SIZE_ERROR when the block ends inside a literal.
    (
        "hpack/truncated-literal",
        "1=none 3=none GOAWAY(FRAME_SIZE_ERROR) closed",
        "1=none 3=none GOAWAY(COMPRESSION_ERROR) closed",
        "RFC 9113 §4.3: an HPACK decoding error is COMPRESSION_ERROR",
    ),
];

const FWD: &str = "1=200↑ 3=200↑ open";
const STREAM_400: &str = "1=400 3=200↑ open";
const STREAM_RST: &str = "1=RST(PROTOCOL_ERROR) 3=200↑ open";
const CONN_PROTOCOL: &str = "1=none 3=none GOAWAY(PROTOCOL_ERROR) closed";
const CONN_CALM: &str = "1=none 3=none GOAWAY(ENHANCE_YOUR_CALM) closed";
const QUIRK_400: &str = "1=400 3=none GOAWAY(PROTOCOL_ERROR) closed";
const WHITESPACE: &str = "RFC 9113 §8.2.1: no whitespace at either end of a field value";
const CONTROL: &str = "RFC 9110 §5.5: control bytes in a field value (sluice refuses them)";
const COUNT: &str = "at most 100 header fields (hyper's limit, config/operations.md)";
const PSEUDO_ORDER: &str = "RFC 9113 §8.3: pseudo-headers before regular fields";
const USERINFO: &str = "RFC 9113 §8.3.1: no userinfo in :authority";
const FRAGMENT: &str = "RFC 9113 §8.3.1: no fragment in :path";
const CONNECTION_SPECIFIC: &str = "RFC 9113 §8.2.2: connection-specific fields are malformed";
const LENGTH: &str = "RFC 9113 §8.1.1: content-length must match the DATA received";
const TRAILERS: &str = "nginx 1.22 refuses request trailers with the connection";
const SIZES: &str =
    "header sizes: the stream is answered, the connection kept (config/reference.md)";
const EMPTY_QUIRK: &str = "nginx 1.22 misreads the field after a refused empty value";

/// nginx answers the harness knows without the table (nginx's source, the tests of
/// tests/it/h2/protections.rs): if nginx does not give these, the script or the harness is
/// broken, not sluice.
pub(super) const PINNED: &[(&str, &str)] = &[
    ("valid/get", "1=200↑ 3=200↑ open"),
    ("names/upper-X-A", "1=RST(PROTOCOL_ERROR) 3=200↑ open"),
    ("host/none", "1=400 3=200↑ open"),
    ("values/9k", CONN_CALM),
    ("continuation/59", "1=200↑ 3=200↑ open"),
];
