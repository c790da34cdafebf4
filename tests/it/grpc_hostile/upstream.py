"""A misbehaving gRPC upstream over h2c (tests/it/grpc_hostile.rs), /usr/bin/python3 with
python3-h2's `hpack`:

    upstream.py --listen PORT:PROFILE [--listen PORT:PROFILE ...]

Every connection gets the server's SETTINGS (by PROFILE), its peer's SETTINGS and PINGs
acknowledged, and a WINDOW_UPDATE for every DATA frame read (connection and stream), unless
the profile says otherwise. The frames are written by hand, never through a protocol library's
state, so that anything can be sent: header blocks are HPACK literals without indexing (no
dynamic table on our side), requests are decoded with `hpack` (the peer's table is followed).

What a stream gets is chosen by the last segment of its `:path` (`/hostile.H/CASE`): see
CASES below. Each stream's answer runs in its own thread while the connection's reader goes
on reading (so a flood we send never waits on the acknowledgements it causes).

PROFILEs:
- hostile: default settings, the CASES;
- one: SETTINGS_MAX_CONCURRENT_STREAMS = 1; every stream is answered `ok` after 50 ms;
- zero: SETTINGS_INITIAL_WINDOW_SIZE = 0 and no WINDOW_UPDATE ever: the request body never
  moves; nothing is answered, but a response head to a path ending in `/head`;
- deaf: the largest windows (the peer may send 2^31-1 bytes), then after the first request's
  head nothing is read from the socket again (nor answered).
"""

import argparse
import socket
import struct
import threading
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8, 0x9)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, REFUSED_STREAM, CANCEL = 0x0, 0x1, 0x2, 0x7, 0x8
MAX_WINDOW = 2**31 - 1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def integer(n, prefix_bits, first=0):
    """HPACK's integer (RFC 7541 §5.1) with `first`'s high bits on its first byte."""
    top = (1 << prefix_bits) - 1
    if n < top:
        return bytes([first | n])
    out = [first | top]
    n -= top
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return bytes(out)


def block(fields):
    """A header block of literals without indexing, new names, no Huffman: names are sent as
    given (uppercase too), nothing is checked."""
    out = b""
    for name, value in fields:
        name = name.encode() if isinstance(name, str) else name
        value = value.encode() if isinstance(value, str) else value
        out += b"\x00" + integer(len(name), 7) + name + integer(len(value), 7) + value
    return out


def message(payload):
    """One gRPC message: uncompressed, its length, the bytes."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


HEAD = [(":status", "200"), ("content-type", "application/grpc")]
TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]


class Conn:
    def __init__(self, sock, profile):
        self.sock = sock
        self.profile = profile
        self.lock = threading.Lock()
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.decoder.max_header_list_size = 1 << 24
        self.buf = bytearray()
        self.block = None  # (stream, fragments) while a header block is continued

    def send(self, *frames):
        with self.lock:
            try:
                self.sock.sendall(b"".join(frames))
            except OSError:
                pass

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def settings(self):
        if self.profile == "one":
            return struct.pack(">HI", 3, 1)
        if self.profile == "zero":
            return struct.pack(">HI", 4, 0)
        if self.profile == "deaf":
            return struct.pack(">HI", 4, MAX_WINDOW)
        return b""

    def run(self):
        try:
            if self.recv_exact(len(PREFACE)) != PREFACE:
                return
            first = [frame(SETTINGS, 0, 0, self.settings())]
            if self.profile == "deaf":
                first.append(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", MAX_WINDOW - 65535)))
            self.send(*first)
            while True:
                head = self.recv_exact(9)
                length = int.from_bytes(head[0:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = self.recv_exact(length)
                if self.on_frame(kind, flags, stream, payload) == "deaf":
                    time.sleep(30)
                    return
        except (EOFError, OSError):
            pass
        finally:
            self.close()
            self.sock.close()

    def on_frame(self, kind, flags, stream, payload):
        if kind == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            self.send(frame(PING, ACK, 0, payload))
        elif kind == DATA and payload and self.profile not in ("zero", "deaf"):
            n = struct.pack(">I", len(payload))
            self.send(frame(WINDOW_UPDATE, 0, 0, n), frame(WINDOW_UPDATE, 0, stream, n))
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                if flags & PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                if flags & PRIORITY_FLAG:
                    payload = payload[5:]
                self.block = (stream, [payload])
            elif self.block is not None:
                self.block[1].append(payload)
            if flags & END_HEADERS and self.block is not None:
                sid, fragments = self.block
                self.block = None
                fields = dict(self.decoder.decode(b"".join(fragments), raw=True))
                return self.on_request(sid, fields)
        return None

    def on_request(self, stream, fields):
        path = fields.get(b":path", b"").decode("latin-1")
        if self.profile == "deaf":
            return "deaf"
        if self.profile == "zero":
            if path.endswith("/head"):
                self.headers(stream, HEAD)
            return None
        if self.profile == "one":
            case = "slow_ok"
        elif path.startswith("/hostile.H/"):
            case = path.rsplit("/", 1)[1]
        else:
            case = "ok"
        act = CASES.get(case, CASES["ok"])
        threading.Thread(target=act, args=(self, stream), daemon=True).start()
        return None

    # Helpers for the cases.
    def headers(self, stream, fields, end_stream=False):
        self.send(frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream,
                        block(fields)))

    def data(self, stream, payload, end_stream=False):
        self.send(frame(DATA, END_STREAM if end_stream else 0, stream, payload))

    def reply(self, stream, head=HEAD, body=b"ok", trailers=TRAILERS):
        self.headers(stream, head)
        if body is not None:
            self.data(stream, message(body))
        self.headers(stream, trailers, end_stream=True)

    def rst(self, stream, code):
        self.send(frame(RST_STREAM, 0, stream, struct.pack(">I", code)))

    def goaway(self, last, code):
        self.send(frame(GOAWAY, 0, 0, struct.pack(">II", last, code)))


def continued(c, s, fragment, piece, end_stream=False):
    """`fragment` as one HEADERS and CONTINUATIONs of `piece` bytes each, in one write."""
    parts = [fragment[i:i + piece] for i in range(0, len(fragment), piece)] or [b""]
    frames = []
    for i, p in enumerate(parts):
        last = END_HEADERS if i == len(parts) - 1 else 0
        if i == 0:
            frames.append(frame(HEADERS, last | (END_STREAM if end_stream else 0), s, p))
        else:
            frames.append(frame(CONTINUATION, last, s, p))
    c.send(*frames)


def big_head(c, s):
    # 80 fields of 1000 bytes: an 80 KB list, over the 64 KiB cap, in 16 KB frames.
    pad = [("x-pad-%d" % i, "v" * 1000) for i in range(80)]
    continued(c, s, block(HEAD + pad), 16384)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def huge_value(c, s):
    continued(c, s, block(HEAD + [("x-huge", "h" * 200_000)]), 16384)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def continuations(c, s):
    # A valid head, one byte per frame: a peer may split a block as it likes.
    continued(c, s, block(HEAD + [("x-split", "yes")]), 1)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def continuation_flood(c, s):
    # 100 000 one-byte CONTINUATIONs, each a whole field (static entry 16), then the end.
    c.send(frame(HEADERS, 0, s, block(HEAD)))
    one = frame(CONTINUATION, 0, s, b"\x90")
    for _ in range(100):
        c.send(one * 1000)
    c.send(frame(CONTINUATION, END_HEADERS, s, b""))
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def head_with(extra, drop=()):
    def act(c, s):
        head = [f for f in HEAD if f[0] not in drop] + extra
        c.reply(s, head=head)
    return act


def head_first(c, s):
    # A regular field before the pseudo-field.
    c.reply(s, head=[("content-type", "application/grpc"), (":status", "200")])


def info_then_ok(c, s):
    c.headers(s, [(":status", "100")])
    c.reply(s)


def http_503(c, s):
    c.headers(s, [(":status", "503"), ("content-type", "text/html")], end_stream=True)


def trailers_only(c, s):
    c.headers(s, HEAD + [("grpc-status", "5"), ("grpc-message", "nope")], end_stream=True)


def trailers_with(trailers):
    def act(c, s):
        c.reply(s, trailers=trailers)
    return act


def trailers_no_end(c, s):
    c.headers(s, HEAD)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS)
    time.sleep(0.2)
    c.data(s, b"", end_stream=True)


def headers_after_trailers(c, s):
    c.reply(s)
    c.headers(s, TRAILERS, end_stream=True)


def data_after_trailers(c, s):
    c.reply(s)
    c.data(s, message(b"late"), end_stream=True)


def rst_before(code):
    def act(c, s):
        c.rst(s, code)
    return act


def rst_mid(code):
    def act(c, s):
        c.headers(s, HEAD)
        c.data(s, message(b"ok"))
        time.sleep(0.01)
        c.rst(s, code)
    return act


def rst_after_trailers(c, s):
    c.reply(s)
    c.rst(s, CANCEL)


def goaway_below(c, s):
    # The stream in flight is above the last stream id: it was never processed.
    c.goaway(max(s - 2, 0), NO_ERROR)
    time.sleep(0.01)
    c.close()


def goaway_above(c, s):
    # A graceful GOAWAY that covers the stream, then its whole answer, then the close.
    c.goaway(s, NO_ERROR)
    c.reply(s)
    time.sleep(0.01)
    c.close()


def goaway_linger(c, s):
    # A graceful shutdown as gRPC servers do it: GOAWAY covering the stream, its answer, and
    # the connection kept a while for the streams in flight; new streams must go elsewhere.
    c.goaway(s, NO_ERROR)
    c.reply(s)
    time.sleep(1.0)
    c.close()


def goaway_mid_body(c, s):
    c.headers(s, HEAD)
    c.data(s, message(b"ok"))
    c.goaway(s, INTERNAL_ERROR)
    time.sleep(0.01)
    c.close()


def close_before(c, s):
    c.close()


def close_mid_body(c, s):
    c.headers(s, HEAD)
    c.data(s, message(b"ok"))
    time.sleep(0.01)
    c.close()


def flood(one, count):
    def act(c, s):
        for _ in range(count // 1000):
            c.send(one * 1000)
        c.reply(s)
    return act


def window_overflow(c, s):
    c.headers(s, HEAD)
    inc = frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", MAX_WINDOW))
    c.send(inc, inc)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def stream_window_overflow(c, s):
    c.headers(s, HEAD)
    inc = frame(WINDOW_UPDATE, 0, s, struct.pack(">I", MAX_WINDOW))
    c.send(inc, inc)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def empty_data(c, s):
    c.headers(s, HEAD)
    empty = frame(DATA, 0, s)
    for _ in range(20):
        c.send(empty * 1000)
    c.data(s, message(b"ok"))
    c.headers(s, TRAILERS, end_stream=True)


def tiny_data(c, s):
    # A 20 000-byte message in DATA frames of one byte each.
    body = message(b"t" * 20_000)
    c.headers(s, HEAD)
    c.send(*(frame(DATA, 0, s, body[i:i + 1]) for i in range(len(body))))
    c.headers(s, TRAILERS, end_stream=True)


def oversized_frame(c, s):
    # A DATA frame over the peer's SETTINGS_MAX_FRAME_SIZE (16 384 by default).
    c.headers(s, HEAD)
    c.data(s, message(b"x" * 20_000))
    c.headers(s, TRAILERS, end_stream=True)


def never_ends(c, s):
    c.headers(s, HEAD)
    c.data(s, message(b"ok"))


def silent(c, s):
    pass


def slow_ok(c, s):
    time.sleep(0.01)
    c.reply(s)


def ok(c, s):
    c.reply(s)


CASES = {
    "ok": ok,
    "slow_ok": slow_ok,
    # Heads.
    "big_head": big_head,
    "huge_value": huge_value,
    "continuations": continuations,
    "continuation_flood": continuation_flood,
    "bad_pseudo": head_with([(":foo", "bar")]),
    "request_pseudo": head_with([(":path", "/x")]),
    "no_status": head_with([], drop=(":status",)),
    "bad_status": head_with([(":status", "abc")], drop=(":status",)),
    "upper_name": head_with([("X-Upper", "1")]),
    "connection_field": head_with([("connection", "close")]),
    "transfer_encoding": head_with([("transfer-encoding", "chunked")]),
    "head_first": head_first,
    "info_then_ok": info_then_ok,
    "no_content_type": head_with([], drop=("content-type",)),
    "http_503": http_503,
    # Trailers.
    "trailers_only": trailers_only,
    "trailer_pseudo": trailers_with([(":status", "200")] + TRAILERS),
    "trailer_upper": trailers_with([("Grpc-Status", "0")]),
    "trailer_no_status": trailers_with([("x-trail", "1")]),
    "trailers_no_end": trailers_no_end,
    "headers_after_trailers": headers_after_trailers,
    "data_after_trailers": data_after_trailers,
    # Resets, GOAWAY, close.
    "rst_before_internal": rst_before(INTERNAL_ERROR),
    "rst_before_refused": rst_before(REFUSED_STREAM),
    "rst_before_cancel": rst_before(CANCEL),
    "rst_mid_internal": rst_mid(INTERNAL_ERROR),
    "rst_mid_cancel": rst_mid(CANCEL),
    "rst_mid_no_error": rst_mid(NO_ERROR),
    "rst_after_trailers": rst_after_trailers,
    "goaway_below": goaway_below,
    "goaway_above": goaway_above,
    "goaway_linger": goaway_linger,
    "goaway_mid_body": goaway_mid_body,
    "close_before": close_before,
    "close_mid_body": close_mid_body,
    # Floods and flow control.
    "settings_flood": flood(frame(SETTINGS, 0, 0), 20_000),
    "ping_flood": flood(frame(PING, 0, 0, b"12345678"), 20_000),
    "window_overflow": window_overflow,
    "stream_window_overflow": stream_window_overflow,
    "empty_data": empty_data,
    "tiny_data": tiny_data,
    "oversized_frame": oversized_frame,
    "never_ends": never_ends,
    "silent": silent,
}


def serve(listener, profile):
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=Conn(sock, profile).run, daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", action="append", required=True, help="PORT:PROFILE")
    args = ap.parse_args()
    threads = []
    for spec in args.listen:
        port, profile = spec.split(":")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(256)
        t = threading.Thread(target=serve, args=(listener, profile), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
