"""HTTP/3 load for scripts/bench.sh's h3 scenario, on aioquic (Debian's h2load 1.52 is built without
ngtcp2/nghttp3: its `--npn-list=h3` still dials TCP, and every request fails).

Usage:
  h3-load.py load HOST:PORT PATH --connections C --streams M --requests N
      C QUIC connections, each keeping M requests in flight (GET PATH) until N were answered in all.
      Prints one JSON line: requests, ok (2xx), failed, seconds, rps, p50_ms, p99_ms.
  h3-load.py handshakes HOST:PORT PATH --concurrency K --seconds T
      K clients, each making one new QUIC connection after another for T seconds: a full handshake
      (no resumption, no 0-RTT: aioquic keeps no session ticket here), one GET PATH, the close.
      Prints one JSON line: handshakes (completed with a 2xx), failed, seconds, rate.
  h3-load.py idle h3|h2 HOST:PORT PATH N PID...
      Memory per idle connection: after a settle (64 connections, idle 2 s, closed), N connections,
      each with one GET PATH answered, then 3 s idle; the growth of the resident memory of PIDs
      (summed) per connection; then N more while those stay open. h2: HTTP/2 over TLS (ALPN h2),
      frames written by hand (one HEADERS, SETTINGS acknowledged), so no HTTP/2 library is needed.
      Prints "PEAK FURTHER" in bytes per connection.

Efficiency: one asyncio loop, every connection's packets sent in one batch per event (aioquic's
transmit), streams refilled as soon as one ends; the client is still the bottleneck on a shared
2-core machine, which is why the scenario reports the server's CPU per request, not its rate.
"""

import argparse
import asyncio
import json
import socket
import ssl
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class Client(QuicConnectionProtocol):
    """One QUIC connection's HTTP/3 requests, each a future of (status, seconds)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)
        self.waiting = {}

    def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        self.http.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                     (b":authority", authority), (b":path", path)],
                               end_stream=True)
        done = self._loop.create_future()
        self.waiting[sid] = [done, 0, time.monotonic()]
        self.transmit()
        return done

    def end(self, sid, status):
        w = self.waiting.pop(sid, None)
        if w is not None and not w[0].done():
            w[0].set_result((status, time.monotonic() - w[2]))

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            self.end(event.stream_id, -1)
        elif isinstance(event, ConnectionTerminated):
            for sid in list(self.waiting):
                self.end(sid, -1)
        for h in self.http.handle_event(event):
            w = self.waiting.get(h.stream_id)
            if w is None:
                continue
            if isinstance(h, HeadersReceived):
                for n, v in h.headers:
                    if n == b":status":
                        w[1] = int(v)
            if isinstance(h, (HeadersReceived, DataReceived)) and h.stream_ended:
                self.end(h.stream_id, w[1])


def config():
    c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE)
    return c


def addr(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


async def load(a):
    host, port = addr(a.addr)
    authority, path = a.addr.encode(), a.path.encode()
    left = [a.requests]
    lat, failed = [], [0]

    async def stream_loop(client):
        while left[0] > 0:
            left[0] -= 1
            status, took = await client.get(authority, path)
            if 200 <= status < 300:
                lat.append(took)
            else:
                failed[0] += 1

    async def one_connection():
        async with connect(host, port, configuration=config(), create_protocol=Client) as client:
            await asyncio.gather(*(stream_loop(client) for _ in range(a.streams)))

    start = time.monotonic()
    await asyncio.gather(*(one_connection() for _ in range(a.connections)))
    took = time.monotonic() - start
    lat.sort()
    pick = lambda q: round(lat[min(len(lat) - 1, int(len(lat) * q))] * 1000, 3) if lat else 0
    print(json.dumps({"requests": len(lat) + failed[0], "ok": len(lat), "failed": failed[0],
                      "seconds": round(took, 3), "rps": round(len(lat) / took, 1),
                      "p50_ms": pick(0.50), "p99_ms": pick(0.99)}))


async def handshakes(a):
    host, port = addr(a.addr)
    authority, path = a.addr.encode(), a.path.encode()
    done, failed = [0], [0]
    until = time.monotonic() + a.seconds

    async def worker():
        while time.monotonic() < until:
            try:
                async with connect(host, port, configuration=config(),
                                   create_protocol=Client) as client:
                    status, _ = await client.get(authority, path)
                ok = 200 <= status < 300
            except (ConnectionError, asyncio.TimeoutError):
                ok = False
            if ok:
                done[0] += 1
            else:
                failed[0] += 1

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(a.concurrency)))
    took = time.monotonic() - start
    print(json.dumps({"handshakes": done[0], "failed": failed[0], "seconds": round(took, 3),
                      "rate": round(done[0] / took, 1)}))


def rss_kib(pids):
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return total


async def h3_idle_batch(host, port, authority, path, n, held):
    async def one():
        cm = connect(host, port, configuration=config(), create_protocol=Client)
        client = await cm.__aenter__()
        status, _ = await client.get(authority, path)
        if not 200 <= status < 300:
            sys.exit(f"h3 idle: {path!r} answered {status}")
        held.append(cm)

    # In groups, so that the handshakes do not all time out behind each other; a group that
    # does not end within 60 s stops the measurement rather than hang it.
    for i in range(0, n, 100):
        group = asyncio.gather(*(one() for _ in range(min(100, n - i))))
        try:
            await asyncio.wait_for(group, 60)
        except asyncio.TimeoutError:
            sys.exit(f"h3 idle: {min(100, n - i)} connections not all answered within 60 s")


def h2_request(authority, path):
    """The client preface, an empty SETTINGS, and GET PATH as stream 1 (HPACK by hand: indexed
    :method GET and :scheme https, literal :path and :authority with indexed names)."""
    def lit(index, value):
        return bytes([0x00 | index, len(value)]) + value  # literal without indexing, 4-bit index
    block = b"\x82\x87" + lit(4, path) + lit(1, authority)
    frame = lambda kind, flags, sid, payload: (len(payload).to_bytes(3, "big") + bytes([kind, flags])
                                               + sid.to_bytes(4, "big") + payload)
    return (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
            + frame(1, 0x05, 1, block))


def h2_answered(sock):
    """Reads frames until stream 1 ends; acknowledges the server's SETTINGS."""
    buf = b""
    while True:
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                sys.exit("h2 idle: connection closed before the answer")
            buf += chunk
        size = int.from_bytes(buf[:3], "big")
        kind, flags, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
        buf = buf[9 + size:]
        if kind == 4 and not flags & 1:
            sock.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
        if sid == 1 and kind in (0, 1) and flags & 1:
            return
        if kind == 3 and sid == 1:
            sys.exit("h2 idle: stream reset")


def h2_idle_batch(host, port, authority, path, n, held):
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    for _ in range(n):
        s = ctx.wrap_socket(socket.create_connection((host, port)))
        if s.selected_alpn_protocol() != "h2":
            sys.exit("h2 idle: ALPN did not choose h2")
        s.sendall(h2_request(authority, path))
        h2_answered(s)
        held.append(s)


async def idle(a):
    host, port = addr(a.addr)
    authority, path = a.addr.encode(), a.path.encode()

    async def batch(n, held):
        before = rss_kib(a.pids)
        if a.protocol == "h3":
            await h3_idle_batch(host, port, authority, path, n, held)
        else:
            h2_idle_batch(host, port, authority, path, n, held)
        await asyncio.sleep(3)
        return (rss_kib(a.pids) - before) * 1024 / n

    settle = []
    await batch(64, settle)
    await close_all(settle)
    await asyncio.sleep(1)
    first, second = [], []
    peak = await batch(a.n, first)
    further = await batch(a.n, second)
    print(f"{peak:.0f} {further:.0f}")
    await close_all(first + second)


async def close_all(held):
    for h in held:
        if isinstance(h, socket.socket):
            h.close()
        else:
            await h.__aexit__(None, None, None)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    l = sub.add_parser("load")
    l.add_argument("addr"), l.add_argument("path")
    l.add_argument("--connections", type=int, default=8)
    l.add_argument("--streams", type=int, default=10)
    l.add_argument("--requests", type=int, default=10000)
    h = sub.add_parser("handshakes")
    h.add_argument("addr"), h.add_argument("path")
    h.add_argument("--concurrency", type=int, default=8)
    h.add_argument("--seconds", type=float, default=10)
    i = sub.add_parser("idle")
    i.add_argument("protocol", choices=["h3", "h2"])
    i.add_argument("addr"), i.add_argument("path")
    i.add_argument("n", type=int)
    i.add_argument("pids", nargs="+")
    a = p.parse_args()
    asyncio.run({"load": load, "handshakes": handshakes, "idle": idle}[a.mode](a))


main()
