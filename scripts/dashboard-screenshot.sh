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
# sending while headless Chromium (`chromium`, Debian's package) loads http://ADMIN/ and lets the page poll
# a few times (in Chromium's virtual time) before the screenshot (1280×900).
# Prints the path of the PNG. Needs curl, python3 (to find free ports) and chromium.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

browser="$(command -v chromium || command -v chromium-browser || true)"
[[ -n $browser ]] || { echo "dashboard-screenshot.sh: chromium is not installed (apt-get install chromium)" >&2; exit 1; }
command -v curl >/dev/null || { echo "dashboard-screenshot.sh: curl is not installed" >&2; exit 1; }

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
  --window-size=1280,900 --virtual-time-budget=7000 --screenshot="$out" "http://127.0.0.1:$admin/" \
  >"$dir/chromium.log" 2>&1 || { cat "$dir/chromium.log" >&2; exit 1; }
[[ -s $out ]] || { echo "dashboard-screenshot.sh: chromium wrote no $out" >&2; cat "$dir/chromium.log" >&2; exit 1; }
echo "$out"
