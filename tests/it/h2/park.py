"""A real HTTP/2 client (python3-h2, the library httpx uses) coming back to a parked connection.

    /usr/bin/python3 park.py SCENARIO PORT ADMIN_PORT

Opens one h2c connection (prior knowledge) and keeps it for the whole scenario. Before each
request after the first it waits until the server's `sluice_http2_parked` gauge (its admin
listener's /metrics) says the connection is parked, so that every request wakes it. Requests
repeat the same header fields (`x-reused`, the user agent, the authority), which the client's
HPACK encoder puts in its dynamic table: later requests refer to entries made before a park, and
the server's fresh encoder writes responses to a decoder that still holds older entries. The
library checks the server's every frame against what it allowed (flow control, frame sizes, its
table size) and fails on any breach. Prints `ok PARKS` and exits 0, or exits with the failure.

SCENARIOs:
- small: the client's connection window stays the initial 65 535 (it gives back what it reads,
  the library's way): the server meets a client window below a fresh connection's. POSTs of
  1.5 MB (above the server's 1 MB connection window) echoed back by the upstream (/echo), and
  GETs answered by the server itself (/local);
- large: the same after raising its connection window by 2**24, as browsers and curl do;
- settings: the client asks for stream windows of 1000 bytes, frames of at most 16 384 and no
  dynamic table for the server's encoder (SETTINGS_HEADER_TABLE_SIZE 0), then GETs whose heads
  the upstream echoes (/head, about 6 KB) need several windows each: a server that forgot these settings after a park
  breaks one of them.
"""

import socket
import sys
import time
import urllib.request

import h2.config
import h2.connection
import h2.events
import h2.settings


def gauge(admin):
    url = f"http://127.0.0.1:{admin}/metrics"
    for line in urllib.request.urlopen(url, timeout=2).read().decode().splitlines():
        if line.startswith("sluice_http2_parked "):
            return int(float(line.split()[1]))
    sys.exit("no sluice_http2_parked in /metrics")


def wait_parked(admin):
    deadline = time.monotonic() + 5
    while gauge(admin) != 1:
        if time.monotonic() > deadline:
            sys.exit("the connection was not parked within 5 s")
        time.sleep(0.02)


class Client:
    def __init__(self, port, settings=None, window=0):
        self.sock = socket.create_connection(("127.0.0.1", port))
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        if window:
            self.conn.increment_flow_control_window(window)
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, body=b"", pad=0):
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":path", path), (":scheme", "http"),
                  (":authority", "park.test"), ("user-agent", "park.py"),
                  ("x-reused", "the same value every time")]
        if pad:
            fields.append(("x-pad", "p" * pad))
        if body:
            fields.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, fields, end_stream=not body)
        sent, status, got, done = 0, None, bytearray(), False
        while not done:
            while sent < len(body):
                room = min(self.conn.local_flow_control_window(sid),
                           self.conn.max_outbound_frame_size, len(body) - sent)
                if room <= 0:
                    break
                self.conn.send_data(sid, body[sent:sent + room],
                                    end_stream=sent + room == len(body))
                sent += room
            self.flush()
            data = self.sock.recv(65536)
            if not data:
                sys.exit(f"the server closed the connection during stream {sid}")
            for e in self.conn.receive_data(data):
                if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                    status = int(dict(e.headers)[b":status"])
                elif isinstance(e, h2.events.DataReceived):
                    got += e.data
                    self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
                    done = True
                elif isinstance(e, h2.events.StreamReset):
                    sys.exit(f"stream {e.stream_id} reset ({e.error_code!r})")
                elif isinstance(e, h2.events.ConnectionTerminated):
                    sys.exit(f"GOAWAY {e.error_code!r}")
            self.flush()
        return status, bytes(got)


def expect(what, status, got, want_status, want_body=None):
    if status != want_status or (want_body is not None and got != want_body):
        sys.exit(f"{what}: status {status}, {len(got)} bytes back")


def main():
    scenario, port, admin = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    parks = 0
    if scenario in ("small", "large"):
        c = Client(port, window=2**24 if scenario == "large" else 0)
        expect("the first GET", *c.request("GET", "/echo"), 200)
        for i in range(3):
            wait_parked(admin)
            parks += 1
            body = bytes((i + j) % 251 for j in range(1_500_000))
            expect(f"POST {i}", *c.request("POST", "/echo", body), 200, body)
            wait_parked(admin)
            parks += 1
            expect(f"GET {i}", *c.request("GET", "/local"), 200, b"ok\n")
    elif scenario == "settings":
        c = Client(port, settings={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1000,
            h2.settings.SettingCodes.MAX_FRAME_SIZE: 16384,
            h2.settings.SettingCodes.HEADER_TABLE_SIZE: 0,
        })
        expect("the first GET", *c.request("GET", "/head", pad=6000), 200)
        for i in range(3):
            wait_parked(admin)
            parks += 1
            status, got = c.request("GET", "/head", pad=6000)
            expect(f"GET {i}", status, got, 200)
            if b"p" * 6000 not in got:
                sys.exit(f"GET {i}: the echoed head lacks x-pad ({len(got)} bytes)")
    else:
        sys.exit(f"unknown scenario {scenario}")
    print(f"ok {parks}")


main()
