"""A WebSocket echo server for sluice's tests (Python `websockets`, Debian's python3-websockets).

    /usr/bin/python3 ws_echo.py PORT

Listens on 127.0.0.1:PORT and echoes every message (text or binary, any size) on the
connection it came on. Prints one JSON line per handshake it accepted, with the request's
path and headers as it received them (so a test can count handshakes and see what the proxy
forwarded). Never pings on its own: an idle connection stays silent.
"""

import asyncio
import json
import sys

import websockets


async def echo(ws, path=None):
    headers = [[name.lower(), value] for name, value in ws.request_headers.raw_items()]
    print(json.dumps({"path": path or ws.path, "headers": headers}), flush=True)
    try:
        async for message in ws:
            await ws.send(message)
    except websockets.exceptions.ConnectionClosed:
        pass


async def main(port):
    async with websockets.serve(
        echo, "127.0.0.1", port, ping_interval=None, max_size=None, reuse_address=True
    ):
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
