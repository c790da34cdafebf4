"""What the HTTP/2 clients of tests/it/h2 (conformance.py, flood.py) share: frames written and
read on a plain socket, with nothing of HTTP/2's state, so that anything can be sent."""

import socket
import struct
import time


def frame(kind, flags, stream, payload=b""):
    """One frame: its 9-byte head (RFC 9113 §4.1) and `payload`."""
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def take_frame(buf):
    """The first whole frame in `buf` (a bytearray) as (kind, flags, stream, payload), removed
    from it; None while it is not whole."""
    if len(buf) < 9:
        return None
    length = int.from_bytes(buf[0:3], "big")
    if len(buf) < 9 + length:
        return None
    kind, flags = buf[3], buf[4]
    stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
    payload = bytes(buf[9:9 + length])
    del buf[:9 + length]
    return kind, flags, stream, payload


class FrameReader:
    """Reads frames from `self.sock` into `self.buf`; `self.closed` once the server closed."""

    RECV = 64 * 1024

    def next_frame(self, deadline):
        """The next frame, blocking until `deadline` (time.monotonic()); None on the close or at
        the deadline."""
        while True:
            got = take_frame(self.buf)
            if got is not None:
                return got
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(self.RECV)
            except socket.timeout:
                return None
            except OSError:
                self.closed = True
                return None
            if not chunk:
                self.closed = True
                return None
            self.buf += chunk
