#!/usr/bin/python3
"""grpc-bench.py — the gRPC upstream and client of scripts/bench.sh (--only grpc) and
scripts/grpc-instructions.sh: python3-grpcio (Debian's, hence /usr/bin/python3), raw bytes, no protobuf.

serve PORT         the upstream, grpcio's asyncio server on 127.0.0.1:PORT:
                     /b.B/U     unary: a 100-byte answer to any request; counts the calls
                     /b.B/N     unary: how many U calls so far, in decimal
                     /b.B/Hold  server-streaming: one message, then the call held open until the
                                client ends it
check PORT         one unary call /b.B/U through PORT: it must end OK with the upstream's answer
count PORT         the upstream's count of unary calls (PORT: the upstream itself)
hold PORT N PIDS…  N server-streaming calls held open through PORT, 100 per connection (nginx's
                   http2_max_concurrent_streams is 128), each one's first message read, 2 s idle;
                   prints the growth of the PIDS' resident memory per call: for the first N (all
                   at once: the peak), then for N more while those stay open."""
import asyncio
import sys
import time

import grpc

REPLY = b"r" * 100


def serve(port):
    calls = 0

    async def unary(req, ctx):
        nonlocal calls
        calls += 1
        return REPLY

    async def count(req, ctx):
        return str(calls).encode()

    async def hold(req, ctx):
        yield b"held"
        await asyncio.Event().wait()

    async def main():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("b.B", {
            "U": grpc.unary_unary_rpc_method_handler(unary),
            "N": grpc.unary_unary_rpc_method_handler(count),
            "Hold": grpc.unary_stream_rpc_method_handler(hold),
        }),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    asyncio.run(main())


def channel(port):
    # each channel its own connection, not one subchannel shared by all
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=(("grpc.use_local_subchannel_pool", 1),))


def rss_kib(pids):
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return total


def batch(port, n, pids):
    before = rss_kib(pids)
    chans = [channel(port) for _ in range((n + 99) // 100)]
    calls = [chans[i % len(chans)].unary_stream("/b.B/Hold")(b"") for i in range(n)]
    for c in calls:
        if next(c) != b"held":
            sys.exit(f"port {port}: a held call's first message is not the upstream's")
    time.sleep(2)
    return chans, calls, (rss_kib(pids) - before) * 1024 / n


def hold(port, n, pids):
    # Settle first: 100 calls held 2 s, then ended, so that memory the unary runs left cached,
    # given back once calls end, is not read as negative growth.
    chans, calls, _ = batch(port, 100, pids)
    for c in calls:
        c.cancel()
    for ch in chans:
        ch.close()
    time.sleep(1)
    first = batch(port, n, pids)
    second = batch(port, n, pids)
    for c in first[1] + second[1]:
        if not c.is_active():
            sys.exit(f"port {port}: a held call ended early: {c.code()}")
    print(f"{first[2]:.0f} {second[2]:.0f}")


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "serve":
        serve(port)
    elif mode == "check":
        reply, call = channel(port).unary_unary("/b.B/U").with_call(b"q" * 100, timeout=10)
        if call.code() != grpc.StatusCode.OK or reply != REPLY:
            sys.exit(f"port {port}: {call.code()} {reply[:20]!r}")
    elif mode == "count":
        print(int(channel(port).unary_unary("/b.B/N")(b"", timeout=10)))
    elif mode == "hold":
        hold(port, int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(f"grpc-bench.py: unknown mode {mode}")


main()
