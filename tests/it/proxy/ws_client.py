"""WebSocket client scenarios for sluice's tests (Python `websockets`, /usr/bin/python3).

    /usr/bin/python3 ws_client.py SCENARIO URL [ARGS...]

Each scenario prints one JSON line with what it saw, and exits 0 (a failed check is reported
in the JSON, not by an exception, so that the test shows it):
- echo URL: a text frame, a binary frame and a 1 MB binary message, each echoed, then the
  close handshake.
- concurrent URL N: N connections at once, 20 messages each, every echo checked.
- handshake URL: one handshake: its status (101, or the refusal's) and the refusal's headers.
- handshakes URL N: N handshakes one after the other: their statuses, the first Retry-After.
- idle URL SECONDS: a connection that sends nothing: when it was closed, if within SECONDS.
- active URL SECONDS INTERVAL: one message every INTERVAL for SECONDS, each echoed.
"""

import asyncio
import json
import os
import sys
import time

import websockets


def connect(url):
    return websockets.connect(url, ping_interval=None, max_size=None, open_timeout=10)


async def echo(url):
    out = {}
    async with connect(url) as ws:
        await ws.send("hello")
        out["text"] = await ws.recv() == "hello"
        payload = bytes(range(256))
        await ws.send(payload)
        out["binary"] = await ws.recv() == payload
        big = os.urandom(1 << 20)
        await ws.send(big)
        out["big"] = await ws.recv() == big
    out["close_code"] = ws.close_code
    return out


async def one(url, i):
    async with connect(url) as ws:
        for j in range(20):
            message = f"c{i}-{j}"
            await ws.send(message)
            if await ws.recv() != message:
                return False
    return True


async def concurrent(url, n):
    done = await asyncio.gather(*(one(url, i) for i in range(int(n))))
    return {"ok": sum(done), "of": len(done)}


async def handshake(url):
    try:
        async with connect(url) as ws:
            await ws.send("hi")
            return {"status": 101, "echo": await ws.recv()}
    except websockets.exceptions.InvalidStatusCode as e:
        return {"status": e.status_code, "headers": {k.lower(): v for k, v in e.headers.raw_items()}}


async def handshakes(url, n):
    statuses, retry_after = [], None
    for _ in range(int(n)):
        r = await handshake(url)
        statuses.append(r["status"])
        if r["status"] != 101 and retry_after is None:
            retry_after = r["headers"].get("retry-after")
    return {"statuses": statuses, "retry_after": retry_after}


async def idle(url, seconds):
    async with connect(url) as ws:
        start = time.monotonic()
        try:
            await asyncio.wait_for(ws.wait_closed(), float(seconds))
        except asyncio.TimeoutError:
            return {"open": True}
        return {"closed_after": time.monotonic() - start}


async def active(url, seconds, interval):
    async with connect(url) as ws:
        start, n = time.monotonic(), 0
        while time.monotonic() - start < float(seconds):
            await asyncio.sleep(float(interval))
            await ws.send(f"m{n}")
            if await ws.recv() != f"m{n}":
                return {"ok": False, "messages": n}
            n += 1
        return {"ok": True, "messages": n}


SCENARIOS = {
    "echo": echo,
    "concurrent": concurrent,
    "handshake": handshake,
    "handshakes": handshakes,
    "idle": idle,
    "active": active,
}

if __name__ == "__main__":
    scenario, *args = sys.argv[1:]
    try:
        result = asyncio.run(SCENARIOS[scenario](*args))
    except Exception as e:  # reported to the test, which shows it
        result = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result), flush=True)
