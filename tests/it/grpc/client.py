"""The gRPC client of the gRPC tests (tests/it/grpc.rs): runs one named scenario against a
target (the Python server itself, nginx's grpc_pass or sluice's) over h2c and prints one JSON
line of what it saw:

    client.py TARGET SCENARIO ID [KEY=VALUE ...]

TARGET is HOST:PORT; ID prefixes every call's `x-call-id` (the server's log lines carry it);
KEY=VALUE pairs tune the scenario (count, size, ...). Every call sends `:authority` "grpc.test"
(so that nginx and sluice, on different ports, are called alike) and raises gRPC's 4 MiB
message limit to 16 MiB. A scenario that cannot run prints {"error": "..."}.

Each call's result: {"code": "OK" | "UNAVAILABLE" | ..., "details", "initial": [[k, v], ...],
"trailing": [[k, v], ...] (metadata the test sets: x-* keys only; binary values as hex),
"messages", "bytes", "intact" (every message was the pattern the server sends), "ms"}.
"""

import json
import sys
import threading
import time
import traceback

import grpc

SERVICE = "/sluice.test.Echo/"
MAX_MESSAGE = 16 * 1024 * 1024
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.default_authority", "grpc.test"),
    # No retries or hedging of gRPC's own: the test wants each call's first answer.
    ("grpc.enable_retries", 0),
]


def pattern(size, seed=0):
    block = bytes((seed + i) % 251 for i in range(251))
    return (block * (size // 251 + 1))[:size]


def show(md):
    return [[k, v.hex() if isinstance(v, bytes) else v] for k, v in (md or ()) if k.startswith("x-")]


def code_of(status):
    return status.name if status is not None else None


class Calls:
    def __init__(self, target, prefix, params):
        self.channel = grpc.insecure_channel(target, options=OPTIONS)
        self.prefix = prefix
        self.params = params
        self.n = 0
        self.lock = threading.Lock()

    def p(self, key, default):
        return type(default)(self.params.get(key, default))

    def md(self, **extra):
        with self.lock:
            self.n += 1
            n = self.n
        md = [("x-call-id", f"{self.prefix}-{n}")]
        for k, v in extra.items():
            md.append((k.replace("_", "-"), v if isinstance(v, bytes) else str(v)))
        return md

    def method(self, kind, name):
        return getattr(self.channel, kind)(SERVICE + name)


def outcome(start, code, details, initial, trailing, messages=None, **more):
    r = {"code": code, "details": details, "initial": show(initial), "trailing": show(trailing),
         "ms": int((time.monotonic() - start) * 1000)}
    if messages is not None:
        r["messages"] = len(messages)
        r["bytes"] = sum(len(m) for m in messages)
        r["intact"] = all(m == pattern(len(m), i) for i, m in enumerate(messages))
    r.update(more)
    return r


def unary_call(calls, request, timeout=10.0, **md):
    start = time.monotonic()
    f = calls.method("unary_unary", "Unary")
    try:
        reply, call = f.with_call(request, metadata=calls.md(**md), timeout=timeout)
        return outcome(start, call.code().name, call.details(), call.initial_metadata(),
                       call.trailing_metadata(), reply=reply)
    except grpc.RpcError as e:
        return outcome(start, code_of(e.code()), e.details(), e.initial_metadata(),
                       e.trailing_metadata())


def streamed(start, it):
    """Reads a streaming answer to its end: its outcome."""
    messages, first = [], None
    try:
        for m in it:
            if first is None:
                first = int((time.monotonic() - start) * 1000)
            messages.append(m)
        code, details = it.code().name, it.details()
    except grpc.RpcError as e:
        code, details = code_of(e.code()), e.details()
    r = outcome(start, code, details, it.initial_metadata(), it.trailing_metadata(), messages)
    r["first_ms"] = first
    return r


def json_reply(r):
    reply = r.pop("reply", None)
    if reply is not None:
        if reply[:1] == b"{":
            echo = json.loads(reply)
            # The call's id differs from run to run: the rest of the echo is compared whole.
            echo["metadata"] = [kv for kv in echo.get("metadata", []) if kv[0] != "x-call-id"]
            r["reply"] = echo
        else:
            r["reply"] = {"size": len(reply), "intact": reply == pattern(len(reply), 1)}
    return r


# --- scenarios ------------------------------------------------------------------------------

def s_unary(c):
    """One call with metadata (text, repeated, binary) asking for headers and trailers back."""
    r = unary_call(c, pattern(c.p("size", 100)), **{
        "x-user": "alice", "x-multi": "one", "x-blob-bin": b"\x00\x01\xfe\xff",
        "x-set-header-x-answer": "forty-two", "x-set-trailer-x-checksum": "abc123",
        "x-set-trailer-x-trace-bin": b"\xde\xad\xbe\xef"})
    return json_reply(r)


def s_server_stream(c):
    start = time.monotonic()
    f = c.method("unary_stream", "ServerStream")
    it = f(b"go", metadata=c.md(x_count=c.p("count", 5), x_size=c.p("size", 1000),
                                x_gap_ms=c.p("gap", 0), x_set_trailer_x_end="done"), timeout=20)
    return streamed(start, it)


def s_client_stream(c):
    count, size, gap = c.p("count", 5), c.p("size", 1000), c.p("gap", 0)

    def requests():
        for i in range(count):
            if i and gap:
                time.sleep(gap / 1000)
            yield pattern(size, i)

    start = time.monotonic()
    f = c.method("stream_unary", "ClientStream")
    try:
        reply, call = f.with_call(requests(), metadata=c.md(x_set_trailer_x_end="done"), timeout=20)
        return outcome(start, call.code().name, call.details(), call.initial_metadata(),
                       call.trailing_metadata(), reply=json.loads(reply))
    except grpc.RpcError as e:
        return outcome(start, code_of(e.code()), e.details(), e.initial_metadata(), e.trailing_metadata())


def s_bidi(c):
    """Ping-pong: each message is sent only once the previous one came back, so a proxy that
    waits for the whole request (or the whole answer) before passing it on stalls the call."""
    rounds, size = c.p("rounds", 10), c.p("size", 1000)
    turn = threading.Semaphore(1)
    start = time.monotonic()

    def requests():
        for i in range(rounds):
            turn.acquire()
            yield pattern(size, i)

    f = c.method("stream_stream", "Bidi")
    it = f(requests(), metadata=c.md(x_set_trailer_x_end="done"), timeout=c.p("timeout", 20000) / 1000)
    messages = []
    try:
        for m in it:
            messages.append(m)
            turn.release()
        code, details = it.code().name, it.details()
    except grpc.RpcError as e:
        code, details = code_of(e.code()), e.details()
    return outcome(start, code, details, it.initial_metadata(), it.trailing_metadata(), messages)


def s_big(c):
    """4 MB each way in one unary call, then a server stream of two 4 MB messages."""
    size = c.p("size", 4 * 1024 * 1024)
    unary = json_reply(unary_call(c, pattern(size), timeout=30, x_size=size))
    start = time.monotonic()
    it = c.method("unary_stream", "ServerStream")(b"go", metadata=c.md(x_count=2, x_size=size), timeout=30)
    return {"unary": unary, "stream": streamed(start, it)}


def s_many(c):
    """`count` unary calls at once on one channel (so one HTTP/2 connection)."""
    count = c.p("count", 1000)
    f = c.method("unary_unary", "Unary")
    start = time.monotonic()
    # Each call's request is its number: the echo's sha256 tells the answers apart.
    pending = [f.future(str(i).encode(), metadata=c.md(), timeout=30) for i in range(count)]
    codes, ids = {}, set()
    for fut in pending:
        try:
            ids.add(fut.result())
            codes["OK"] = codes.get("OK", 0) + 1
        except grpc.RpcError as e:
            codes[code_of(e.code())] = codes.get(code_of(e.code()), 0) + 1
    return {"codes": codes, "distinct": len(ids), "ms": int((time.monotonic() - start) * 1000)}


def s_cancel(c):
    """A unary call the server holds for 10 s, cancelled by the client after `after` ms; then a
    server stream cancelled after its first message."""
    after = c.p("after", 300) / 1000
    f = c.method("unary_unary", "Unary")
    start = time.monotonic()
    fut = f.future(b"wait", metadata=c.md(x_sleep_ms=10000), timeout=30)
    time.sleep(after)
    fut.cancel()
    try:
        fut.result()
        unary = {"code": "OK"}
    except grpc.FutureCancelledError:
        unary = {"code": "CANCELLED"}
    except grpc.RpcError as e:
        unary = {"code": code_of(e.code())}
    unary["ms"] = int((time.monotonic() - start) * 1000)
    start = time.monotonic()
    it = c.method("unary_stream", "ServerStream")(
        b"go", metadata=c.md(x_count=100, x_size=10, x_gap_ms=100), timeout=30)
    first = next(it)
    it.cancel()
    stream = {"first": len(first), "code": code_of(it.code()), "ms": int((time.monotonic() - start) * 1000)}
    return {"unary": unary, "stream": stream}


def s_deadline(c):
    """A unary call with a deadline of `timeout` ms that the server would answer after 10 s."""
    return unary_call(c, b"wait", timeout=c.p("timeout", 500) / 1000, x_sleep_ms=10000)


def s_fail(c):
    """Failures passed through: before any message (trailers-only) and after three messages."""
    msg = "not found: caf\u00e9 100% \u2603"
    first = unary_call(c, b"x", x_fail_code=5, x_fail_message_bin=msg.encode(),
                       x_set_trailer_x_reason="gone", x_set_trailer_x_detail_bin=b"\x00\xffok")
    start = time.monotonic()
    it = c.method("unary_stream", "ServerStream")(b"go", metadata=c.md(
        x_count=10, x_size=100, x_fail_code=10, x_fail_after=3, x_fail_message="aborted at 3",
        x_set_trailer_x_reason="mid-stream"), timeout=20)
    return {"unary": json_reply(first), "stream": streamed(start, it)}


def s_calls(c):
    """`count` unary calls one after another: each one's code (and the server that answered)."""
    results = []
    for _ in range(c.p("count", 4)):
        r = json_reply(unary_call(c, b"hello", timeout=c.p("timeout", 10000) / 1000))
        results.append({"code": r["code"], "details": r["details"],
                        "server": r.get("reply", {}).get("server")})
    return {"calls": results}


SCENARIOS = {name[2:]: f for name, f in globals().items() if name.startswith("s_")}


def main():
    target, scenario, prefix = sys.argv[1:4]
    params = dict(a.split("=", 1) for a in sys.argv[4:])
    try:
        result = SCENARIOS[scenario](Calls(target, prefix, params))
    except Exception as e:  # noqa: BLE001 — reported to the test, which fails on it
        result = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
