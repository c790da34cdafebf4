#!/usr/bin/env bash
# bench-memory.sh — memory under connection floods, sluice against nginx in one run.
#
# Usage:
#   scripts/bench-memory.sh [--runs N] [--slowloris N] [--idle N] [--hold SECONDS] [--modes 'M …']
#                           [--variant 'ENV=V …']…
#
# Starts one static upstream (nginx serving a small file) and measures three floods (--modes picks
# some of them: slowloris idle h2idle) against nginx
# and sluice, each proxying to it with equivalent configs (one server, client_header_timeout 60s):
#   slowloris  --slowloris connections (200) each send a request line and Host, then one more
#              header line a second, never ending the header
#   idle       --idle connections (2000) connect and send nothing
#   h2idle     --idle connections each open HTTP/2 with prior knowledge (h2c: preface, SETTINGS),
#              get one proxied response (GET /), acknowledge the server's SETTINGS, then stay idle
#              (nginx 1.22 needs its own `listen … http2` port for h2c; sluice speaks both on one)
# Every measurement starts a fresh proxy, sends it a few proxied requests (the upstream pool and
# whatever is set up lazily exist before the flood), waits 2 s and reads its resident memory (the
# pre-flood RSS: VmRSS summed over nginx's master and workers; sluice's one process, all its
# threads). Then the flood: RSS after --hold seconds (5) minus the pre-flood RSS, per connection.
# Then every connection is closed and RSS is read 1 s, 3 s and 5 s later, as a percentage of the
# pre-flood RSS (issue #12's target: back within 20%, i.e. <= 120%, within seconds).
# The client is a Python script in its own process, not part of what is measured; it checks that
# the proxy really holds the connections (its socket descriptors grew by at least that many) and
# that none was answered or closed before the measurement (otherwise the run is an error).
# Runs alternate nginx, sluice, then each --variant (sluice with those environment variables,
# e.g. --variant MIMALLOC_PURGE_DELAY=0); --runs times (3), then the medians and the
# sluice/nginx ratios. The plain sluice column runs with no MIMALLOC_* variables set.
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"
# Thousands of connections at once: as many descriptors as allowed (the proxies inherit it).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

runs=3 slowloris=200 idle=2000 hold=5 variants=() modes=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --slowloris) slowloris="$2"; shift 2 ;;
    --idle) idle="$2"; shift 2 ;;
    --hold) hold="$2"; shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-memory.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if (( $(ulimit -n) < idle + 100 )); then
  echo "bench-memory.sh: descriptor limit $(ulimit -n) is below --idle $idle" >&2
  exit 1
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo build --release --quiet
sluice_bin="$repo/target/release/sluice"

work="$(mktemp -d -t sluice-bench-memory.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

nginx_conf() { # DIR → an nginx.conf head and temp paths (the http block is left open)
  cat <<EOF
user root;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log error;
events { worker_connections 16384; }
EOF
  echo "worker_processes ${2:-auto};"
  cat <<EOF
http {
  access_log off;
  client_body_temp_path $1/t1; proxy_temp_path $1/t2; fastcgi_temp_path $1/t3;
  uwsgi_temp_path $1/t4; scgi_temp_path $1/t5;
EOF
}

wait_up() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.1
  done
  echo "bench-memory.sh: nothing answers on port $1" >&2
  tail -n 20 "$work"/*.err "$work"/*/error.log >&2 || true
  exit 1
}

# --- the static upstream, one for every measurement -----------------------------------------------
up_port=$(free_port)
mkdir -p "$work/up/html"
printf 'ok\n' >"$work/up/html/ok.txt"
{
  nginx_conf "$work/up" 1
  echo "  server { listen 127.0.0.1:$up_port; root $work/up/html; location / { try_files /ok.txt =404; } }"
  echo "}"
} >"$work/up/nginx.conf"
nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
wait_up "$up_port"

# --- the flood client --------------------------------------------------------------------------------
cat >"$work/flood.py" <<'EOF'
# flood.py MODE PORT N HOLD PIDS… → "pre_kib peak_kib bytes_per_conn pct_1s pct_3s pct_5s"
import os, select, socket, sys, time
mode, port, n, hold, pids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]

def rss_kib():
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return total

def sockets():
    count = 0
    for p in pids:
        for fd in os.listdir(f"/proc/{p}/fd"):
            try:
                count += os.readlink(f"/proc/{p}/fd/{fd}").startswith("socket:")
            except FileNotFoundError:
                pass
    return count

def warm_up():
    # Proxied requests on a few keep-alive connections: the upstream pool, the runtime's lazily
    # built parts and the allocator's first pages exist before the pre-flood reading.
    for _ in range(4):
        c = socket.create_connection(("127.0.0.1", port))
        for _ in range(5):
            c.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
            got = b""
            while not got.endswith(b"ok\n"):
                chunk = c.recv(4096)
                if not chunk:
                    sys.exit(f"port {port}: warm-up connection closed early")
                got += chunk
        c.close()

def check_open(conns):
    # Nothing may have been answered or closed by the proxy: a readable socket means either.
    poll = select.poll()
    for c in conns:
        poll.register(c, select.POLLIN)
    ready = poll.poll(0)
    if ready:
        sys.exit(f"port {port}: {len(ready)} of {len(conns)} {mode} connections answered or closed by the proxy")

warm_up()
time.sleep(2)
pre, pre_socks = rss_kib(), sockets()
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

def literal(name, value):
    # HPACK literal without indexing, new name, no Huffman (RFC 7541 §6.2.2); short strings only.
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value

def h2_request(c):
    block = (literal(b":method", b"GET") + literal(b":scheme", b"http")
             + literal(b":authority", b"bench") + literal(b":path", b"/"))
    c.sendall(H2_PREFACE + frame(4, 0, 0, b"") + frame(1, 5, 1, block))
    buf, acked, done = b"", False, False
    while not (acked and done):
        chunk = c.recv(65536)
        if not chunk:
            sys.exit(f"port {h2port}: an h2c connection closed before its response")
        buf += chunk
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            length, kind, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            if kind == 4 and not flags & 1:
                c.sendall(frame(4, 1, 0, b""))
                acked = True
            if kind in (0, 1) and flags & 1 and int.from_bytes(buf[5:9], "big") == 1:
                done = True
            buf = buf[9 + length:]

h2port = int(os.environ.get("H2_PORT", port))
conns = []
for i in range(n):
    c = socket.create_connection(("127.0.0.1", h2port if mode == "h2idle" else port))
    if mode == "slowloris":
        c.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n")
    elif mode == "h2idle":
        h2_request(c)
    conns.append(c)
start = time.monotonic()
for k in range(1, hold + 1):
    time.sleep(max(0.0, start + k - time.monotonic()))
    if mode == "slowloris":
        line = f"X-Slow-{k}: {'x' * 20}\r\n".encode()
        for c in conns:
            c.sendall(line)
time.sleep(0.2)  # the last lines read
peak, peak_socks = rss_kib(), sockets()
check_open(conns)
if peak_socks - pre_socks < n:
    sys.exit(f"port {port}: the proxy holds {peak_socks - pre_socks} more sockets, not {n}")
for c in conns:
    c.close()
closed = time.monotonic()
after = []
for t in (1, 3, 5):
    time.sleep(max(0.0, closed + t - time.monotonic()))
    after.append(rss_kib() * 100 / pre)
print(f"{pre} {peak} {(peak - pre) * 1024 / n:.0f} {after[0]:.0f} {after[1]:.0f} {after[2]:.0f}")
EOF

# --- the proxies -------------------------------------------------------------------------------------
# start_nginx PORT → the master's pid in $proxy_pids (then its workers), one fresh nginx.
start_nginx() {
  local dir="$work/ngx"
  rm -rf "$dir"; mkdir -p "$dir"
  {
    nginx_conf "$dir"
    cat <<EOF
  client_header_timeout 60s;
  upstream up { server 127.0.0.1:$up_port; keepalive 128; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server { listen 127.0.0.1:$1; location / { proxy_pass http://up; } }
  server { listen 127.0.0.1:$2 http2; location / { proxy_pass http://up; } }
}
EOF
  } >"$dir/nginx.conf"
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" &
  proxy_pid=$!
  wait_up "$1"
  mapfile -t proxy_pids < <(echo "$proxy_pid"; pgrep -P "$proxy_pid")
}

# start_sluice PORT ENV… → its pid in $proxy_pids, one fresh sluice with those variables.
start_sluice() {
  local port=$1
  shift
  cat >"$work/sluice.toml" <<EOF
client_header_timeout = "60s"
[[servers]]
listen = "127.0.0.1:$port"
http2 = true
proxy_pass = "http://127.0.0.1:$up_port"
EOF
  # shellcheck disable=SC2046
  env $(env | awk -F= '/^MIMALLOC_/ { print "-u " $1 }') "$@" \
    "$sluice_bin" --config "$work/sluice.toml" 2>"$work/sluice.err" &
  proxy_pid=$!
  wait_up "$port"
  proxy_pids=("$proxy_pid")
}

stop_proxy() {
  kill "$proxy_pid"
  wait "$proxy_pid" 2>/dev/null || true
}

# measure MODE N WHO → the client's line (WHO: nginx, sluice, or a variant's index)
measure() {
  local mode=$1 n=$2 who=$3 port h2port
  port=$(free_port)
  h2port=$port
  case $who in
    nginx) h2port=$(free_port); start_nginx "$port" "$h2port" ;;
    sluice) start_sluice "$port" ;;
    *) read -r -a vars <<<"${variants[$who]}"; start_sluice "$port" "${vars[@]}" ;;
  esac
  local out rc=0
  out="$(H2_PORT=$h2port python3 "$work/flood.py" "$mode" "$port" "$n" "$hold" "${proxy_pids[@]}")" || rc=$?
  stop_proxy
  if [[ $rc -ne 0 ]]; then
    tail -n 20 "$work/sluice.err" "$work/ngx/error.log" >&2 2>/dev/null || true
    exit 1
  fi
  echo "$out"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'; }

who=(nginx sluice)
for i in "${!variants[@]}"; do who+=("$i"); done
label() { case $1 in nginx | sluice) echo "$1" ;; *) echo "sluice+v$(($1 + 1))" ;; esac; }

echo "memory under floods, sluice vs nginx — $(nproc) cores, $(nginx -v 2>&1 | cut -d/ -f2), $runs runs, hold ${hold}s"
echo "machine: $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for i in "${!variants[@]}"; do echo "sluice+v$((i + 1)): ${variants[$i]}"; done
for mode in ${modes:-slowloris idle h2idle}; do
  n=$slowloris
  [[ $mode == slowloris ]] || n=$idle
  echo
  case $mode in
    slowloris) echo "== slowloris: $n connections, a request line, then one more header line a second" ;;
    idle) echo "== idle: $n connections that send nothing" ;;
    h2idle) echo "== h2idle: $n h2c connections, one request each, then idle" ;;
  esac
  fmt='%-14s %4s %10s %10s %9s %7s %7s %7s\n'
  # shellcheck disable=SC2059
  printf "$fmt" proxy run "pre KiB" "peak KiB" "B/conn" "+1s %" "+3s %" "+5s %"
  for ((r = 1; r <= runs; r++)); do
    for w in "${who[@]}"; do
      line="$(measure "$mode" "$n" "$w")"
      # shellcheck disable=SC2086,SC2059
      printf "$fmt" "$(label "$w")" "$r" $line
      echo "$line" >>"$work/$mode.$w"
    done
  done
  col() { awk -v c="$2" '{ print $c }' "$work/$mode.$1" | median; }
  echo "-- medians (after close: RSS as % of pre-flood; the target is <= 120)"
  hfmt='%-28s'
  row() { # TITLE COLUMN WITH_RATIO
    local w v n0
    # shellcheck disable=SC2059
    printf "$hfmt" "$1"
    n0="$(col nginx "$2")"
    for w in "${who[@]}"; do
      v="$(col "$w" "$2")"
      printf ' %14s' "$v"
      if [[ $w != nginx ]]; then
        if [[ $3 == yes ]]; then printf ' %7s' "$(ratio "$v" "$n0")x"; else printf ' %7s' ""; fi
      fi
    done
    echo
  }
  # shellcheck disable=SC2059
  printf "$hfmt" ""
  for w in "${who[@]}"; do
    printf ' %14s' "$(label "$w")"
    [[ $w != nginx ]] && printf ' %7s' ""
  done
  echo
  row "pre-flood RSS, KiB" 1 no
  row "bytes per connection" 3 yes
  row "RSS 1 s after close, %" 4 no
  row "RSS 3 s after close, %" 5 no
  row "RSS 5 s after close, %" 6 no
done
