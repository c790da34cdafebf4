"""HTTP/3 client for sluice's tests, on aioquic (a maintained QUIC and HTTP/3 stack).

Usage: client.py HOST:PORT [--sni NAME] [--ca FILE] [--bind IP] [--spec FILE|-]
                 [--ticket FILE] [--hold SECONDS] [--linger SECONDS]

--ticket FILE resumes the TLS session of the ticket in FILE (if there is one: then the requests
marked "early" go in 0-RTT when the ticket allows it), and writes the last ticket the server sends
to FILE (waiting up to 2 s for one). --hold SECONDS holds every datagram the client would send
after its first flight for that long: the server gets the client's first flight (its 0-RTT
requests) but not the end of its handshake until then. --linger SECONDS waits that long at most,
once every request has ended, for the server to close the connection.

The spec (JSON, from --spec or stdin) is a list of requests, sent over one QUIC connection:
  {"method": "GET", "path": "/x", "headers": [["name", "value"], ...], "body": "text",
   "at": seconds after the first (optional, default 0: all at once), "raw": true (optional:
   send the header list exactly as given, pseudo-headers included, without adding any),
   "later": {"at": seconds, "data": "text"} (optional: the stream stays open after the head
   and "body", and this DATA ends it that long after), "reset_at": seconds (optional: the
   stream is reset with H3_REQUEST_CANCELLED that long after; its "reset" is then "sent"),
   "cancel_at": seconds (optional: the request is cancelled as RFC 9114 §4.1.1 has a client
   cancel one, STOP_SENDING and RESET_STREAM with H3_REQUEST_CANCELLED, that long after; its
   "reset" is then "sent"), "after": i (optional: sent once request i of the spec has ended,
   and "at" seconds after that),
   "rebind": "IP" (optional: before this request the connection moves to a new socket on IP),
   "early": true (optional: sent right after the ClientHello, before the handshake; list these
   first)}
Prints one JSON line per request, in the spec's order:
  {"status": 200, "headers": [[n, v], ...], "body": "...", "ms": elapsed since sent,
   "reset": null | error code of a stream reset}
and a last line {"connection": "closed" | "open", "error": code or null, "retried": whether
the server sent a Retry first, "resumed": whether the session was resumed, "early_data": whether
the server accepted 0-RTT, "ticket_early": the max_early_data_size of the last ticket received};
or only {"connection": "failed", "error": why} when the
handshake did not complete.
"""

import argparse
import asyncio
import json
import os
import pickle
import socket
import ssl
import sys
import time

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamReset


# Stream ids of HEAD requests: their response's Content-Length says what a GET would get, with no
# body (RFC 9110 §9.3.2), which aioquic would hold against the empty body.
HEAD_STREAMS = set()
_check_content_length = H3Connection._check_content_length


def check_content_length(self, stream):
    if stream.stream_id not in HEAD_STREAMS:
        _check_content_length(self, stream)


H3Connection._check_content_length = check_content_length


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)
        self.streams = {}
        self.closed = None
        self.handshake = None
        self.hold_until = None
        self.held = False

    def transmit(self):
        # --hold: nothing leaves until hold_until; then all that piled up.
        if self.hold_until is not None:
            wait = self.hold_until - self._loop.time()
            if wait > 0:
                if not self.held:
                    self.held = True
                    self._loop.call_later(wait, self.transmit)
                return
            self.hold_until = None
        super().transmit()

    def request(self, method, authority, path, headers, body, raw, later=None, reset_at=None,
                cancel_at=None):
        sid = self._quic.get_next_available_stream_id()
        if method == "HEAD":
            HEAD_STREAMS.add(sid)
        if raw:
            fields = [(n.encode(), v.encode()) for n, v in headers]
        else:
            fields = [(b":method", method.encode()), (b":scheme", b"https"),
                      (b":authority", authority.encode()), (b":path", path.encode())]
            fields += [(n.encode(), v.encode()) for n, v in headers]
        held = later is not None or reset_at is not None
        self.http.send_headers(sid, fields, end_stream=not body and not held)
        if body:
            self.http.send_data(sid, body.encode(), end_stream=not held)
        if later is not None:
            self._loop.call_later(later["at"], self.send_later, sid, later["data"].encode())
        if reset_at is not None:
            self._loop.call_later(reset_at, self.reset, sid)
        if cancel_at is not None:
            self._loop.call_later(cancel_at, self.cancel, sid)
        done = self._loop.create_future()
        self.streams[sid] = {"status": None, "headers": [], "body": b"", "reset": None,
                             "sent": time.monotonic(), "done": done}
        if self.closed is not None:
            # The connection is gone: nothing will come of it.
            self.finish(self.streams[sid])
        self.transmit()
        return done

    def send_later(self, sid, data):
        self.http.send_data(sid, data, end_stream=True)
        self.transmit()

    def reset(self, sid):
        # H3_REQUEST_CANCELLED, as nginx's h3_limit_req.t resets a delayed request.
        self._quic.reset_stream(sid, 0x010C)
        self.streams[sid]["reset"] = "sent"
        self.finish(self.streams[sid])
        self.transmit()

    def cancel(self, sid):
        # The client no longer wants the response (STOP_SENDING), and sends no more of the
        # request (RESET_STREAM: a no-op once all it sent was acknowledged, as a GET's is).
        # (An answer that came first is kept.)
        if self.streams[sid]["done"].done():
            return
        quic = self._quic._streams.get(sid)
        if quic is not None and quic.is_blocked:
            # Not yet open (beyond the server's stream credit): a frame on it now would be a
            # STREAM_LIMIT_ERROR; cancelled once it opens.
            self._loop.call_later(0.02, self.cancel, sid)
            return
        self._quic.stop_stream(sid, 0x010C)
        self._quic.reset_stream(sid, 0x010C)
        self.streams[sid]["reset"] = "sent"
        self.finish(self.streams[sid])
        self.transmit()

    def quic_event_received(self, event):
        if isinstance(event, StreamReset) and event.stream_id in self.streams:
            s = self.streams[event.stream_id]
            # (The server's reset of a stream this client reset or cancelled first is its
            # answer to that: the stream stays "sent".)
            if s["reset"] != "sent":
                s["reset"] = event.error_code
            self.finish(s)
        if isinstance(event, HandshakeCompleted):
            self.handshake = event
        if isinstance(event, ConnectionTerminated):
            self.closed = event.error_code
            for s in self.streams.values():
                self.finish(s)
        for h in self.http.handle_event(event):
            s = self.streams.get(h.stream_id)
            if s is None:
                continue
            if isinstance(h, HeadersReceived):
                for n, v in h.headers:
                    if n == b":status":
                        if s["status"] is None:
                            s["status"] = int(v)
                    else:
                        s["headers"].append([n.decode(), v.decode()])
            elif isinstance(h, DataReceived):
                s["body"] += h.data
            if h.stream_ended:
                self.finish(s)

    def finish(self, s):
        if not s["done"].done():
            s["ms"] = round((time.monotonic() - s["sent"]) * 1000, 1)
            s["done"].set_result(None)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--sni", default="localhost")
    p.add_argument("--ca")
    p.add_argument("--bind")
    p.add_argument("--spec", default="-")
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--ticket")
    p.add_argument("--hold", type=float, default=0)
    p.add_argument("--linger", type=float, default=0)
    a = p.parse_args()
    spec = json.load(sys.stdin if a.spec == "-" else open(a.spec))
    host, port = a.addr.rsplit(":", 1)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=a.sni)
    tickets = []
    if a.ticket and os.path.exists(a.ticket) and os.path.getsize(a.ticket) > 0:
        with open(a.ticket, "rb") as f:
            config.session_ticket = pickle.load(f)
    if a.ca:
        config.load_verify_locations(a.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    # Our own socket (aioquic's connect binds only "::"): from --bind, so that tests can be
    # different clients (127.0.0.2, 127.0.0.3 ...).
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((a.bind or "127.0.0.1", 0))
    got_ticket = loop.create_future()

    def keep_ticket(ticket):
        tickets.append(ticket)
        if not got_ticket.done():
            got_ticket.set_result(None)

    quic = QuicConnection(configuration=config, session_ticket_handler=keep_ticket)
    _, client = await loop.create_datagram_endpoint(lambda: Client(quic), sock=sock)
    client.connect((host, int(port)))
    authority = f"{a.sni}:{port}"
    waits = []
    for r in [r for r in spec if r.get("early")]:
        waits.append(client.request(r.get("method", "GET"), authority, r.get("path", "/"),
                                    r.get("headers", []), r.get("body", ""), False))
    if a.hold > 0:
        client.hold_until = loop.time() + a.hold
    try:
        await asyncio.wait_for(client.wait_connected(), a.timeout)
    except (asyncio.TimeoutError, ConnectionError) as e:
        print(json.dumps({"connection": "failed", "error": str(e) or type(e).__name__}))
        return
    if True:
        start = time.monotonic()
        for r in [r for r in spec if not r.get("early")]:
            if "after" in r:
                await waits[r["after"]]
                await asyncio.sleep(r.get("at", 0))
            else:
                delay = r.get("at", 0) - (time.monotonic() - start)
                if delay > 0:
                    await asyncio.sleep(delay)
            if "rebind" in r:
                # The client moves to another address: a new socket, the same connection
                # (QUIC migration; the server validates the new path).
                moved = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                moved.bind((r["rebind"], 0))
                await loop.create_datagram_endpoint(lambda: client, sock=moved)
                client._quic.change_connection_id()
                client.transmit()
                await asyncio.sleep(0.3)
            waits.append(client.request(r.get("method", "GET"), authority,
                                        r.get("path", "/"), r.get("headers", []),
                                        r.get("body", ""), r.get("raw", False),
                                        r.get("later"), r.get("reset_at"),
                                        r.get("cancel_at")))
        try:
            await asyncio.wait_for(asyncio.gather(*waits), a.timeout)
        except asyncio.TimeoutError:
            pass
        # Up to --linger seconds more for the server to close the connection.
        lingered = time.monotonic() + a.linger
        while client.closed is None and time.monotonic() < lingered:
            await asyncio.sleep(0.02)
        if a.ticket and client.closed is None:
            try:
                await asyncio.wait_for(asyncio.shield(got_ticket), 2)
            except asyncio.TimeoutError:
                pass
            if tickets:
                with open(a.ticket, "wb") as f:
                    pickle.dump(tickets[-1], f)
        for sid in sorted(client.streams):
            s = client.streams[sid]
            print(json.dumps({"status": s["status"], "headers": s["headers"],
                              "body": s["body"].decode("utf-8", "replace"),
                              "ms": s.get("ms"), "reset": s["reset"]}))
        print(json.dumps({"connection": "closed" if client.closed is not None else "open",
                          "error": client.closed,
                          "retried": quic._retry_source_connection_id is not None,
                          "resumed": bool(client.handshake and client.handshake.session_resumed),
                          "early_data": bool(client.handshake
                                             and client.handshake.early_data_accepted),
                          "ticket_early": tickets[-1].max_early_data_size if tickets else None}))
        client.close()
        await client.wait_closed()


asyncio.run(main())
