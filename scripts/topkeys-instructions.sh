#!/usr/bin/env bash
# topkeys-instructions.sh — what the most-limited-keys sketch (`[admin] top_keys`) costs a rejection,
# in instructions: the same on a busy machine, where bench.sh --only topkeys reads CPU time with a
# spread of ±10–20 % per run, too wide for a 3 % target.
#
# Usage:
#   scripts/topkeys-instructions.sh [N]      # default N = 2000 rejections per measurement
#
# sluice (the release build, one worker: SLUICE_WORKERS=1) under `valgrind --tool=callgrind`, a zone
# keyed on a header at 1r/m answering with `return`, with top_keys = 10 (the default) and 0 (off),
# everything else equal; one keep-alive client (python3) sends:
#   hot     one request of one key (admitted), then N more of it (refused): a flood from one client
#   spread  N keys once each (admitted), then each once more (refused): a flood from many, every
#           rejection a key the sketch does not hold (N ≫ its 320 counters)
# Each is run a second time without the N refusals; the difference, divided by N, is the
# instructions per rejection (startup and admissions subtracted). Prints them for on and off and
# the ratio on/off. Needs valgrind and python3.
set -euo pipefail
export LC_ALL=C
n="${1:-2000}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v valgrind >/dev/null || { echo "topkeys-instructions.sh: valgrind is not installed" >&2; exit 1; }
cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
work="$(mktemp -d -t sluice-topkeys.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/callgrind.sh disable=SC1091
source "$repo/scripts/callgrind.sh"

cat >"$work/client.py" <<'EOF'
import http.client, sys
port, mode, n, refuse = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
c = http.client.HTTPConnection("127.0.0.1", port)
want = {200: 0, 429: 0}
def get(key, status):
    c.request("GET", "/r", headers={"X-Client": key})
    r = c.getresponse(); r.read()
    if r.status != status:
        sys.exit(f"{mode}: {key} answered {r.status}, not {status}")
if mode == "hot":
    get("hot", 200)
    for _ in range(n if refuse else 0): get("hot", 429)
else:
    for i in range(n): get(f"k{i}", 200)
    for i in range(n if refuse else 0): get(f"k{i}", 429)
EOF

# instructions TOP_KEYS MODE REFUSE → sluice's total instructions (Ir) for that run
instructions() {
  local port
  port=$(free_port)
  cat >"$work/sluice.toml" <<EOF
limit_req_status = 429
[zones.r]
key  = "\$http_x_client"
size = "64m"
rate = "1r/m"
[[servers]]
listen = "127.0.0.1:$port"
[[servers.locations]]
path      = "/r"
limit_req = { zone = "r" }
return    = { status = 200 }
[admin]
listen   = "127.0.0.1:$(free_port)"
top_keys = $1
EOF
  SLUICE_WORKERS=1 callgrind_ir "$work/callgrind.$1.$2.$3" "http://127.0.0.1:$port/" \
    python3 "$work/client.py" "$port" "$2" "$n" "$3" -- \
    "$repo/target/release/sluice" --config "$work/sluice.toml" || exit 1
}

echo "instructions per rejection (callgrind, sluice with one worker, $n rejections, startup and admissions subtracted)"
printf '%-8s %10s %10s %8s\n' flood "top on" "top off" "on/off"
for mode in hot spread; do
  declare -A per=()
  for top in 10 0; do
    with=$(instructions "$top" "$mode" 1)
    without=$(instructions "$top" "$mode" 0)
    per[$top]=$(((with - without) / n))
  done
  printf '%-8s %10s %10s %8s\n' "$mode" "${per[10]}" "${per[0]}" \
    "$(awk -v a="${per[10]}" -v b="${per[0]}" 'BEGIN { printf "%.3f", a / b }')"
done
