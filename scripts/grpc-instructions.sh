#!/usr/bin/env bash
# grpc-instructions.sh — instructions per unary gRPC call through grpc_pass, nginx 1.22 and sluice, under
# `valgrind --tool=callgrind`: figures that do not move with a shared machine's noise, and where sluice's go.
#
# Usage:
#   scripts/grpc-instructions.sh [N]      # default N = 2000 calls per measurement
#
# The upstream is scripts/grpc-bench.py's python3-grpcio asyncio server (not under valgrind, not counted).
# In front of it, each alone under callgrind: nginx (`master_process off`: one process; `listen … http2`,
# grpc_pass to an upstream block with `keepalive 128`) and sluice (the release build, SLUICE_WORKERS=1,
# `http2 = true`, grpc_pass), both with the pass limit of scripts/bench.sh. The load is h2load -c1 -m10 over
# h2c, one 100-byte gRPC message per call, every call answered 2xx; 500 and 500 + N calls, per call =
# (Ir(500 + N) − Ir(500)) / N, so that start-up, the first calls (the upstream connection) and shutdown
# cancel out. Prints both and sluice/nginx, then sluice's per call by part (scripts/callgrind-groups.py)
# and its 15 costliest functions by their own instructions per call. SLUICE_BENCH_BIN=PATH runs that
# binary instead of building target/release/sluice. Needs valgrind, nginx, h2load, python3-grpcio.
set -euo pipefail
export LC_ALL=C
n="${1:-2000}" small=500
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for tool in valgrind nginx h2load curl; do
  command -v "$tool" >/dev/null || { echo "grpc-instructions.sh: $tool is not installed" >&2; exit 1; }
done
if [[ -n ${SLUICE_BENCH_BIN:-} ]]; then
  sluice_bin="$SLUICE_BENCH_BIN"
else
  cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
  sluice_bin="$repo/target/release/sluice"
fi
work="$(mktemp -d -t sluice-grpcir.XXXXXX)"
up_pid=""
trap '[[ -n $up_pid ]] && kill "$up_pid"; rm -rf "$work"' EXIT
# shellcheck source=scripts/callgrind.sh disable=SC1091
source "$repo/scripts/callgrind.sh"

up_port=$(free_port)
/usr/bin/python3 "$repo/scripts/grpc-bench.py" serve "$up_port" 2>"$work/up.err" &
up_pid=$!
printf '\0\0\0\0\144%0100d' 0 >"$work/req.bin"

# client PORT COUNT: COUNT unary calls over one connection, ten at a time, every one answered 2xx
# (after one python gRPC call that must end OK: the upstream connection made outside the count).
client() {
  local out
  /usr/bin/python3 "$repo/scripts/grpc-bench.py" check "$1" || return 1
  out="$(h2load -c1 -m10 -n"$(($2 - 1))" -d "$work/req.bin" -H 'content-type: application/grpc' \
    -H 'te: trailers' "http://127.0.0.1:$1/b.B/U" 2>&1)" || return 1
  grep -q "status codes: $(($2 - 1)) 2xx" <<<"$out" || { echo "h2load: $out" >&2; return 1; }
}
# ir SYSTEM COUNT → the instructions of one run: a fresh server under callgrind, COUNT calls.
ir() {
  local port plain out="$work/callgrind.$1.$2"
  port=$(free_port) plain=$(free_port)
  if [[ $1 == nginx ]]; then
    mkdir -p "$work/ngx"
    cat >"$work/ngx/nginx.conf" <<CONF
master_process off; daemon off; user root;
pid $work/ngx/nginx.pid;
error_log $work/ngx/error.log error;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/ngx/t1; proxy_temp_path $work/ngx/t2; fastcgi_temp_path $work/ngx/t3;
  uwsgi_temp_path $work/ngx/t4; scgi_temp_path $work/ngx/t5;
  keepalive_requests 1000000;
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  upstream grpcup { server 127.0.0.1:$up_port; keepalive 128; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$plain; location / { return 200 "ok\n"; } }
  server {
    listen 127.0.0.1:$port http2;
    location / { limit_req zone=pass burst=1000000 nodelay; grpc_pass grpc://grpcup; }
  }
}
CONF
    callgrind_ir "$out" "http://127.0.0.1:$plain/" client "$port" "$2" -- \
      nginx -p "$work/ngx/" -c "$work/ngx/nginx.conf" -e "$work/ngx/error.log"
  else
    cat >"$work/sluice.toml" <<CONF
[zones.pass]
key = "\$binary_remote_addr"
size = "10m"
rate = "1000000r/s"
[[servers]]
listen = "127.0.0.1:$port"
http2 = true
[[servers.locations]]
path = "/"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
grpc_pass = "grpc://127.0.0.1:$up_port"
[admin]
listen = "127.0.0.1:$plain"
CONF
    SLUICE_WORKERS=1 callgrind_ir "$out" "http://127.0.0.1:$plain/metrics" client "$port" "$2" -- \
      "$sluice_bin" --config "$work/sluice.toml"
  fi
}
declare -A per=()
for sys in nginx sluice; do
  a=$(ir "$sys" "$small") || { echo "grpc-instructions.sh: $sys, $small calls, failed" >&2; exit 1; }
  b=$(ir "$sys" "$((small + n))") || { echo "grpc-instructions.sh: $sys, $((small + n)) calls, failed" >&2; exit 1; }
  per[$sys]=$(((b - a) / n))
done
echo "== instructions per unary gRPC call (callgrind; h2load -c1 -m10 over h2c; (Ir of $((small + n)) calls − Ir of $small) / $n)"
printf '%-12s %12s %12s %9s\n' "" "nginx Ir" "sluice Ir" "sluice x"
printf '%-12s %12s %12s %9s\n' "unary call" "${per[nginx]}" "${per[sluice]}" \
  "$(awk -v a="${per[sluice]}" -v b="${per[nginx]}" 'BEGIN { printf "%.2f", a / b }')"
echo
echo "== where sluice's go (scripts/callgrind-groups.py: shared code charged to its callers)"
python3 "$repo/scripts/callgrind-groups.py" "$n" grpc "$work/callgrind.sluice.$((small + n))" "$work/callgrind.sluice.$small"
echo
echo "== sluice's 15 costliest functions, their own instructions per call"
for f in "$((small + n))" "$small"; do
  callgrind_annotate --auto=no --inclusive=no --threshold=100 "$work/callgrind.sluice.$f" 2>/dev/null |
    awk -v f="$f" 'match($0, /^ *[0-9,]+ \( *[0-9.]+%\)  /) && $0 !~ /PROGRAM TOTALS/ {
      v = $1; gsub(/,/, "", v); print f "\t" v "\t" substr($0, RLENGTH + 1) }'
done | awk -F'\t' -v big="$((small + n))" -v n="$n" '
  # "file:function [object]" → the function, its inlined copies summed
  { name = $3; sub(/ \[[^]]*\]$/, "", name); sub(/^[^:]*:/, "", name)
    if ($1 == big) c[name] += $2; else c[name] -= $2 }
  END { for (k in c) printf "%9.0f  %s\n", c[k] / n, k }' | sort -rn | head -n 15 | cut -c1-150
