"""The gRPC client of tests/it/grpc_hostile.rs (/usr/bin/python3, python3-grpcio): calls
through a proxy whose upstream is tests/it/grpc_hostile/upstream.py and prints one JSON line
per SPEC of what it saw:

    client.py TARGET SPEC [SPEC ...]

SPECs:
- CASE: one unary call to /hostile.H/CASE ({"case", "code", "details", "ms", "reply",
  "trailing"});
- many:N:PATH: N unary calls to PATH at once, over the one channel;
- upload:N:MIB:PATH: N client-streaming calls to PATH at once, each sending MIB MiB in
  messages of 64 KiB (as fast as flow control lets them);
- rounds:R:CASE,CASE...: the CASEs one after the other, R times.
The multi-call SPECs print {"case", "codes": {CODE: count}, "max_ms"}.

Every call has a deadline of DEADLINE seconds: a call that meets it (code DEADLINE_EXCEEDED,
details "Deadline Exceeded", ms >= DEADLINE) is a hang, and the test says so.
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

DEADLINE = 8.0
OPTIONS = [
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
]


def ident(b):
    return b


def one(channel, path, payload=b"hi"):
    call = channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)
    start = time.monotonic()
    try:
        reply, info = call.with_call(payload, timeout=DEADLINE)
        code, details, trailing = "OK", info.details(), info.trailing_metadata()
        reply = "%s (%d bytes)" % (reply[:8].decode("latin-1"), len(reply))
    except grpc.RpcError as e:
        code, details, trailing, reply = e.code().name, e.details(), e.trailing_metadata(), None
    ms = int((time.monotonic() - start) * 1000)
    trailing = [[k, v if isinstance(v, str) else v.hex()] for k, v in (trailing or ())]
    return {"code": code, "details": details, "ms": ms, "reply": reply, "trailing": trailing}


def upload(channel, path, mib):
    call = channel.stream_unary(path, request_serializer=ident, response_deserializer=ident)
    chunk = b"u" * 65536
    start = time.monotonic()
    try:
        call(iter([chunk] * (mib * 16)), timeout=DEADLINE)
        code = "OK"
    except grpc.RpcError as e:
        code = e.code().name
    return {"code": code, "ms": int((time.monotonic() - start) * 1000)}


def summary(case, results):
    codes = {}
    for r in results:
        codes[r["code"]] = codes.get(r["code"], 0) + 1
    return {"case": case, "codes": codes, "max_ms": max((r["ms"] for r in results), default=0)}


def run(channel, spec):
    parts = spec.split(":")
    if parts[0] == "many":
        n, path = int(parts[1]), parts[2]
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(lambda _: one(channel, path), range(n)))
        return summary(spec, results)
    if parts[0] == "upload":
        n, mib, path = int(parts[1]), int(parts[2]), parts[3]
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(lambda _: upload(channel, path, mib), range(n)))
        return summary(spec, results)
    if parts[0] == "rounds":
        r, cases = int(parts[1]), parts[2].split(",")
        results = [one(channel, "/hostile.H/" + c) for _ in range(r) for c in cases]
        return summary(spec, results)
    return dict(case=spec, **one(channel, "/hostile.H/" + spec))


def main():
    target, specs = sys.argv[1], sys.argv[2:]
    with grpc.insecure_channel(target, options=OPTIONS) as channel:
        for spec in specs:
            print(json.dumps(run(channel, spec)), flush=True)


if __name__ == "__main__":
    main()
