#!/usr/bin/env bash
# bench.sh — sluice against nginx on this machine, in one run: same upstream, same load generator.
#
# Usage:
#   scripts/bench.sh [--duration SECONDS] [--pairs N] [--connections N] [--threads N] [--only SCENARIO]
#
# Starts one static upstream (nginx serving a small file) and, in front of it, nginx with limit_req
# and sluice with the equivalent TOML. Then, for each scenario, runs wrk against nginx and sluice
# alternately (nginx, sluice, nginx, sluice, … --pairs times) and prints req/s, p50 and p99 latency
# per run, the CPU time each proxy spent per request (user + system, all its threads or worker
# processes: the cost that does not depend on who else shares the cores), the sluice/nginx ratios
# per pair, and the medians. Scenarios:
#   pass    limits that never reject (one client, a very high rate)
#   reject  every request answered 429 (1r/m, no burst)
#   many    100 000 distinct keys, from a header a wrk Lua script sets (a zone keyed on $http_x_client)
#   logged  the pass path with an access log: nginx's `combined` format, to a file (as most run)
#   idle    memory per idle keep-alive client connection: 4000 connections, one request each, then
#           3 s idle (the growth of the proxy's resident memory, all its processes, per connection);
#           then 4000 more while the first stay open (what one more idle connection costs once
#           memory freed by idle connections can be reused)
# Both proxies keep upstream connections alive and log rejections to a file; only `logged` has an
# access log (emptied before each run).
# Defaults: 10 s per run, 5 pairs, 64 connections, 2 wrk threads. Machines here are shared and noisy:
# read the medians and ratios, not single runs.
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"
# Thousands of connections in the idle measurement: as many descriptors as allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

duration=10 pairs=5 connections=64 threads=2 only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo build --release --quiet
sluice_bin="$repo/target/release/sluice"

work="$(mktemp -d -t sluice-bench.XXXXXX)"
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
up_port=$(free_port) ngx_port=$(free_port) slu_port=$(free_port)

nginx_common() {
  cat <<EOF
user root;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log error;
events { worker_connections 8192; }
EOF
}
nginx_temp() {
  cat <<EOF
  access_log off;
  client_body_temp_path $1/t1; proxy_temp_path $1/t2; fastcgi_temp_path $1/t3;
  uwsgi_temp_path $1/t4; scgi_temp_path $1/t5;
EOF
}

# --- the static upstream -----------------------------------------------------------------------
mkdir -p "$work/up/html"
printf 'ok\n' >"$work/up/html/ok.txt"
{
  nginx_common "$work/up"
  echo "worker_processes 1;"
  echo "http {"
  nginx_temp "$work/up"
  echo "  keepalive_requests 1000000;"
  echo "  server { listen 127.0.0.1:$up_port; root $work/up/html; location / { try_files /ok.txt =404; } }"
  echo "}"
} >"$work/up/nginx.conf"

# --- nginx in front ------------------------------------------------------------------------------
mkdir -p "$work/ngx"
{
  nginx_common "$work/ngx"
  echo "worker_processes auto;"
  cat <<EOF
http {
$(nginx_temp "$work/ngx")
  keepalive_requests 1000000;
  upstream up { server 127.0.0.1:$up_port; keepalive 128; }
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=reject:10m rate=1r/m;
  limit_req_zone \$http_x_client zone=many:64m rate=100r/s;
  limit_req_status 429;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  server {
    listen 127.0.0.1:$ngx_port;
    location /pass   { limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up; }
    location /reject { limit_req zone=reject; proxy_pass http://up; }
    location /many   { limit_req zone=many burst=100 nodelay; proxy_pass http://up; }
    location /idle   { return 200 "ok\n"; }
    location /logged {
      limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up;
      access_log $work/ngx/access.log combined;
    }
  }
}
EOF
} >"$work/ngx/nginx.conf"

# --- sluice in front, the same limits -------------------------------------------------------------
cat >"$work/sluice.toml" <<EOF
limit_req_status = 429
log_format = '\$remote_addr - \$remote_user [\$time_local] "\$request" \$status \$body_bytes_sent "\$http_referer" "\$http_user_agent"'

[zones.pass]
key = "\$binary_remote_addr"
size = "10m"
rate = "1000000r/s"
[zones.reject]
key = "\$binary_remote_addr"
size = "10m"
rate = "1r/m"
[zones.many]
key = "\$http_x_client"
size = "64m"
rate = "100r/s"
[[servers]]
listen = "127.0.0.1:$slu_port"
proxy_pass = "http://127.0.0.1:$up_port"
[[servers.locations]]
path = "/pass"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
[[servers.locations]]
path = "/reject"
limit_req = { zone = "reject" }
[[servers.locations]]
path = "/many"
limit_req = { zone = "many", burst = 100, nodelay = true }
[[servers.locations]]
path = "/idle"
return = { status = 200, body = "ok\n" }
[[servers.locations]]
path = "/logged"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
access_log = "$work/access.log"
EOF

nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
nginx -p "$work/ngx/" -c "$work/ngx/nginx.conf" -e "$work/ngx/error.log" & pids+=($!)
ngx_master=$!
"$sluice_bin" --config "$work/sluice.toml" 2>"$work/sluice.err" & pids+=($!)
slu_pid=$!

wait_up() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/pass" && return 0
    sleep 0.1
  done
  echo "bench.sh: nothing answers on port $1" >&2
  tail -n 20 "$work"/*.err "$work"/*/error.log >&2 || true
  exit 1
}
wait_up "$up_port"; wait_up "$ngx_port"; wait_up "$slu_port"

cat >"$work/many.lua" <<'EOF'
-- 100 000 distinct client keys, one random key per request.
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", "/many", { ["X-Client"] = tostring(math.random(1, 100000)) })
end
EOF

# wrk's latency "1.23ms" / "456.00us" / "1.01s" → milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}

# CPU time (user + system, in clock ticks) used so far by the processes PIDS, all their threads.
cpu_ticks() {
  local p
  for p in "$@"; do cat /proc/"$p"/task/*/stat 2>/dev/null; done |
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}
tck=$(getconf CLK_TCK)

# run PORT PATH SCRIPT PIDS… → "rps p50 p99 non2xx cpu_us_per_request"
run() {
  local port=$1 path=$2 script=$3
  shift 3
  local out args=(-t"$threads" -c"$connections" -d"${duration}s" --latency)
  [[ -n $script ]] && args+=(-s "$script")
  local t0 t1
  : >"$work/access.log"
  : >"$work/ngx/access.log"
  t0=$(cpu_ticks "$@")
  out="$(wrk "${args[@]}" "http://127.0.0.1:$port$path")"
  t1=$(cpu_ticks "$@")
  local rps p50 p99 non2xx n cpu
  rps="$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")"
  p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")"
  p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")"
  non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")"
  n="$(awk '/requests in/ { print $1 }' <<<"$out")"
  cpu="$(awk -v t=$((t1 - t0)) -v hz="$tck" -v n="$n" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')"
  echo "$rps $p50 $p99 ${non2xx:-0} $cpu"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "sluice vs nginx — $(nproc) cores, $(nginx -v 2>&1 | cut -d/ -f2), wrk -t$threads -c$connections -d${duration}s, $pairs pairs"
echo "machine: $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for scenario in pass reject many logged; do
  [[ -n $only && $only != "$scenario" ]] && continue
  script=""
  [[ $scenario == many ]] && script="$work/many.lua"
  # nginx's workers are the master's children (looked up now: after a warm-up they all exist).
  mapfile -t ngx_pids < <(pgrep -P "$ngx_master")
  # Warm up both (connections, zone states, caches).
  run "$ngx_port" "/$scenario" "$script" "${ngx_pids[@]}" >/dev/null
  run "$slu_port" "/$scenario" "$script" "$slu_pid" >/dev/null
  echo
  echo "== $scenario"
  fmt='%-5s  %10s %7s %7s %8s %6s   %10s %7s %7s %8s %6s   %6s %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" pair "nginx r/s" p50ms p99ms non2xx cpu_us "sluice r/s" p50ms p99ms non2xx cpu_us "r/s x" "p99 x" "cpu x"
  : >"$work/$scenario.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps n_p50 n_p99 n_bad n_cpu <<<"$(run "$ngx_port" "/$scenario" "$script" "${ngx_pids[@]}")"
    read -r s_rps s_p50 s_p99 s_bad s_cpu <<<"$(run "$slu_port" "/$scenario" "$script" "$slu_pid")"
    rps_x="$(awk -v a="$s_rps" -v b="$n_rps" 'BEGIN { printf "%.2f", a / b }')"
    p99_x="$(awk -v a="$s_p99" -v b="$n_p99" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
    cpu_x="$(awk -v a="$s_cpu" -v b="$n_cpu" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "$n_rps" "$n_p50" "$n_p99" "$n_bad" "$n_cpu" "$s_rps" "$s_p50" "$s_p99" "$s_bad" "$s_cpu" "$rps_x" "$p99_x" "$cpu_x"
    echo "$n_rps $n_p50 $n_p99 $n_cpu $s_rps $s_p50 $s_p99 $s_cpu $rps_x $p99_x $cpu_x" >>"$work/$scenario.ratios"
  done
  col() { awk -v c="$1" '{ print $c }' "$work/$scenario.ratios" | median; }
  # shellcheck disable=SC2059
  printf "$fmt" median "$(col 1)" "$(col 2)" "$(col 3)" "" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)" "" "$(col 8)" "$(col 9)" "$(col 10)" "$(col 11)"
done

# --- memory per idle keep-alive connection -----------------------------------------------------------
cat >"$work/idle.py" <<'EOF'
import socket, sys, time
port, n, pids = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def rss_kib():
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return total
def batch():
    before = rss_kib()
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for c in conns:
        c.sendall(b"GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n")
    for c in conns:
        got = b""
        while not got.endswith(b"ok\n"):
            chunk = c.recv(4096)
            if not chunk:
                sys.exit(f"port {port}: connection closed early")
            got += chunk
    time.sleep(3)
    return conns, (rss_kib() - before) * 1024 / n
first, a = batch()   # all at once: the peak, what the allocator keeps
second, b = batch()  # while the first idle: what one more idle connection costs
print(f"{a:.0f} {b:.0f}")
EOF
if [[ -z $only || $only == idle ]]; then
  idle_n=4000
  mapfile -t ngx_pids < <(pgrep -P "$ngx_master")
  read -r ngx_a ngx_b <<<"$(python3 "$work/idle.py" "$ngx_port" "$idle_n" "${ngx_pids[@]}")"
  read -r slu_a slu_b <<<"$(python3 "$work/idle.py" "$slu_port" "$idle_n" "$slu_pid")"
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'; }
  echo
  echo "== idle (keep-alive connections, one request each, then idle 3 s; resident memory per connection)"
  printf '%-40s %8s %8s %7s\n' "" nginx sluice "x"
  printf '%-40s %8s %8s %7s\n' "bytes, first $idle_n (all at once: the peak)" "$ngx_a" "$slu_a" "$(ratio "$slu_a" "$ngx_a")"
  printf '%-40s %8s %8s %7s\n' "bytes, $idle_n more while those idle" "$ngx_b" "$slu_b" "$(ratio "$slu_b" "$ngx_b")"
fi
