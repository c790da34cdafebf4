"""HTTP/2 request conformance cases against one server, one JSON line per case.

    /usr/bin/python3 conformance.py --target HOST:PORT [--bind ADDR] [--case NAME ...]
    /usr/bin/python3 conformance.py --list
    /usr/bin/python3 conformance.py --target HOST:PORT --serve     # NAME<TAB>BIND per stdin line

Speaks h2c with prior knowledge over a plain TCP socket and writes every frame itself (9-byte
header, payload), so that a case can send what no HTTP/2 library would: header blocks are HPACK
literals without indexing, with a new name and no Huffman coding (RFC 7541 §6.2.2), so any byte
can be a name or a value (uppercase, `_`, NUL, CR, LF, empty names, pseudo-headers in any order,
twice, unknown). Responses are decoded with Debian's python3-h2's `hpack` (the only package used
besides the standard library).

Each case runs on a fresh connection: the preface, an empty SETTINGS, the server's SETTINGS
acknowledged, then the case's frames and a PING in one write. The PING's acknowledgement tells
that the server has read the whole case (it reads in order); once every stream of the case has
ended as well, a second PING is sent and its acknowledgement awaited, so that a GOAWAY the
server writes after its answers is seen too. The case ends then, at the server's close, or after
--limit seconds (1.5), whichever comes first.

Most cases send the request under test on stream 1 and a valid `GET /sibling` on stream 3 right
after it: a server that refuses only the stream answers the sibling (200), one that ends the
connection does not.

Output, one line per case:
  {"case": NAME, "streams": {"1": STREAM, "3": STREAM}, "goaway": CODE|null,
   "goaway_last": ID|null, "closed": BOOL, "seconds": S, "error": null|TEXT}
where STREAM is {"status": N, "body": BYTES, "upstream": BOOL} (the response's :status, the
length of its DATA, whether it carries the recording upstream's `x-recorder` field), with
"rst": CODE if a RST_STREAM followed; {"rst": CODE} for a stream reset before any response; or
{"none": true}. "closed": the server closed the connection before the case ended.
"""

import argparse
import json
import socket
import struct
import sys
import time

import hpack

from h2wire import FrameReader, frame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0x0, 0x1, 0x2, 0x3, 0x4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x5, 0x6, 0x7, 0x8, 0x9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

# The largest frame payload a peer must accept before SETTINGS say more (RFC 9113 §4.2).
MAX_FRAME = 16384
AUTHORITY = b"example.com"
PING_READ = b"case-end"
PING_DRAIN = b"drained!"


def integer(first, prefix, value):
    """HPACK's integer with a `prefix`-bit prefix after `first`'s high bits (RFC 7541 §5.1)."""
    top = (1 << prefix) - 1
    if value < top:
        return bytes([first | value])
    out = bytearray([first | top])
    value -= top
    while value >= 128:
        out.append(value % 128 | 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A literal field without indexing, new name, no Huffman: the bytes as they are."""
    return b"\x00" + integer(0, 7, len(name)) + name + integer(0, 7, len(value)) + value


def encode(fields):
    return b"".join(literal(n, v) for n, v in fields)


def header_frames(stream, block, end_stream, pieces=None):
    """HEADERS then CONTINUATIONs carrying `block`: in `pieces` fragments of nearly equal size,
    else in as few as the default frame size allows."""
    if pieces is None:
        pieces = max(1, -(-len(block) // MAX_FRAME))
    cuts = [len(block) * i // pieces for i in range(pieces + 1)]
    out = b""
    for i in range(pieces):
        fragment = block[cuts[i]:cuts[i + 1]]
        flags = END_HEADERS if i == pieces - 1 else 0
        if i == 0:
            out += frame(HEADERS, flags | (END_STREAM if end_stream else 0), stream, fragment)
        else:
            out += frame(CONTINUATION, flags, stream, fragment)
    return out


# --- the cases ---------------------------------------------------------------------------------


class Stream:
    """One request stream: its header fields (or a raw header block), DATA frames, trailers."""

    def __init__(self, sid, fields=None, data=(), trailers=None, pieces=None, block=None):
        self.id = sid
        self.fields = fields
        self.data = list(data)
        self.trailers = trailers
        self.pieces = pieces
        self.block = block

    def frames(self):
        block = self.block if self.block is not None else encode(self.fields)
        out = header_frames(self.id, block, not self.data and self.trailers is None, self.pieces)
        for i, chunk in enumerate(self.data):
            last = i == len(self.data) - 1 and self.trailers is None
            out += frame(DATA, END_STREAM if last else 0, self.id, chunk)
        if self.trailers is not None:
            out += header_frames(self.id, encode(self.trailers), True)
        return out


def req(method=b"GET", path=b"/", scheme=b"http", authority=AUTHORITY, more=()):
    """A request's fields; a pseudo-header given as None is left out."""
    fields = []
    for name, value in ((b":method", method), (b":scheme", scheme),
                        (b":authority", authority), (b":path", path)):
        if value is not None:
            fields.append((name, value))
    return fields + list(more)


def sibling():
    return Stream(3, req(path=b"/sibling"))


CASES = {}


def case(name, fields=None, *, data=(), trailers=None, pieces=None, block=None):
    """Stream 1 as given, then the valid sibling on stream 3."""
    assert name not in CASES, name
    CASES[name] = [Stream(1, fields, data, trailers, pieces, block), sibling()]


def field(name, value):
    return req(more=[(name, value)])


# A valid request of each common shape: what both servers must simply serve.
case("valid/get", req())
case("valid/post-with-content-length", req(b"POST", more=[(b"content-length", b"5")]),
     data=[b"hello"])
case("valid/post-without-content-length", req(b"POST"), data=[b"hel", b"lo"])
case("valid/head", req(b"HEAD"))
case("valid/options", req(b"OPTIONS"))
case("valid/delete", req(b"DELETE"))
case("valid/custom-method", req(b"PURGE"))
case("valid/pseudo-order-path-first", [(b":path", b"/"), (b":authority", AUTHORITY),
                                       (b":scheme", b"http"), (b":method", b"GET")])
case("valid/get-with-body", req(more=[(b"content-length", b"3")]), data=[b"abc"])
case("valid/https-scheme", req(scheme=b"https"))
case("valid/fields", req(more=[(b"accept", b"*/*"), (b"user-agent", b"conformance"),
                               (b"x-a", b"1")]))

# Header names: nginx's rules (letters, digits, `-`; `_` dropped with underscores_in_headers
# off), then RFC 9113 §8.2.1's (no uppercase, no field-name bytes outside the token).
case("names/underscore-content_length", field(b"content_length", b"5"))
case("names/underscore-transfer_encoding", field(b"transfer_encoding", b"chunked"))
case("names/underscore-x_a", field(b"x_a", b"1"))
case("names/underscore-post-content_length", req(b"POST", more=[(b"content_length", b"50")]),
     data=[b"hello"])
case("names/upper-Content-Length", req(b"POST", more=[(b"Content-Length", b"5")]),
     data=[b"hello"])
case("names/upper-X-A", field(b"X-A", b"1"))
case("names/upper-Host", req(authority=None, more=[(b"Host", AUTHORITY)]))
case("names/space-inside", field(b"x a", b"1"))
case("names/space-leading", field(b" x", b"1"))
case("names/space-trailing", field(b"x ", b"1"))
case("names/tab-inside", field(b"x\ta", b"1"))
case("names/colon-inside", field(b"x:a", b"1"))
case("names/empty", field(b"", b"1"))
case("names/del", field(b"x\x7fa", b"1"))
case("names/nul", field(b"x\x00a", b"1"))
case("names/control", field(b"x\x01a", b"1"))
case("names/cr", field(b"x\ra", b"1"))
case("names/lf", field(b"x\na", b"1"))
case("names/brace", field(b"x{a}", b"1"))
case("names/quote", field(b'x"a', b"1"))
case("names/at", field(b"x@a", b"1"))
case("names/dot", field(b"x.a", b"1"))
case("names/slash", field(b"x/a", b"1"))
case("names/non-ascii", field(b"x\xc3\xa9", b"1"))
case("names/high-byte", field(b"x\xff", b"1"))
case("names/token-chars", field(b"x!#$%&'*+^`|~", b"1"))

# Header values: RFC 9113 §8.2.1 (no NUL, CR, LF; no whitespace at either end), nginx's own
# (NUL, CR, LF), and sizes around one large_client_header_buffers buffer (8k).
case("values/nul", field(b"x-a", b"a\x00b"))
case("values/cr", field(b"x-a", b"a\rb"))
case("values/lf", field(b"x-a", b"a\nb"))
case("values/crlf-injection", field(b"x-a", b"a\r\nx-injected: 1"))
case("values/obs-fold", field(b"x-a", b"a\r\n b"))
case("values/control-01", field(b"x-a", b"a\x01b"))
case("values/control-1b", field(b"x-a", b"a\x1bb"))
case("values/del", field(b"x-a", b"a\x7fb"))
case("values/space-leading", field(b"x-a", b" a"))
case("values/space-trailing", field(b"x-a", b"a "))
case("values/tab-leading", field(b"x-a", b"\ta"))
case("values/tab-trailing", field(b"x-a", b"a\t"))
case("values/tab-inside", field(b"x-a", b"a\tb"))
case("values/space-only", field(b"x-a", b" "))
case("values/empty", field(b"x-a", b""))
case("values/non-ascii", field(b"x-a", b"\xc3\xa9"))
case("values/high-byte", field(b"x-a", b"a\xffb"))
case("values/4k", field(b"x-a", b"v" * 4096))
case("values/8k-exact", field(b"x-a", b"v" * 8192))
case("values/8k-plus-one", field(b"x-a", b"v" * 8193))
case("values/9k", field(b"x-a", b"v" * 9216))
case("values/name-8k-exact", field(b"x-" + b"n" * 8190, b"1"))
case("values/name-9k", field(b"x-" + b"n" * 9216, b"1"))
case("values/list-30k", req(more=[(b"x-%d" % i, b"v" * 6000) for i in range(5)]))
case("values/list-over-32k", req(more=[(b"x-%d" % i, b"v" * 7000) for i in range(5)]))
case("values/many-fields-150", req(more=[(b"x-%d" % i, b"1") for i in range(150)]))

# The host: `:authority`, `host`, both, and host values nginx refuses.
case("host/none", req(authority=None))
case("host/authority-only", req())
case("host/host-only", req(authority=None, more=[(b"host", AUTHORITY)]))
case("host/authority-and-same-host", req(more=[(b"host", AUTHORITY)]))
case("host/authority-and-different-host", req(more=[(b"host", b"other.example")]))
case("host/two-host", req(authority=None, more=[(b"host", AUTHORITY), (b"host", b"other")]))
case("host/two-host-same", req(authority=None, more=[(b"host", AUTHORITY), (b"host", AUTHORITY)]))
case("host/two-authority", req(more=[(b":authority", b"other.example")]))
case("host/empty-authority", req(authority=b""))
case("host/empty-host", req(authority=None, more=[(b"host", b"")]))
case("host/empty-authority-and-host", req(authority=b"", more=[(b"host", AUTHORITY)]))
# A refused field with an empty value, then another field in the same block: nginx 1.22 takes
# the next literal's name for empty ("client sent zero header name length", a connection error).
case("host/empty-host-then-field", req(authority=None, more=[(b"host", b""), (b"x-a", b"1")]))
case("host/dotdot", req(authority=b".."))
case("host/a..b", req(authority=b"a..b"))
case("host/slash", req(authority=b"x/y"))
case("host/backslash", req(authority=b"x\\y"))
case("host/ipv6", req(authority=b"[::1]"))
case("host/ipv6-port", req(authority=b"[::1]:8080"))
case("host/port", req(authority=b"example.com:8080"))
case("host/port-99999", req(authority=b"example.com:99999"))
case("host/trailing-dot", req(authority=b"example.com."))
case("host/uppercase", req(authority=b"EXAMPLE.com"))
case("host/space", req(authority=b"a b"))
case("host/control", req(authority=b"a\x01b"))
case("host/nul", req(authority=b"a\x00b"))
case("host/userinfo", req(authority=b"u@example.com"))
case("host/host-dotdot", req(authority=None, more=[(b"host", b"..")]))
case("host/host-slash", req(authority=None, more=[(b"host", b"x/y")]))
case("host/host-userinfo", req(authority=None, more=[(b"host", b"u@example.com")]))

# :path: RFC 9113 §8.3.1 (origin-form, or `*` for OPTIONS; not empty), nginx's request-line
# rules (escapes, `..` above the root, `%00`), one 8k buffer for the request line.
case("path/pct00", req(path=b"/%00"))
case("path/bad-escape-short", req(path=b"/a%2"))
case("path/bad-escape-zz", req(path=b"/a%zz"))
case("path/dotdot", req(path=b"/.."))
case("path/dotdot-under-root", req(path=b"/a/../.."))
case("path/dotdot-encoded", req(path=b"/%2e%2e"))
case("path/dotdot-inside", req(path=b"/a/../b"))
case("path/dot-segments", req(path=b"/a/./b/../c"))
case("path/query-only", req(path=b"?a"))
case("path/asterisk-get", req(path=b"*"))
case("path/asterisk-options", req(b"OPTIONS", path=b"*"))
case("path/absolute-form", req(path=b"http://x/"))
case("path/double-slash", req(path=b"//x"))
case("path/empty", req(path=b""))
case("path/missing", req(path=None))
case("path/two", req(more=[(b":path", b"/other")]))
case("path/space", req(path=b"/a b"))
case("path/tab", req(path=b"/a\tb"))
case("path/control", req(path=b"/a\x01b"))
case("path/nul", req(path=b"/a\x00b"))
case("path/del", req(path=b"/a\x7fb"))
case("path/fragment", req(path=b"/a#frag"))
case("path/non-ascii", req(path=b"/\xc3\xa9"))
case("path/pct-encoded", req(path=b"/a%20b?q=%2F"))
case("path/query", req(path=b"/a?b=c&d"))
case("path/8k-minus", req(path=b"/" + b"p" * 8000))
case("path/8k-exact", req(path=b"/" + b"p" * 8191))
case("path/9k", req(path=b"/" + b"p" * 9215))

# :method: nginx reads it as a request line's method ([A-Z_-]+), TRACE and CONNECT refused.
case("method/lowercase", req(b"get"))
case("method/mixed-case", req(b"GeT"))
case("method/trace", req(b"TRACE"))
case("method/connect-authority-only", req(b"CONNECT", path=None, scheme=None,
                                          authority=b"example.com:443"))
case("method/connect-full", req(b"CONNECT"))
case("method/connect-no-authority", req(b"CONNECT", path=None, scheme=None, authority=None))
case("method/pri", req(b"PRI"))
case("method/at", req(b"G@T"))
case("method/space", req(b"G T"))
case("method/digit", req(b"G3T"))
case("method/underscore", req(b"M_X"))
case("method/dash", req(b"M-X"))
case("method/empty", req(b""))
case("method/empty-last", req(None) + [(b":method", b"")])
case("method/missing", req(None))
case("method/two", req(more=[(b":method", b"POST")]))
case("method/two-same", req(more=[(b":method", b"GET")]))
case("method/long", req(b"M" * 1000))

# :scheme: RFC 3986's scheme syntax, and what nginx 1.22 checks of it.
case("scheme/empty", req(scheme=b""))
case("scheme/missing", req(scheme=None))
case("scheme/ftp", req(scheme=b"ftp"))
case("scheme/uppercase", req(scheme=b"HTTP"))
case("scheme/space", req(scheme=b"h t"))
case("scheme/two", req(more=[(b":scheme", b"https")]))
case("scheme/plus", req(scheme=b"coap+tcp"))
case("scheme/digit-first", req(scheme=b"1http"))

# Pseudo-headers (RFC 9113 §8.3): only the four, each once, all before the regular fields.
case("pseudo/unknown", field(b":foo", b"1"))
case("pseudo/status", field(b":status", b"200"))
case("pseudo/protocol", field(b":protocol", b"websocket"))
case("pseudo/colon-only", field(b":", b"1"))
case("pseudo/after-regular", req(path=None, more=[(b"x-a", b"1"), (b":path", b"/")]))
case("pseudo/authority-after-regular", req(authority=None, more=[(b"x-a", b"1"),
                                                                  (b":authority", AUTHORITY)]))
case("pseudo/duplicate-method-scheme-path", req(more=[(b":method", b"GET"),
                                                     (b":scheme", b"http"), (b":path", b"/")]))

def post(*more):
    """A POST with these fields after the pseudo-headers."""
    return req(b"POST", more=list(more))


# Framing: content-length against the DATA (RFC 9113 §8.1.1), transfer-encoding and the other
# connection-specific fields (§8.2.2), trailers (§8.1).
case("framing/two-content-length-equal",
     post((b"content-length", b"5"), (b"content-length", b"5")), data=[b"hello"])
case("framing/two-content-length-different",
     post((b"content-length", b"5"), (b"content-length", b"3")), data=[b"hello"])
case("framing/content-length-plus", post((b"content-length", b"+5")), data=[b"hello"])
case("framing/content-length-list", post((b"content-length", b"5,5")), data=[b"hello"])
case("framing/content-length-hex", post((b"content-length", b"0x5")), data=[b"hello"])
case("framing/content-length-empty", post((b"content-length", b"")), data=[b"hello"])
case("framing/content-length-negative", post((b"content-length", b"-1")), data=[b"hello"])
case("framing/content-length-huge", post((b"content-length", b"99999999999999999999")),
     data=[b"hello"])
case("framing/content-length-5-data-3", post((b"content-length", b"5")), data=[b"abc"])
case("framing/content-length-5-data-7", post((b"content-length", b"5")), data=[b"abcdefg"])
case("framing/content-length-0-data-3", post((b"content-length", b"0")), data=[b"abc"])
case("framing/content-length-5-no-data", post((b"content-length", b"5")))
case("framing/content-length-5-data-3-then-4", post((b"content-length", b"5")),
     data=[b"abc", b"defg"])
case("framing/transfer-encoding-chunked", post((b"transfer-encoding", b"chunked")),
     data=[b"5\r\nhello\r\n0\r\n\r\n"])
case("framing/transfer-encoding-and-content-length",
     post((b"content-length", b"5"), (b"transfer-encoding", b"chunked")), data=[b"hello"])
case("framing/trailers-with-pseudo", post(), data=[b"hello"], trailers=[(b":path", b"/x")])
case("framing/trailers-with-field", post(), data=[b"hello"], trailers=[(b"x-trailer", b"1")])
case("framing/trailers-uppercase", post(), data=[b"hello"], trailers=[(b"X-Trailer", b"1")])
case("framing/trailers-content-length", post(), data=[b"hello"],
     trailers=[(b"content-length", b"5")])
case("framing/connection-close", field(b"connection", b"close"))
case("framing/connection-keep-alive", field(b"connection", b"keep-alive"))
case("framing/keep-alive", field(b"keep-alive", b"1"))
case("framing/proxy-connection", field(b"proxy-connection", b"x"))
case("framing/upgrade", field(b"upgrade", b"h2c"))
case("framing/te-gzip", field(b"te", b"gzip"))
case("framing/te-trailers", field(b"te", b"trailers"))
case("framing/te-trailers-gzip", field(b"te", b"trailers, gzip"))
case("framing/expect-100-continue", post((b"expect", b"100-continue"),
                                         (b"content-length", b"5")), data=[b"hello"])

# Cookies: RFC 9113 §8.2.3, the crumbs reach an HTTP/1.1 upstream as one field joined by "; ".
case("cookies/three", req(more=[(b"cookie", b"a=1"), (b"cookie", b"b=2"), (b"cookie", b"c=3")]))
case("cookies/one", req(more=[(b"cookie", b"a=1; b=2")]))
case("cookies/between-others", req(more=[(b"cookie", b"a=1"), (b"x-a", b"1"),
                                          (b"cookie", b"b=2")]))
case("cookies/empty-crumb", req(more=[(b"cookie", b"a=1"), (b"cookie", b""),
                                      (b"cookie", b"b=2")]))

# Header blocks in CONTINUATION frames (RFC 9113 §6.10).
case("continuation/2", req(more=[(b"x-a", b"1")]), pieces=2)
case("continuation/59", req(more=[(b"x-a", b"v" * 200), (b"cookie", b"a=1")]), pieces=59)
case("continuation/one-byte-each", req(), pieces=len(encode(req())))

# HPACK blocks that cannot be decoded: a connection error (RFC 9113 §4.3).
case("hpack/indexed-0", block=encode(req()) + b"\x80")
case("hpack/index-past-table", block=encode(req()) + b"\xff\x7f")
case("hpack/truncated-literal", block=encode(req()) + b"\x00\x05ab")
case("hpack/size-update-too-big", block=b"\x3f\xe1\xff\x03" + encode(req()))


# --- running a case ----------------------------------------------------------------------------


class Conn(FrameReader):
    """The client's socket and the frames read from it."""

    def __init__(self, target, bind):
        host, port = target.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if bind:
            self.sock.bind((bind, 0))
        self.sock.settimeout(5)
        self.sock.connect((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.closed = False

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            # The server closed while the case was being written (a connection error it
            # answered at once): what it sent before still counts.
            self.closed = True



def unpad(flags, payload, priority=False):
    if flags & PADDED:
        pad = payload[0]
        payload = payload[1:len(payload) - pad]
    if priority and flags & PRIORITY_FLAG:
        payload = payload[5:]
    return payload


def run_case(name, target, bind, limit):
    streams = CASES[name]
    started = time.monotonic()
    deadline = started + limit
    out = {"case": name, "streams": {}, "goaway": None, "goaway_last": None,
           "closed": False, "seconds": 0.0, "error": None}
    state = {s.id: {} for s in streams}
    try:
        conn = Conn(target, bind)
    except OSError as e:
        out["error"] = "connect: %s" % e
        return out
    try:
        conn.send(PREFACE + frame(SETTINGS, 0, 0))
        while True:
            f = conn.next_frame(deadline)
            if f is None:
                out["error"] = "no SETTINGS from the server"
                out["closed"] = conn.closed
                return out
            if f[0] == SETTINGS and not f[1] & ACK:
                break
        case_bytes = b"".join(s.frames() for s in streams)
        conn.send(frame(SETTINGS, ACK, 0) + case_bytes + frame(PING, 0, 0, PING_READ))
        decoder = hpack.Decoder()
        decoder.max_header_list_size = 1 << 24
        decoder.max_allowed_table_size = 1 << 16
        block, block_stream, block_flags = None, None, 0
        read_acked = drained = drain_sent = False
        while not drained:
            f = conn.next_frame(deadline)
            if f is None:
                break
            kind, flags, sid, payload = f
            if kind == SETTINGS and not flags & ACK:
                conn.send(frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                conn.send(frame(PING, ACK, 0, payload))
            elif kind == PING:
                read_acked = read_acked or payload == PING_READ
                drained = payload == PING_DRAIN
            elif kind == GOAWAY and len(payload) >= 8:
                out["goaway_last"] = int.from_bytes(payload[0:4], "big") & 0x7FFFFFFF
                out["goaway"] = int.from_bytes(payload[4:8], "big")
            elif kind in (HEADERS, CONTINUATION):
                if kind == HEADERS:
                    block, block_stream, block_flags = unpad(flags, payload, True), sid, flags
                elif block is not None:
                    block += payload
                if flags & END_HEADERS and block is not None:
                    fields = decoder.decode(bytes(block), raw=True)
                    st = state.setdefault(block_stream, {})
                    status = dict(fields).get(b":status")
                    # A 1xx is followed by the final answer; trailers have no :status.
                    if status is not None and ("status" not in st or st["status"] < 200):
                        st["status"] = int(status)
                        st["body"] = 0
                        st["upstream"] = any(n == b"x-recorder" for n, _ in fields)
                    if block_flags & END_STREAM:
                        st["ended"] = True
                    block = None
            elif kind == DATA:
                st = state.setdefault(sid, {})
                st["body"] = st.get("body", 0) + len(unpad(flags, payload))
                if flags & END_STREAM:
                    st["ended"] = True
            elif kind == RST_STREAM and len(payload) >= 4:
                st = state.setdefault(sid, {})
                st["rst"] = int.from_bytes(payload[0:4], "big")
                st["ended"] = True
            all_ended = all(state[s.id].get("ended") for s in streams)
            if read_acked and all_ended and not drain_sent and out["goaway"] is None:
                conn.send(frame(PING, 0, 0, PING_DRAIN))
                drain_sent = True
        out["closed"] = conn.closed
    except Exception as e:  # a server's answer this script cannot read is the case's result
        out["error"] = "%s: %s" % (type(e).__name__, e)
        out["closed"] = conn.closed
    finally:
        conn.sock.close()
    for s in streams:
        st = state[s.id]
        st.pop("ended", None)
        out["streams"][str(s.id)] = st if st else {"none": True}
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", help="HOST:PORT of an h2c (prior knowledge) server")
    p.add_argument("--bind", help="source address of the connections (127.0.0.N)")
    p.add_argument("--case", action="append", help="run only this case (again for more)")
    p.add_argument("--list", action="store_true", help="print the case names")
    p.add_argument("--serve", action="store_true",
                   help="read NAME<TAB>BIND lines on stdin, answer each with its JSON line")
    p.add_argument("--limit", type=float, default=1.5, help="seconds one case may take")
    args = p.parse_args()
    if args.list:
        for name in CASES:
            print(name)
        return 0
    if not args.target:
        p.error("--target is required")
    if args.serve:
        for line in sys.stdin:
            name, _, bind = line.rstrip("\n").partition("\t")
            if name not in CASES:
                result = {"case": name, "error": "no such case"}
            else:
                result = run_case(name, args.target, bind or args.bind, args.limit)
            print(json.dumps(result), flush=True)
        return 0
    names = args.case or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error("no such case: %s" % ", ".join(unknown))
    for name in names:
        print(json.dumps(run_case(name, args.target, args.bind, args.limit)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
