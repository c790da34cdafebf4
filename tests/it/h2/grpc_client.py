"""Unary gRPC calls with a real gRPC stack (Debian's python3-grpcio) against one server,
reported as JSON lines: per call, the code's name, the details, the trailing metadata and the
time it took. No protobuf: the method takes and returns raw bytes.

usage: grpc_client.py HOST:PORT METHOD [plain|retry] ...

`plain` is one call; `retry` is one call on a channel whose service config retries
RESOURCE_EXHAUSTED up to twice (gRFC A6: the client waits `grpc-retry-pushback-ms` before
each). grpcio's timer may fire a few milliseconds early; its second retry then waits out the
rest of the pushback.
"""

import json
import sys
import time

import grpc

RETRY = json.dumps({
    "methodConfig": [{
        "name": [{}],
        "retryPolicy": {
            "maxAttempts": 3,
            "initialBackoff": "0.01s",
            "maxBackoff": "0.01s",
            "backoffMultiplier": 1,
            "retryableStatusCodes": ["RESOURCE_EXHAUSTED"],
        },
    }]
})


def one(target, method, kind):
    options = [("grpc.enable_retries", 1)]
    if kind == "retry":
        options.append(("grpc.service_config", RETRY))
    with grpc.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(method)
        start = time.monotonic()
        try:
            call(b"", timeout=10)
            code, details, trailing = "OK", "", []
        except grpc.RpcError as e:
            code, details = e.code().name, e.details()
            trailing = [list(kv) for kv in (e.trailing_metadata() or [])]
        ms = int((time.monotonic() - start) * 1000)
    print(json.dumps({"code": code, "details": details, "trailing": trailing, "ms": ms}),
          flush=True)


def main():
    target, method = sys.argv[1], sys.argv[2]
    for kind in sys.argv[3:]:
        one(target, method, kind)


main()
