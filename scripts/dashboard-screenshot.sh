#!/usr/bin/env bash
# dashboard-screenshot.sh — start sluice on a small example, send it traffic that passes, is delayed
# and is rejected from several client addresses, and take a PNG screenshot of the admin dashboard.
#
# Usage:
#   scripts/dashboard-screenshot.sh [OUT.png]      (default: dashboard.png in a new temporary directory)
#
# What it runs: target/release/sluice (built with `cargo build --release` if missing) on a temporary
# configuration: zone `api` (5r/s, burst 5, nodelay) and zone `login` (2r/s, burst 3, delayed) in front of
# the upstream group `backend` (a second sluice server answering `return 200`, and 127.0.0.1:9, where
# nothing listens, so that it shows as unavailable), a limit_conn zone, and the admin listener. curl sends
# requests from 127.0.0.2 … 127.0.0.7 (`--interface`; all of 127.0.0.0/8 is local on Linux), and keeps
# sending while headless Chromium (`chromium`, Debian's package; a window of $WINDOW, default 1280,900)
# shows http://ADMIN/ for $SECONDS_SHOWN seconds (default 7) of real time, so that the page's rates
# are those of real traffic, then takes the screenshot through the DevTools protocol
# (Page.captureScreenshot).
# (`chromium --screenshot` alone needs --virtual-time-budget to let the page poll, and in virtual time
# the rates come out near 0.) Prints the path of the PNG.
# Needs curl, chromium, and python3 with websockets (python3-websockets, which scripts/test.sh installs).
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

browser="$(command -v chromium || command -v chromium-browser || true)"
[[ -n $browser ]] || { echo "dashboard-screenshot.sh: chromium is not installed (apt-get install chromium)" >&2; exit 1; }
command -v curl >/dev/null || { echo "dashboard-screenshot.sh: curl is not installed" >&2; exit 1; }

window="${WINDOW:-1280,900}"
[[ $window =~ ^[0-9]+,[0-9]+$ ]] || { echo "dashboard-screenshot.sh: WINDOW is WIDTH,HEIGHT, not $window" >&2; exit 1; }
dir="$(mktemp -d -t sluice-dashboard.XXXXXX)"
out="$(realpath -m "${1:-$dir/dashboard.png}")"
sluice="$repo/target/release/sluice"
[[ -x $sluice ]] || (cd "$repo" && cargo build --release --quiet)

read -r proxy backend admin < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

cat >"$dir/sluice.toml" <<TOML
limit_req_status = 429
access_log       = "off"
error_log_level  = "error"

[admin]
listen = "127.0.0.1:$admin"

[zones.api]
key  = "\$binary_remote_addr"
size = "1m"
rate = "5r/s"

[zones.login]
key  = "\$binary_remote_addr"
size = "1m"
rate = "2r/s"

[conn_zones.per_client]
key  = "\$binary_remote_addr"
size = "1m"

[upstreams.backend]
servers = [{ address = "127.0.0.1:$backend" }, { address = "127.0.0.1:9", max_fails = 1 }]

[[servers]]
listen = "127.0.0.1:$proxy"
[[servers.locations]]
path       = "/api/"
limit_req  = { zone = "api", burst = 5, nodelay = true }
limit_conn = { zone = "per_client", conn = 10 }
proxy_pass = "http://backend"
[[servers.locations]]
path       = "/login"
limit_req  = { zone = "login", burst = 3 }
proxy_pass = "http://backend"

[[servers]]
listen = "127.0.0.1:$backend"
[[servers.locations]]
path   = "/"
return = { status = 200, body = "ok\n" }
TOML

"$sluice" check --config "$dir/sluice.toml" >/dev/null
"$sluice" --config "$dir/sluice.toml" 2>"$dir/error.log" &
sluice_pid=$!
pids=()
cleanup() {
  if [[ ${#pids[@]} -gt 0 ]]; then kill "${pids[@]}" 2>/dev/null || true; fi
  kill "$sluice_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$admin/healthz" && break; sleep 0.1; done

# from N PATH COUNT: COUNT requests from 127.0.0.N, one after the other.
from() {
  local i
  for ((i = 0; i < $3; i++)); do
    curl -s -o /dev/null --interface "127.0.0.$1" "http://127.0.0.1:$proxy$2" || true
  done
}
from 2 /api/items 40 & pids+=($!)
from 3 /api/items 25 & pids+=($!)
from 4 /api/items 12 & pids+=($!)
from 5 /api/items 6 & pids+=($!)
from 6 /login 6 & pids+=($!)
wait "${pids[@]}"
pids=()
# Keep some traffic going while the page polls, so that its rates are not all zero.
( while :; do from 2 /api/items 5; from 7 /api/items 3; from 6 /login 1; sleep 0.2; done ) & pids+=($!)
sleep 1

"$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$dir/profile" \
  --window-size="$window" --remote-debugging-port=0 "http://127.0.0.1:$admin/" >"$dir/chromium.log" 2>&1 &
pids+=($!)
# The DevTools port Chromium chose, the page's socket, a wait in real time, the screenshot.
/usr/bin/python3 - "$dir/profile" "$out" "${SECONDS_SHOWN:-7}" "$window" <<'PY' || { cat "$dir/chromium.log" >&2; exit 1; }
import asyncio, base64, json, pathlib, sys, time, urllib.request
import websockets

profile, out, shown = sys.argv[1], sys.argv[2], float(sys.argv[3])
width, height = (int(n) for n in sys.argv[4].split(","))
port_file = pathlib.Path(profile, "DevToolsActivePort")
for _ in range(200):
    if port_file.exists() and port_file.read_text().strip():
        break
    time.sleep(0.05)
else:
    sys.exit("chromium did not open its DevTools port")
port = port_file.read_text().split()[0]
pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")

async def shoot():
    async with websockets.connect(url, max_size=None) as ws:
        # The page's own area the window's size (which includes none of a browser's chrome here,
        # but a headless window may still be given less).
        size = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        await ws.send(json.dumps({"id": 0, "method": "Emulation.setDeviceMetricsOverride", "params": size}))
        await asyncio.sleep(shown)
        await ws.send(json.dumps({"id": 1, "method": "Page.captureScreenshot", "params": {"format": "png"}}))
        while True:
            answer = json.loads(await ws.recv())
            if answer.get("id") == 1:
                return base64.b64decode(answer["result"]["data"])

pathlib.Path(out).write_bytes(asyncio.run(shoot()))
PY
[[ -s $out ]] || { echo "dashboard-screenshot.sh: no screenshot written to $out" >&2; cat "$dir/chromium.log" >&2; exit 1; }
echo "$out"
