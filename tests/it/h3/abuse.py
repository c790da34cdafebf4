"""An HTTP/3 client that misbehaves on purpose, for sluice's flood and protocol-error tests, on
aioquic's low-level QUIC and HTTP/3 objects (frames and QPACK instructions encoded here).

Usage: abuse.py HOST:PORT KIND [--count N] [--sni NAME] [--ca FILE] [--bind IP] [--path P]

Each run opens one QUIC connection, asks for GET / (answered: the connection works), then does
KIND N times (or once), and waits for the server to close the connection. KIND is one of:
  rapid_reset       N request streams (GET PATH, no end), each reset at once (H3_REQUEST_CANCELLED)
  empty_data        a POST to PATH announcing 1 MB, then N DATA frames without payload
  small_data        a POST to PATH announcing N bytes, sent as N DATA frames of one byte
  unknown_request   a POST to PATH announcing 1 MB, then N reserved frames (0x21, empty)
  unknown_control   N reserved frames (0x21, empty) on the control stream
  priority_update   N PRIORITY_UPDATE frames (0xf0700) on the control stream
  max_push_id       N MAX_PUSH_ID frames (the same id) on the control stream
  uni_streams       N unidirectional streams of reserved types (0x21 + 0x1f * i), each ended
                    at once (the client opens no QPACK streams, which RFC 9204 allows)
  encoder_noop      N "Set Dynamic Table Capacity 0" instructions on the QPACK encoder stream
  stream_cancel     N "Stream Cancellation" instructions on the QPACK decoder stream
  second_settings   a second SETTINGS frame on the control stream
  data_on_control   a DATA frame on the control stream
  headers_on_control  a HEADERS frame on the control stream
  close_control     the control stream ended (FIN)
  reset_control     the control stream reset
  encoder_insert    an "Insert With Literal Name" instruction on the QPACK encoder stream
  encoder_capacity  "Set Dynamic Table Capacity 100" (sluice allows 0)
  close_encoder     the QPACK encoder stream ended (FIN)
  decoder_ack       a "Section Acknowledgment" on the QPACK decoder stream
  decoder_increment an "Insert Count Increment" of 1 on the QPACK decoder stream
  dynamic_ref       a request whose header block refers to the dynamic table
  none              nothing more (the connection is closed by the client after 0.5 s)
A polite kind, which must never be cut:
  data_64           a POST to PATH whose body is N DATA frames of 64 bytes each
  empty_between     a POST to PATH of "abc", an empty DATA frame, "def" (RFC 9114 allows it)
Prints one JSON line: {"first": status of GET /, "sent": what was handed to QUIC before the
close was seen, "connection": "closed" | "open", "error": the close's error code or null,
"reason": its reason phrase, "stream_error": whether the server reset the stream the abuse was
on, "answer": the status of the request KIND made (if it made one and it was answered), "ms":
from the start of KIND to the close}.
"""

import argparse
import asyncio
import json
import socket
import ssl
import time

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, H3Connection, StreamType, encode_frame
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated

RESERVED = 0x21
PRIORITY_UPDATE = 0xF0700
H3_REQUEST_CANCELLED = 0x10C


def qpack_int(first_bits, prefix, value):
    """An RFC 7541 integer with an N-bit prefix, the bits above the prefix in first_bits."""
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([first_bits | value])
    out = [first_bits | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class NoQpackStreams(H3Connection):
    """An HTTP/3 connection that opens its control stream only (no QPACK encoder or decoder
    stream, as RFC 9204 section 4.2 allows a peer whose table is 0)."""

    def __init__(self, quic):
        super().__init__(quic)

    def _init_connection(self):
        self._max_table_capacity = 0
        self._blocked_streams = 0
        import pylsqpack

        self._decoder = pylsqpack.Decoder(0, 0)
        self._local_control_stream_id = self._create_uni_stream(StreamType.CONTROL)
        self._sent_settings = self._get_local_settings()
        self._quic.send_stream_data(
            self._local_control_stream_id,
            encode_frame(0x4, b"".join(encode_uint_var(k) + encode_uint_var(v)
                                      for k, v in self._sent_settings.items())),
        )

    def _encode_headers(self, stream_id, headers):
        _, frame_data = self._encoder.encode(stream_id, headers)
        return frame_data

    def _handle_control_frame(self, frame_type, frame_data):
        if frame_type == 0x4:
            self._received_settings = {}
            self._settings_received = True
            return
        super()._handle_control_frame(frame_type, frame_data)

    def _decode_headers(self, stream_id, frame_data):
        _, headers = self._decoder.feed_header(stream_id, frame_data)
        return headers


class Client(QuicConnectionProtocol):
    def __init__(self, *args, bare=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = NoQpackStreams(self._quic) if bare else H3Connection(self._quic)
        self.answers = {}
        self.closed = None
        self.closed_at = None
        self.abuse_stream = None

    def get(self, authority, path):
        sid = self._quic.get_next_available_stream_id()
        self.http.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                     (b":authority", authority.encode()),
                                     (b":path", path.encode())], end_stream=True)
        self.answers[sid] = {"status": None, "done": self._loop.create_future()}
        self.transmit()
        return self.answers[sid]["done"]

    def expect(self, sid):
        """The answer to stream `sid` is awaited and reported."""
        self.answers[sid] = {"status": None, "done": self._loop.create_future()}
        self.abuse_stream = sid

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.closed = event
            self.closed_at = time.monotonic()
            for a in self.answers.values():
                if not a["done"].done():
                    a["done"].set_result(None)
        for h in self.http.handle_event(event):
            a = self.answers.get(h.stream_id)
            if a is None:
                continue
            if isinstance(h, HeadersReceived):
                for n, v in h.headers:
                    if n == b":status" and a["status"] is None:
                        a["status"] = int(v)
            if getattr(h, "stream_ended", False) and not a["done"].done():
                a["done"].set_result(None)


def request_head(http, sid, authority, method, path, extra=()):
    """A request's HEADERS frame, sent without ending the stream."""
    fields = [(b":method", method.encode()), (b":scheme", b"https"),
              (b":authority", authority.encode()), (b":path", path.encode())]
    fields += [(n.encode(), v.encode()) for n, v in extra]
    http.send_headers(sid, fields, end_stream=False)


def steps(kind, c, authority, path, n):
    """The abuse as a list of callables, each sending one unit of it; or one callable."""
    quic, http = c._quic, c.http
    control = http._local_control_stream_id

    def on_control(frame):
        return [lambda: quic.send_stream_data(control, frame)] * n

    def upload(length):
        sid = quic.get_next_available_stream_id()
        request_head(http, sid, authority, "POST", path, [("content-length", str(length))])
        return sid

    if kind == "rapid_reset":
        def one():
            sid = quic.get_next_available_stream_id()
            request_head(http, sid, authority, "GET", path)
            quic.reset_stream(sid, H3_REQUEST_CANCELLED)
            quic.stop_stream(sid, H3_REQUEST_CANCELLED)
        return [one] * n
    if kind == "empty_data":
        sid = upload(1_000_000)
        return [lambda: quic.send_stream_data(sid, encode_frame(0x0, b""))] * n
    if kind == "data_64":
        sid = upload(64 * n)
        c.expect(sid)
        return [lambda i=i: quic.send_stream_data(sid, encode_frame(0x0, b"y" * 64), end_stream=i == n - 1)
                for i in range(n)]
    if kind == "empty_between":
        sid = upload(6)
        c.expect(sid)
        return [lambda: quic.send_stream_data(sid, encode_frame(0x0, b"abc")),
                lambda: quic.send_stream_data(sid, encode_frame(0x0, b"")),
                lambda: quic.send_stream_data(sid, encode_frame(0x0, b"def"), end_stream=True)]
    if kind == "small_data":
        sid = upload(n)
        return [lambda i=i: quic.send_stream_data(sid, encode_frame(0x0, b"x"), end_stream=i == n - 1)
                for i in range(n)]
    if kind == "unknown_request":
        sid = upload(1_000_000)
        return [lambda: quic.send_stream_data(sid, encode_frame(RESERVED, b""))] * n
    if kind == "unknown_control":
        return on_control(encode_frame(RESERVED, b""))
    if kind == "priority_update":
        return on_control(encode_frame(PRIORITY_UPDATE, encode_uint_var(0) + b"u=1"))
    if kind == "max_push_id":
        return on_control(encode_frame(0xD, encode_uint_var(8)))
    if kind == "uni_streams":
        def uni(i):
            sid = quic.get_next_available_stream_id(is_unidirectional=True)
            quic.send_stream_data(sid, encode_uint_var(RESERVED + 0x1F * i), end_stream=True)
        return [lambda i=i: uni(i) for i in range(n)]
    if kind == "encoder_noop":
        enc = http._local_encoder_stream_id
        return [lambda: quic.send_stream_data(enc, b"\x20")] * n
    if kind == "stream_cancel":
        dec = http._local_decoder_stream_id
        return [lambda: quic.send_stream_data(dec, qpack_int(0x40, 6, 0))] * n
    once = {
        "second_settings": lambda: quic.send_stream_data(control, encode_frame(0x4, b"")),
        "data_on_control": lambda: quic.send_stream_data(control, encode_frame(0x0, b"abc")),
        "headers_on_control": lambda: quic.send_stream_data(control, encode_frame(0x1, b"\x00\x00")),
        "close_control": lambda: quic.send_stream_data(control, b"", end_stream=True),
        "reset_control": lambda: quic.reset_stream(control, 0x100),
        # Insert With Literal Name: 01 H=0 name length 1 "a", value length 1 "b".
        "encoder_insert": lambda: quic.send_stream_data(
            http._local_encoder_stream_id, qpack_int(0x40, 5, 1) + b"a" + qpack_int(0, 7, 1) + b"b"),
        "encoder_capacity": lambda: quic.send_stream_data(
            http._local_encoder_stream_id, qpack_int(0x20, 5, 100)),
        "close_encoder": lambda: quic.send_stream_data(
            http._local_encoder_stream_id, b"", end_stream=True),
        "decoder_ack": lambda: quic.send_stream_data(
            http._local_decoder_stream_id, qpack_int(0x80, 7, 0)),
        "decoder_increment": lambda: quic.send_stream_data(
            http._local_decoder_stream_id, qpack_int(0x00, 6, 1)),
        # Required Insert Count 1 (encoded 2), base 0, then an indexed field of the dynamic table.
        "dynamic_ref": lambda: quic.send_stream_data(
            quic.get_next_available_stream_id(), encode_frame(0x1, b"\x02\x00\x80"), end_stream=True),
        "none": lambda: None,
    }
    return [once[kind]]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("kind")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--sni", default="localhost")
    p.add_argument("--ca")
    p.add_argument("--bind")
    p.add_argument("--path", default="/")
    p.add_argument("--timeout", type=float, default=8)
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=a.sni)
    if a.ca:
        config.load_verify_locations(a.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((a.bind or "127.0.0.1", 0))
    quic = QuicConnection(configuration=config)
    bare = a.kind == "uni_streams"
    _, c = await loop.create_datagram_endpoint(lambda: Client(quic, bare=bare), sock=sock)
    c.connect((host, int(port)))
    await asyncio.wait_for(c.wait_connected(), a.timeout)
    authority = f"{a.sni}:{port}"
    first = c.get(authority, "/")
    await asyncio.wait_for(first, a.timeout)
    first_status = next(iter(c.answers.values()))["status"]

    start = time.monotonic()
    sent = 0
    stream_error = False
    for step in steps(a.kind, c, authority, a.path, a.count):
        if c.closed is not None:
            break
        try:
            step()
        except RuntimeError:
            # The server reset or stopped the stream the abuse was on.
            stream_error = True
            break
        sent += 1
        if sent % 50 == 0:
            c.transmit()
            # Let the server's close (and its flow-control credit) in.
            await asyncio.sleep(0.001)
    c.transmit()
    deadline = start + a.timeout
    wait_for = 0.5 if a.kind == "none" else a.timeout
    answered = c.answers[c.abuse_stream]["done"] if c.abuse_stream is not None else None
    while c.closed is None and time.monotonic() < min(deadline, start + wait_for):
        if answered is not None and answered.done():
            break
        await asyncio.sleep(0.01)
        c.transmit()
    closed = c.closed
    print(json.dumps({
        "first": first_status,
        "sent": sent,
        "connection": "closed" if closed is not None else "open",
        "error": closed.error_code if closed is not None else None,
        "reason": closed.reason_phrase if closed is not None else None,
        "stream_error": stream_error,
        "answer": c.answers[c.abuse_stream]["status"] if c.abuse_stream is not None else None,
        "ms": round(((c.closed_at or time.monotonic()) - start) * 1000, 1),
    }))
    c.close()
    try:
        await asyncio.wait_for(c.wait_closed(), 1)
    except asyncio.TimeoutError:
        pass


asyncio.run(main())
