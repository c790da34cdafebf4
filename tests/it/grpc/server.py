"""The gRPC upstream of the gRPC tests (tests/it/grpc.rs): Debian's python3-grpcio, no protoc.

One process serves several named servers, each on its own port, plain or TLS:

    server.py --plain a=PORT [--plain b=PORT] [--tls s=PORT --cert CHAIN --key KEY]

Service `sluice.test.Echo`, raw bytes in and out (generic handlers, identity (de)serializers):
  Unary         one message in, one out: by default a JSON echo of what the call carried
                ({"server", "authority", "metadata", "size", "sha256"}), or `x-size` bytes;
  ServerStream  one message in, `x-count` messages of `x-size` bytes out (`x-gap-ms` apart);
  ClientStream  messages in, one JSON message out: {"count", "bytes", "sha256"};
  Bidi          each message in is answered by a message of the same bytes.

What the caller asks for, by metadata:
  x-call-id               names the call in the log line below;
  x-sleep-ms              waits this long before answering (Unary and ClientStream: after
                          reading the request), watching for a cancellation;
  x-gap-ms                waits this long between streamed messages;
  x-fail-code             fails the call with this status code (after `x-fail-after`
                          messages, default 0) and `x-fail-message` (or UTF-8 in `x-fail-message-bin`) as its message;
  x-set-header-NAME       sends NAME with this value as initial metadata;
  x-set-trailer-NAME      sends NAME with this value as trailing metadata (with a failure too).

Every call ends in one JSON line on stdout, written before its last message or status leaves:
  {"id", "server", "method", "authority", "peer", "metadata": [[key, value], ...] (binary
   values as hex), "deadline_ms" (the time left by the call's grpc-timeout, or null),
   "received": {"count", "bytes", "sha256", "at_ms": when the first 20 messages came, in ms
   from the call's start}, "sent": {"count", "bytes"},
   "outcome": "ok" | "failed" | "cancelled", "elapsed_ms"}
"""

import argparse
import hashlib
import json
import sys
import threading
import time
from concurrent import futures

import grpc

SERVICE = "sluice.test.Echo"
# 4 MB messages and more: both ends of the tests raise gRPC's default 4 MiB receive limit.
MAX_MESSAGE = 16 * 1024 * 1024
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
    # The harness reserves each port with a bound socket (SO_REUSEADDR, not listening);
    # SO_REUSEPORT would let a second server share a port by mistake.
    ("grpc.so_reuseport", 0),
]
LOG = threading.Lock()


def pattern(size, seed=0):
    """`size` bytes of a pattern the client can check."""
    block = bytes((seed + i) % 251 for i in range(251))
    return (block * (size // 251 + 1))[:size]


def show(value):
    return value.hex() if isinstance(value, bytes) else value


class Call:
    """One call's view of its metadata, and its log line."""

    def __init__(self, server, method, ctx):
        self.server = server
        self.method = method
        self.ctx = ctx
        self.start = time.monotonic()
        self.md = list(ctx.invocation_metadata())
        self.received = {"count": 0, "bytes": 0, "at_ms": []}
        self.sha = hashlib.sha256()
        self.sent = {"count": 0, "bytes": 0}
        self.outcome = "ok"
        self.logged = False
        remaining = ctx.time_remaining()
        self.deadline_ms = None if remaining is None else int(remaining * 1000)

    def get(self, key, default=None):
        for k, v in self.md:
            if k == key:
                return v
        return default

    def number(self, key, default=0):
        return int(self.get(key, default))

    def prefixed(self, prefix):
        return [(k[len(prefix):], v) for k, v in self.md if k.startswith(prefix)]

    def authority(self):
        # grpcio keeps the :authority out of invocation_metadata; its call details have it.
        try:
            host = self.ctx._rpc_event.call_details.host
            return host.decode("latin-1") if isinstance(host, bytes) else host
        except AttributeError:
            return None

    def took(self, message):
        self.received["count"] += 1
        self.received["bytes"] += len(message)
        if len(self.received["at_ms"]) < 20:
            self.received["at_ms"].append(int((time.monotonic() - self.start) * 1000))
        self.sha.update(message)

    def gave(self, message):
        self.sent["count"] += 1
        self.sent["bytes"] += len(message)
        return message

    def echo(self):
        return json.dumps({
            "server": self.server,
            "authority": self.authority(),
            "metadata": [[k, show(v)] for k, v in self.md],
            "size": self.received["bytes"],
            "sha256": self.sha.hexdigest(),
        }).encode()

    def wait(self, ms):
        """Sleeps `ms`, watching for the call's end: False when it was cancelled."""
        end = time.monotonic() + ms / 1000
        while time.monotonic() < end:
            if not self.ctx.is_active():
                return False
            time.sleep(min(0.005, max(0, end - time.monotonic())))
        return self.ctx.is_active()

    def log(self):
        if self.logged:
            return
        self.logged = True
        line = json.dumps({
            "id": self.get("x-call-id"),
            "server": self.server,
            "method": self.method,
            "authority": self.authority(),
            "peer": self.ctx.peer(),
            "metadata": [[k, show(v)] for k, v in self.md],
            "deadline_ms": self.deadline_ms,
            "received": dict(self.received, sha256=self.sha.hexdigest()),
            "sent": self.sent,
            "outcome": self.outcome,
            "elapsed_ms": int((time.monotonic() - self.start) * 1000),
        })
        with LOG:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def headers(self):
        md = self.prefixed("x-set-header-")
        if md:
            self.ctx.send_initial_metadata(md)
        trailers = self.prefixed("x-set-trailer-")
        if trailers:
            self.ctx.set_trailing_metadata(trailers)

    def cancelled(self):
        self.outcome = "cancelled"
        self.log()

    def fail_now(self, sent):
        """Fails the call (logging first) if `x-fail-code` asks for it after `sent` messages."""
        code = self.get("x-fail-code")
        if code is None or sent != self.number("x-fail-after"):
            return
        self.outcome = "failed"
        self.log()
        status = next(s for s in grpc.StatusCode if s.value[0] == int(code))
        message = self.get("x-fail-message-bin")
        message = message.decode() if message is not None else self.get("x-fail-message", "")
        self.ctx.abort(status, message)


def handler(server, method, body):
    """`body(call, ...)` with the call's log line written on every way out."""

    def run(request, ctx):
        call = Call(server, method, ctx)
        try:
            call.headers()
            result = body(call, request)
            if not ctx.is_active():
                call.outcome = "cancelled"
            return result
        except Exception:
            if call.outcome == "ok":
                call.outcome = "cancelled" if not ctx.is_active() else "error"
            raise
        finally:
            call.log()

    def streaming(request, ctx):
        call = Call(server, method, ctx)
        try:
            call.headers()
            yield from body(call, request)
            if not ctx.is_active():
                call.outcome = "cancelled"
        except GeneratorExit:
            call.outcome = "cancelled"
            raise
        except Exception:
            if call.outcome == "ok":
                call.outcome = "cancelled" if not ctx.is_active() else "error"
            raise
        finally:
            call.log()

    return run, streaming


def unary(call, request):
    call.took(request)
    if not call.wait(call.number("x-sleep-ms")):
        call.cancelled()
        return b""
    call.fail_now(0)
    size = call.get("x-size")
    reply = call.echo() if size is None else pattern(int(size), 1)
    call.outcome = "ok"
    call.log()
    return call.gave(reply)


def server_stream(call, request):
    call.took(request)
    if not call.wait(call.number("x-sleep-ms")):
        call.cancelled()
        return
    count, size, gap = call.number("x-count", 1), call.number("x-size", 1), call.number("x-gap-ms")
    for i in range(count):
        call.fail_now(i)
        if i > 0 and not call.wait(gap):
            call.cancelled()
            return
        if i == count - 1:
            call.log()
        yield call.gave(pattern(size, i))
    call.fail_now(count)


def client_stream(call, requests):
    for message in requests:
        call.took(message)
    if not call.wait(call.number("x-sleep-ms")):
        call.cancelled()
        return b""
    call.fail_now(0)
    reply = json.dumps({"count": call.received["count"], "bytes": call.received["bytes"],
                        "sha256": call.sha.hexdigest()}).encode()
    call.log()
    return call.gave(reply)


def bidi(call, requests):
    for i, message in enumerate(requests):
        call.took(message)
        call.fail_now(i)
        yield call.gave(message)
    call.fail_now(call.received["count"])
    call.log()


class Echo(grpc.GenericRpcHandler):
    def __init__(self, name):
        self.name = name

    def service(self, details):
        service, _, method = details.method.lstrip("/").partition("/")
        if service != SERVICE:
            return None
        if method == "Unary":
            run, _ = handler(self.name, method, unary)
            return grpc.unary_unary_rpc_method_handler(run)
        if method == "ServerStream":
            _, streaming = handler(self.name, method, server_stream)
            return grpc.unary_stream_rpc_method_handler(streaming)
        if method == "ClientStream":
            run, _ = handler(self.name, method, client_stream)
            return grpc.stream_unary_rpc_method_handler(run)
        if method == "Bidi":
            _, streaming = handler(self.name, method, bidi)
            return grpc.stream_stream_rpc_method_handler(streaming)
        return None


def named(spec):
    name, _, port = spec.partition("=")
    return name, int(port)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plain", action="append", default=[], type=named)
    p.add_argument("--tls", action="append", default=[], type=named)
    p.add_argument("--cert")
    p.add_argument("--key")
    args = p.parse_args()
    servers = []
    for (name, port), tls in [(s, False) for s in args.plain] + [(s, True) for s in args.tls]:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), options=OPTIONS)
        server.add_generic_rpc_handlers((Echo(name),))
        address = f"127.0.0.1:{port}"
        if tls:
            with open(args.key, "rb") as k, open(args.cert, "rb") as c:
                creds = grpc.ssl_server_credentials([(k.read(), c.read())])
            bound = server.add_secure_port(address, creds)
        else:
            bound = server.add_insecure_port(address)
        if bound != port:
            # The one line the harness reads as "port taken": try again on others.
            sys.stderr.write(f"{address}: Address already in use\n")
            sys.exit(1)
        server.start()
        servers.append(server)
    for server in servers:
        server.wait_for_termination()


if __name__ == "__main__":
    main()
