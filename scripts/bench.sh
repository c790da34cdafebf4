#!/usr/bin/env bash
# bench.sh — sluice against nginx and HAProxy on this machine, in one run: same upstream, same load
# generators, alternating runs, medians, ratios taken within the run.
#
# Usage:
#   scripts/bench.sh [--duration SECONDS] [--pairs N] [--connections N] [--threads N] [--only SCENARIO]
#                    [--requests N]
#
# Starts one static upstream (nginx serving a 3-byte file) and, in front of it, nginx with limit_req,
# sluice with the equivalent TOML and HAProxy as a plain reverse proxy (no limits: what a proxy costs
# without them). All three keep upstream connections alive (nginx `keepalive 128`, sluice's own pool,
# HAProxy `http-reuse always`); all bind 127.0.0.1 on free ports, in a temporary directory, and stop
# with the script. For each scenario the load generator runs against each proxy in turn (nginx,
# [haproxy,] sluice, nginx, … --pairs rounds, after one warm-up run each) and the script prints per
# run req/s, p50 and p99 latency and cpu_us: the CPU time the proxy spent per request (user + system,
# all its threads or processes, from /proc/PID/stat: the cost that does not depend on who else shares
# the cores), then the ratios sluice/nginx (`r/s x`, `p99 x`, `cpu x`) and sluice/HAProxy (`… x hap`)
# of the same round, and last the median of every column. Scenarios (wrk -t THREADS -c CONNECTIONS):
#   pass    limits that never reject (one client, a very high rate); nginx, HAProxy and sluice
#   reject  every request answered 429 (1r/m, no burst); nginx and sluice (HAProxy has no limit_req)
#   many    100 000 distinct keys, from a header a wrk Lua script sets (a zone keyed on $http_x_client)
#   logged  the pass path with an access log: nginx's `combined` format, to a file (as most run)
#   gzip    CPU per compressed response: /gzip, a 32 KB text page from the upstream, compressed by
#           both at the same level (`gzip_comp_level 1`, nginx's default; wrk sends `Accept-Encoding:
#           gzip`), no limits; nginx and sluice (issue #48: target <= 1.0x)
#   tail    what the pass p99 follows (issue #31 item 3): nginx on /pass, the same nginx on /passburn
#           (/pass with a map of 60 regular expressions evaluated per request: the same work plus
#           about 15 % more user time, nothing else changed) and sluice on /pass, in turn. Prints
#           each one's r/s, p99 and cpu_us, and nginx+burn's and sluice's ratios to nginx: whether a
#           proxy made costlier per request, and only that, gets sluice's p99 on these shared cores.
#   idle    memory per idle keep-alive client connection, nginx, HAProxy and sluice: 4000 connections,
#           one request each (/idle, answered by the proxy itself: nginx and sluice `return`, HAProxy
#           `http-request return`), then 3 s idle (the growth of the proxy's resident memory, all its
#           processes summed, per connection); then 4000 more while the first stay open (what one more
#           idle connection costs once memory freed by idle connections can be reused). One run each,
#           after a settle (64 connections idle 3 s, then closed), so that memory a proxy gives back
#           when its clients go idle is not read as negative growth.
#   tls     full TLS handshakes per second and CPU per handshake, nginx (OpenSSL) against sluice
#           (rustls): ECDSA P-256 certificate, TLSv1.2 and TLSv1.3 allowed (s_time negotiates
#           TLSv1.3 with both), both offering resumption as sluice always does (nginx with
#           `ssl_session_cache shared:SSL:10m` and its default session tickets: each server sends
#           its TLS 1.3 tickets after every full handshake). The load
#           is 4 × cores `openssl s_time -new -www /idle` clients, each making one connection after
#           another: a full handshake, one `GET /idle HTTP/1.0`, the close (cpu_us counts all three).
#           sluice always offers resumption (a session cache, TLS 1.3 tickets) and wrk and h2load
#           both resume when the server lets them, so the client must never offer a session:
#           s_time -new makes a fresh TLS state per connection. The script checks that no
#           connection resumed (s_time marks each one) and that sluice counted as many handshakes as
#           s_time made connections (sluice_tls_handshakes_total{result="ok"} on its admin
#           listener). The clients share the cores and spend more CPU per handshake (≈ 1.1–1.4 ms,
#           OpenSSL 3.0) than either server, so handshakes/s is bound largely by them; cpu_us per
#           handshake is the steadier figure.
#   h2      HTTP/2 over TLS to /pass (h2load -c CONNECTIONS -m 10 -t THREADS, ALPN h2), nginx
#           (`listen … ssl http2`) and sluice. Each measured run is a fixed number of requests (the
#           slower warm-up run's rate × SECONDS, the same for both), so that any failed, errored or
#           non-2xx request stops the script (a run of -D SECONDS counts the streams still open at
#           its end as failed); cpu_us includes the CONNECTIONS handshakes at the start. p50 and p99
#           come from h2load's per-request log (--log-file: the time from a request's start to the
#           end of its response); h2load itself prints only their mean, sd and max.
#   h3      HTTP/3 against sluice alone (Debian has no HTTP/3 nginx, and its h2load 1.52 is built without
#           ngtcp2: `--npn-list=h3` still dials TCP): /pass on the TLS server, which also listens `quic`.
#           The load is scripts/h3-load.py on aioquic (8 connections × 10 streams), which these cores
#           hold to about 1 000-1 500 requests/s, so each round runs the same number of requests over
#           HTTP/3, then over HTTP/2 and HTTP/1.1 over TLS from h2load (-c8 -m10, --rps pacing them to
#           the rate HTTP/3 reached in its warm-up): sluice's CPU per request at the same load, same
#           process, same path. Then QUIC handshakes per second and CPU per handshake (8 aioquic
#           clients, a new connection per request to /idle; sluice's sluice_quic_handshakes_total must
#           count each one), and memory per idle connection: 1000 HTTP/3 connections and 1000 HTTP/2
#           ones (over TLS), one request each, idle 3 s, sluice's resident memory growth per
#           connection; then 1000 more while those stay open (each protocol in a sluice of its own,
#           started for it: the scenario's sluice holds memory its earlier runs left resident).
#           aioquic comes from the Python registry into target/py-aioquic, as scripts/test.sh makes it.
#   grpc    gRPC unary calls through grpc_pass, nginx (`listen … http2`, grpc_pass to an upstream block
#           with `keepalive 128`) and sluice (`http2 = true`, grpc_pass), both with the pass limit, each
#           its own process started for this scenario, in front of a python3-grpcio asyncio server
#           (Debian's; generic raw-bytes handlers: a 100-byte answer to any call). h2load -c8 -m10
#           over h2c POSTs one gRPC message (5-byte prefix, 100 bytes) with `content-type:
#           application/grpc` and `te: trailers`, paced (h2load --rps) to the same rate through
#           both proxies, 90 % of the slower warm-up's: CPU per call falls as the rate rises (more
#           calls share each wake-up), so the two are compared at one load; each run is that rate
#           × SECONDS calls. Before any load one call through each proxy from a python
#           gRPC client must end OK with the upstream's answer; in every run each call must be
#           answered 2xx (h2load sees no trailers), counted by the upstream (it counts the calls it
#           answered, all OK) and, through sluice, ended with grpc-status 0 in its metrics
#           (sluice_grpc_calls_total{code="OK"}). Prints calls/s, p50/p99 and cpu_us per call as
#           h2 does. Then memory per open stream: 500 server-streaming calls (the upstream sends one
#           message, then holds the call) opened at once through each proxy from a python gRPC client,
#           100 per connection, each one's first message read, 2 s idle: the growth of the proxy's
#           resident memory (all its processes) per call; then 500 more while those stay open.
#           The python upstream is the bottleneck (about 3 000–4 000 calls/s on these 2 cores).
#   topkeys what the most-limited-keys sketch (`[admin] top_keys`) costs the reject path: two more
#           sluice processes, the same configuration but for `top_keys` (10, the default, and 0: off),
#           the reject flood against each in turn (the order swapped every round), on one key
#           (/reject, every client 127.0.0.1) and on 100 000 keys (/rejectmany, keyed on a header as
#           `many`; 1r/1000s, the slowest leaky bucket, so that a key refused once stays refused for
#           the whole scenario: every request but each key's first is refused). Prints each side's req/s and cpu_us, the
#           ratios on/off of the same round and their medians; the target is cpu ≤ 1.03× (issue #28).
#   instructions  instructions per request (valgrind --tool=callgrind), pass, reject and HTTP/2,
#           nginx and sluice: figures that do not move with the machine's noise. Each system runs
#           alone under callgrind (nginx `master_process off`: one process; sluice SLUICE_WORKERS=1, the
#           release build; the same configuration as above, on fresh ports), twice per path: 500 and
#           500 + N requests (--requests N, default 2000) over one keep-alive connection from a python3
#           http.client loop outside valgrind (h2: HTTP/2 over TLS to /pass, h2load -c1 -m10, the
#           handshake cancelling out with the rest of the start). Per request = (Ir(500 + N) − Ir(500)) / N: start-up,
#           the first request (the upstream connection; on reject the bucket's one admission) and
#           shutdown cancel out; the upstream (not under valgrind) is not counted. Prints both and
#           sluice/nginx, then where sluice's instructions go, by part (hyper, tokio, the head gate,
#           request handling, limiter, upstream client, allocation, logging…: scripts/callgrind-groups.py).
#           Repeated runs agree within a few instructions; about 45 s in all (scripts/benchmarks.md,
#           "Instructions per request"). Running a server under callgrind is shared with
#           scripts/topkeys-instructions.sh (scripts/callgrind.sh).
# SLUICE_BENCH_KEEP=1 keeps the run's files (configs, logs, the callgrind profiles) and prints where.
# SLUICE_BENCH_BIN=PATH runs that sluice binary instead of building target/release/sluice
# (scripts/pgo.sh: its instrumented build, its optimised one).
# Then "where the CPU goes": for pass, reject, many, logged and topkeys, each system's user and kernel time
# per request, summed over all its runs (warm-ups included). Last, a summary: the medians of sluice's ratios against issue #17's targets, each "met" or "not
# met" (pass: cpu ≤ 0.90× nginx, r/s ≥ 1.0×, p99 ≤ 1.0×; reject: cpu ≤ 0.80×, p99 ≤ 1.0×; many:
# cpu ≤ 0.90×; idle: bytes ≤ nginx's, at the peak and further; h2: cpu ≤ nginx's; tls: handshakes/s
# ≥ nginx's; grpc: cpu per unary call ≤ nginx's (issue #45); topkeys: cpu ≤ 1.03× of sluice without the
# sketch), and the ratios against HAProxy and the others without a target.
# Only `logged` has an access log (emptied before each run); rejections are logged to a file.
# Defaults: 10 s per run, 5 rounds, 64 connections, 2 wrk/h2load threads: about 26 minutes in all on
# 2 cores (pass, tail and h3 3 × 6 runs each; reject, many, logged, tls, h2 and grpc 2 × 6 runs each; idle about
# 30 s; grpc's streams about 30 s; h3's handshakes and idle connections about 2 minutes; instructions about
# 45 s), plus the release build. Machines here are shared and noisy: read the
# medians and ratios, not single runs (or the instruction counts).
# --only SCENARIO runs one of them. Installs what is missing with apt-get (nginx, wrk, curl, haproxy,
# nghttp2-client for h2load, openssl, python3, valgrind, python3-grpcio); the idle scenario needs
# `ulimit -n` ≥ 9000.
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"
# Thousands of connections in the idle measurement: as many descriptors as allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

scenarios=(pass reject many logged gzip tail idle tls h2 h3 grpc topkeys instructions)
duration=10 pairs=5 connections=64 threads=2 only="" requests=2000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n $only && " ${scenarios[*]} " != *" $only "* ]]; then
  echo "bench.sh: unknown scenario $only (one of: ${scenarios[*]})" >&2
  exit 2
fi
wants() { [[ -z $only || $only == "$1" ]]; }
# die MESSAGE: stop the whole script, also from inside a $(…) (which then signals the main shell).
main_pid=$$
die() {
  echo "bench.sh: $*" >&2
  [[ $BASHPID != "$main_pid" ]] && kill -TERM "$main_pid"
  exit 1
}
trap 'exit 1' TERM INT

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v haproxy >/dev/null || need+=(haproxy)
command -v wrk >/dev/null || need+=(wrk)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v valgrind >/dev/null || need+=(valgrind)   # callgrind and callgrind_annotate
# grpc: Debian's python3 with grpcio, as upstream and client
{ wants grpc && ! /usr/bin/python3 -c 'import grpc' 2>/dev/null; } && need+=(python3-grpcio)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# h3: aioquic (not packaged by Debian) in the virtual environment scripts/test.sh makes too.
if wants h3 && ! "$repo/target/py-aioquic/bin/python" -c 'import aioquic' 2>/dev/null; then
  /usr/bin/python3 -c 'import ensurepip' 2>/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  /usr/bin/python3 -m venv "$repo/target/py-aioquic"
  "$repo/target/py-aioquic/bin/pip" install --quiet 'aioquic>=1.2,<2' || die "pip install aioquic failed"
fi

if [[ -n ${SLUICE_BENCH_BIN:-} ]]; then
  sluice_bin="$SLUICE_BENCH_BIN"
else
  cargo build --release --quiet
  sluice_bin="$repo/target/release/sluice"
fi

idle_n=4000
nofile=$(ulimit -n)
if wants idle && [[ $nofile -lt $((2 * idle_n + 1000)) ]]; then
  die "the idle scenario needs $((2 * idle_n + 1000)) open files, ulimit -n allows $nofile"
fi
# HAProxy reserves two descriptors per connection (client and server side): as many connections as
# the limit allows, at most 100 000 (8000 idle connections need 8000 of them).
hap_maxconn=$(((nofile - 200) / 2))
[[ $hap_maxconn -gt 100000 ]] && hap_maxconn=100000

work="$(mktemp -d -t sluice-bench.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n ${SLUICE_BENCH_KEEP:-} ]]; then
    echo "bench: the run's files (configs, logs, callgrind profiles) kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
up_port=$(free_port) ngx_port=$(free_port) slu_port=$(free_port) hap_port=$(free_port)
ngx_tls_port=$(free_port) slu_tls_port=$(free_port) slu_admin_port=$(free_port)

# --- an ECDSA P-256 certificate for 127.0.0.1, self-signed, for nginx and sluice alike ----------------
mkdir -p "$work/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -keyout "$work/tls/key.pem" -out "$work/tls/cert.pem" -subj "/CN=localhost" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null

nginx_common() {
  cat <<EOF
user root;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log error;
events { worker_connections 16384; }
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
# gzip: 32 KB of text that compresses as pages do (about 3:1 at level 1).
python3 -c 'import random
r = random.Random(48)
words = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9))) for _ in range(400)]
out = []
while sum(map(len, out)) < 32768:
    out.append(" ".join(r.choice(words) for _ in range(12)) + "\n")
print("".join(out)[:32768], end="")' >"$work/up/html/page.txt"
{
  nginx_common "$work/up"
  echo "worker_processes 1;"
  echo "http {"
  nginx_temp "$work/up"
  echo "  keepalive_requests 1000000;"
  echo "  server { listen 127.0.0.1:$up_port; root $work/up/html; location / { try_files /ok.txt =404; }"
  echo "    location = /gzip { try_files /page.txt =404; } }"
  echo "}"
} >"$work/up/nginx.conf"

# --- nginx in front ------------------------------------------------------------------------------
# burn_map → a map that costs nginx user time on each request that reads \$burn (the tail scenario's
# /passburn): 60 regular expressions that never match, tried in turn on the request's URI.
burn_map() {
  echo '  map $request_uri $burn {'
  for ((b = 1; b <= 60; b++)); do echo "    ~q${b}z(a|b)*\$ $b;"; done
  echo '    default 0;'
  echo '  }'
}
# ngx_front_conf DIR PORT TLS_PORT PROCESSES → nginx with limit_req in front of the upstream, its
# files under DIR; PROCESSES is its process model ("worker_processes auto;" here, one process for
# the instructions scenario).
ngx_front_conf() {
  nginx_common "$1"
  echo "$4"
  cat <<EOF
http {
$(nginx_temp "$1")
  keepalive_requests 1000000;
  upstream up { server 127.0.0.1:$up_port; keepalive 128; }
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=reject:10m rate=1r/m;
  limit_req_zone \$http_x_client zone=many:64m rate=100r/s;
  limit_req_status 429;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
$(burn_map)
  server {
    listen 127.0.0.1:$2;
    location /pass   { limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up; }
    location /passburn {
      limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up;
      proxy_set_header X-Burn \$burn; proxy_set_header Connection "";
    }
    location /reject { limit_req zone=reject; proxy_pass http://up; }
    location /many   { limit_req zone=many burst=100 nodelay; proxy_pass http://up; }
    location /idle   { return 200 "ok\n"; }
    location /gzip   { gzip on; gzip_types text/plain; gzip_comp_level 1; proxy_pass http://up; }
    location /logged {
      limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up;
      access_log $1/access.log combined;
    }
  }
  server {
    listen 127.0.0.1:$3 ssl http2;
    ssl_certificate $work/tls/cert.pem;
    ssl_certificate_key $work/tls/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    location /pass   { limit_req zone=pass burst=1000000 nodelay; proxy_pass http://up; }
    location /idle   { return 200 "ok\n"; }
  }
}
EOF
}
mkdir -p "$work/ngx"
ngx_front_conf "$work/ngx" "$ngx_port" "$ngx_tls_port" "worker_processes auto;" >"$work/ngx/nginx.conf"

# --- HAProxy in front: a plain reverse proxy, no limits ------------------------------------------
mkdir -p "$work/hap"
cat >"$work/hap/haproxy.cfg" <<EOF
global
  nbthread $(nproc)
  maxconn $hap_maxconn
defaults
  mode http
  maxconn $hap_maxconn
  option http-keep-alive
  http-reuse always
  timeout connect 10s
  timeout client 75s
  timeout server 75s
  timeout http-request 60s
  timeout http-keep-alive 75s
frontend front
  bind 127.0.0.1:$hap_port
  http-request return status 200 content-type text/plain string "ok\n" if { path /idle }
  default_backend up
backend up
  server up 127.0.0.1:$up_port
EOF

# --- sluice in front, the same limits -------------------------------------------------------------
# sluice_conf PORT TLS_PORT ADMIN_PORT → sluice's configuration, nginx's above in TOML.
sluice_conf() {
  cat <<EOF
limit_req_status = 429
# per worker thread; the default, 10240, already leaves room for the idle scenario's 8000 connections
worker_connections = 16384
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
listen = "127.0.0.1:$1"
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
path = "/gzip"
gzip = true
gzip_types = ["text/plain"]
gzip_comp_level = 1
[[servers.locations]]
path = "/logged"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
access_log = "$work/access.log"

[[servers]]
listen = ["127.0.0.1:$2 ssl", "127.0.0.1:$2 quic"]
ssl_certificate = "$work/tls/cert.pem"
ssl_certificate_key = "$work/tls/key.pem"
ssl_protocols = "TLSv1.2 TLSv1.3"
proxy_pass = "http://127.0.0.1:$up_port"
[[servers.locations]]
path = "/pass"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
[[servers.locations]]
path = "/idle"
return = { status = 200, body = "ok\n" }

[admin]
listen = "127.0.0.1:$3"
EOF
}
sluice_conf "$slu_port" "$slu_tls_port" "$slu_admin_port" >"$work/sluice.toml"

nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
nginx -p "$work/ngx/" -c "$work/ngx/nginx.conf" -e "$work/ngx/error.log" & pids+=($!)
ngx_master=$!
haproxy -f "$work/hap/haproxy.cfg" -db 2>"$work/hap/error.log" & pids+=($!)
hap_pid=$!
"$sluice_bin" --config "$work/sluice.toml" 2>"$work/sluice.err" & pids+=($!)
slu_pid=$!

wait_up() {
  for _ in $(seq 100); do
    curl -sk -o /dev/null "$1/pass" && return 0
    sleep 0.1
  done
  echo "bench.sh: nothing answers at $1" >&2
  tail -n 20 "$work"/*.err "$work"/*/error.log >&2 || true
  exit 1
}
wait_up "http://127.0.0.1:$up_port"
wait_up "http://127.0.0.1:$ngx_port"
wait_up "http://127.0.0.1:$hap_port"
wait_up "http://127.0.0.1:$slu_port"
wait_up "https://127.0.0.1:$ngx_tls_port"
wait_up "https://127.0.0.1:$slu_tls_port"
# Every proxy answers 200 on the paths the scenarios that must not fail use.
for url in "http://127.0.0.1:"{"$ngx_port","$hap_port","$slu_port"}{/pass,/idle} \
  "https://127.0.0.1:"{"$ngx_tls_port","$slu_tls_port"}{/pass,/idle}; do
  code="$(curl -sk -o /dev/null -w '%{http_code}' "$url" || true)"
  [[ $code == 200 ]] || die "$url answers $code, not 200"
done
# tls: s_time sends `GET /idle HTTP/1.0` without a Host header, and offers no ALPN.
for port in "$ngx_tls_port" "$slu_tls_port"; do
  status="$(printf 'GET /idle HTTP/1.0\r\n\r\n' | openssl s_client -quiet -connect "127.0.0.1:$port" 2>/dev/null | head -n 1 || true)"
  [[ $status == "HTTP/1."?" 200 "* ]] || die "s_time's request on port $port is answered: ${status:-nothing}"
done

# gzip: both compress /gzip for a client that asks (and the same bytes come back).
for port in "$ngx_port" "$slu_port"; do
  enc="$(curl -s -o "$work/gzip.$port" -w '%header{content-encoding}' -H 'Accept-Encoding: gzip' \
    "http://127.0.0.1:$port/gzip" || true)"
  [[ $enc == gzip ]] || die "port $port: /gzip is not compressed (${enc:-no Content-Encoding})"
  gzip -dc <"$work/gzip.$port" | cmp -s - "$work/up/html/page.txt" || die "port $port: /gzip is not the page"
done
echo 'wrk.headers["Accept-Encoding"] = "gzip"' >"$work/gzip.lua"

# nginx: the master and its workers (the workers are the master's children, all there once it answers).
ngx_procs() { echo "$ngx_master"; pgrep -P "$ngx_master"; }

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

# CPU time (user + system, in clock ticks) used so far by the processes PIDS, then its user-space
# part: "all user". /proc/PID/stat counts all of a process's threads, those that already ended
# included.
cpu_ticks() {
  local p
  for p in "$@"; do cat /proc/"$p"/stat 2>/dev/null; done |
    awk '{ sub(/^.*\) /, ""); t += $12 + $13; u += $12 } END { print t + 0, u + 0 }'
}
tck=$(getconf CLK_TCK)
# cpu_us TICKS N → microseconds of CPU per request (or handshake)
cpu_us() { awk -v t="$1" -v hz="$tck" -v n="$2" 'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }'; }
# ratio A B [DECIMALS] → A / B
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, (b > 0 ? a / b : 0) }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# col FILE N → the median of column N of FILE
col() { awk -v c="$2" '{ print $c }' "$1" | median; }

# run PORT PATH SCRIPT PIDS… → "rps p50 p99 non2xx cpu_us_per_request"
run() {
  local port=$1 path=$2 script=$3
  shift 3
  local out args=(-t"$threads" -c"$connections" -d"${duration}s" --latency)
  [[ -n $script ]] && args+=(-s "$script")
  local t0 t1 u0 u1
  : >"$work/access.log"
  : >"$work/ngx/access.log"
  read -r t0 u0 <<<"$(cpu_ticks "$@")"
  out="$(wrk "${args[@]}" "http://127.0.0.1:$port$path")" || die "wrk failed against port $port: $out"
  read -r t1 u1 <<<"$(cpu_ticks "$@")"
  local rps p50 p99 non2xx n
  rps="$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")"
  p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")"
  p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")"
  non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")"
  n="$(awk '/requests in/ { print $1 }' <<<"$out")"
  # (For "where the CPU goes": user ticks, all ticks, requests; warm-ups included.)
  echo "$((u1 - u0)) $((t1 - t0)) $n" >>"$work/split.$port.${path#/}"
  echo "$rps $p50 $p99 ${non2xx:-0} $(cpu_us $((t1 - t0)) "$n")"
}

# The summary's lines, collected as the scenarios end: "scenario what value target".
: >"$work/summary"
# target NAME WHAT RATIO OP LIMIT → one summary line (RATIO as printed, compared as printed)
target() {
  local verdict
  verdict="$(awk -v r="$3" -v op="$4" -v l="$5" 'BEGIN {
    ok = (op == "<=") ? (r + 0 <= l + 0) : (r + 0 >= l + 0); print (ok ? "met" : "not met") }')"
  printf '%-7s %-30s %7sx   target %s %sx   %s\n' "$1" "$2" "$3" "$4" "$5" "$verdict" >>"$work/summary"
}
# info NAME WHAT RATIO → a summary line without a target
info() { printf '%-7s %-30s %7sx   (no target)\n' "$1" "$2" "$3" >>"$work/summary"; }
# figure NAME WHAT VALUE → a measured value itself (no ratio, no target)
figure() { printf '%-7s %-30s %8s   (measured)\n' "$1" "$2" "$3" >>"$work/summary"; }

sluice_ver="$("$sluice_bin" --version 2>/dev/null | awk '{ print $2 }') ($(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
rustls_ver="$(awk '/^name = "rustls"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' "$repo/Cargo.lock" 2>/dev/null || true)"
echo "sluice vs nginx and HAProxy — one run: wrk/h2load -t$threads -c$connections, ${duration} s per run, rounds: $pairs"
echo "versions: sluice $sluice_ver with rustls ${rustls_ver:-?} (ring), nginx $(nginx -v 2>&1 | cut -d/ -f2)," \
  "HAProxy $(haproxy -v | awk 'NR == 1 { print $3 }'), $(openssl version | awk '{ print $1, $2 }')," \
  "h2load $(h2load --version | awk '{ print $2 }'), wrk $( (wrk -v 2>&1 || true) | awk 'NR == 1 { print $2 }')"
echo "machine: $(uname -sr), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "$(awk '/^MemTotal:/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"

# --- pass: nginx, HAProxy, sluice ---------------------------------------------------------------------
if wants pass; then
  mapfile -t ngx_pids < <(ngx_procs)
  # Warm up all three (connections, zone states, caches).
  run "$ngx_port" /pass "" "${ngx_pids[@]}" >/dev/null
  run "$hap_port" /pass "" "$hap_pid" >/dev/null
  run "$slu_port" /pass "" "$slu_pid" >/dev/null
  echo
  echo "== pass (HAProxy: a plain proxy, no limits)"
  fmt='%-6s %9s %5s %7s %6s  %9s %5s %7s %6s  %10s %5s %7s %6s  %5s %5s %5s %9s %9s %9s\n'
  # shellcheck disable=SC2059
  printf "$fmt" round "nginx r/s" p50ms p99ms cpu_us "hap r/s" p50ms p99ms cpu_us "sluice r/s" p50ms p99ms cpu_us \
    "r/s x" "p99 x" "cpu x" "r/s x hap" "p99 x hap" "cpu x hap"
  : >"$work/pass.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps n_p50 n_p99 n_bad n_cpu <<<"$(run "$ngx_port" /pass "" "${ngx_pids[@]}")"
    read -r h_rps h_p50 h_p99 h_bad h_cpu <<<"$(run "$hap_port" /pass "" "$hap_pid")"
    read -r s_rps s_p50 s_p99 s_bad s_cpu <<<"$(run "$slu_port" /pass "" "$slu_pid")"
    [[ $n_bad == 0 && $h_bad == 0 && $s_bad == 0 ]] ||
      die "pass: non-2xx answers (nginx $n_bad, haproxy $h_bad, sluice $s_bad)"
    row=("$n_rps" "$n_p50" "$n_p99" "$n_cpu" "$h_rps" "$h_p50" "$h_p99" "$h_cpu" "$s_rps" "$s_p50" "$s_p99" "$s_cpu"
      "$(ratio "$s_rps" "$n_rps")" "$(ratio "$s_p99" "$n_p99")" "$(ratio "$s_cpu" "$n_cpu")"
      "$(ratio "$s_rps" "$h_rps")" "$(ratio "$s_p99" "$h_p99")" "$(ratio "$s_cpu" "$h_cpu")")
    echo "${row[*]}" >>"$work/pass.ratios"
    row[0]="$(printf '%.0f' "$n_rps")" row[4]="$(printf '%.0f' "$h_rps")" row[8]="$(printf '%.0f' "$s_rps")"
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
  done
  med=()
  for c in $(seq 1 18); do med+=("$(col "$work/pass.ratios" "$c")"); done
  med[0]="$(printf '%.0f' "${med[0]}")" med[4]="$(printf '%.0f' "${med[4]}")" med[8]="$(printf '%.0f' "${med[8]}")"
  # shellcheck disable=SC2059
  printf "$fmt" median "${med[@]}"
  target pass "cpu/request vs nginx" "${med[14]}" "<=" 0.90
  target pass "req/s vs nginx" "${med[12]}" ">=" 1.00
  target pass "p99 vs nginx" "${med[13]}" "<=" 1.00
  info pass "cpu/request vs HAProxy" "${med[17]}"
  info pass "req/s vs HAProxy" "${med[15]}"
  info pass "p99 vs HAProxy" "${med[16]}"
fi

# --- reject, many, logged: nginx and sluice -------------------------------------------------------
for scenario in reject many logged gzip; do
  wants "$scenario" || continue
  script=""
  [[ $scenario == many ]] && script="$work/many.lua"
  [[ $scenario == gzip ]] && script="$work/gzip.lua"
  mapfile -t ngx_pids < <(ngx_procs)
  # Warm up both (connections, zone states, caches).
  run "$ngx_port" "/$scenario" "$script" "${ngx_pids[@]}" >/dev/null
  run "$slu_port" "/$scenario" "$script" "$slu_pid" >/dev/null
  echo
  echo "== $scenario"
  fmt='%-6s %10s %7s %7s %8s %6s   %10s %7s %7s %8s %6s   %6s %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" pair "nginx r/s" p50ms p99ms non2xx cpu_us "sluice r/s" p50ms p99ms non2xx cpu_us "r/s x" "p99 x" "cpu x"
  : >"$work/$scenario.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps n_p50 n_p99 n_bad n_cpu <<<"$(run "$ngx_port" "/$scenario" "$script" "${ngx_pids[@]}")"
    read -r s_rps s_p50 s_p99 s_bad s_cpu <<<"$(run "$slu_port" "/$scenario" "$script" "$slu_pid")"
    rps_x="$(ratio "$s_rps" "$n_rps")" p99_x="$(ratio "$s_p99" "$n_p99")" cpu_x="$(ratio "$s_cpu" "$n_cpu")"
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "$n_rps" "$n_p50" "$n_p99" "$n_bad" "$n_cpu" "$s_rps" "$s_p50" "$s_p99" "$s_bad" "$s_cpu" "$rps_x" "$p99_x" "$cpu_x"
    echo "$n_rps $n_p50 $n_p99 $n_cpu $s_rps $s_p50 $s_p99 $s_cpu $rps_x $p99_x $cpu_x" >>"$work/$scenario.ratios"
  done
  r="$work/$scenario.ratios"
  # shellcheck disable=SC2059
  printf "$fmt" median "$(col "$r" 1)" "$(col "$r" 2)" "$(col "$r" 3)" "" "$(col "$r" 4)" "$(col "$r" 5)" "$(col "$r" 6)" \
    "$(col "$r" 7)" "" "$(col "$r" 8)" "$(col "$r" 9)" "$(col "$r" 10)" "$(col "$r" 11)"
  case $scenario in
    reject)
      target reject "cpu/request vs nginx" "$(col "$r" 11)" "<=" 0.80
      target reject "p99 vs nginx" "$(col "$r" 10)" "<=" 1.00 ;;
    many) target many "cpu/request vs nginx" "$(col "$r" 11)" "<=" 0.90 ;;
    logged) info logged "cpu/request vs nginx" "$(col "$r" 11)" ;;
    gzip) target gzip "cpu/compressed response vs nginx" "$(col "$r" 11)" "<=" 1.00 ;;
  esac
done

# --- tail: does the pass p99 follow the CPU per request? ----------------------------------------------
if wants tail; then
  mapfile -t ngx_pids < <(ngx_procs)
  run "$ngx_port" /pass "" "${ngx_pids[@]}" >/dev/null
  run "$ngx_port" /passburn "" "${ngx_pids[@]}" >/dev/null
  run "$slu_port" /pass "" "$slu_pid" >/dev/null
  echo
  echo "== tail (nginx /pass; nginx+burn: /passburn, the same plus a 60-regex map per request; sluice /pass)"
  fmt='%-6s %9s %7s %6s  %9s %7s %6s  %10s %7s %6s  %9s %9s  %9s %9s\n'
  # shellcheck disable=SC2059
  printf "$fmt" round "nginx r/s" p99ms cpu_us "burn r/s" p99ms cpu_us "sluice r/s" p99ms cpu_us \
    "burn cpu x" "burn p99 x" "slu cpu x" "slu p99 x"
  : >"$work/tail.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps _ n_p99 n_bad n_cpu <<<"$(run "$ngx_port" /pass "" "${ngx_pids[@]}")"
    read -r b_rps _ b_p99 b_bad b_cpu <<<"$(run "$ngx_port" /passburn "" "${ngx_pids[@]}")"
    read -r s_rps _ s_p99 s_bad s_cpu <<<"$(run "$slu_port" /pass "" "$slu_pid")"
    [[ $n_bad == 0 && $b_bad == 0 && $s_bad == 0 ]] ||
      die "tail: non-2xx answers (nginx $n_bad, nginx+burn $b_bad, sluice $s_bad)"
    row=("$(printf '%.0f' "$n_rps")" "$n_p99" "$n_cpu" "$(printf '%.0f' "$b_rps")" "$b_p99" "$b_cpu"
      "$(printf '%.0f' "$s_rps")" "$s_p99" "$s_cpu" "$(ratio "$b_cpu" "$n_cpu")" "$(ratio "$b_p99" "$n_p99")"
      "$(ratio "$s_cpu" "$n_cpu")" "$(ratio "$s_p99" "$n_p99")")
    echo "${row[*]}" >>"$work/tail.ratios"
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
  done
  med=()
  for c in $(seq 1 13); do med+=("$(col "$work/tail.ratios" "$c")"); done
  # shellcheck disable=SC2059
  printf "$fmt" median "${med[@]}"
  info tail "nginx+burn cpu/request vs nginx" "${med[9]}"
  info tail "nginx+burn p99 vs nginx" "${med[10]}"
  info tail "sluice cpu/request vs nginx" "${med[11]}"
  info tail "sluice p99 vs nginx" "${med[12]}"
fi

# --- topkeys: the most-limited-keys sketch on and off, on the reject path ------------------------------
# topkeys_toml PORT ADMIN_PORT TOP_KEYS → a sluice configuration that differs only by its ports and top_keys.
topkeys_toml() {
  cat <<EOF
limit_req_status = 429
log_format = '\$remote_addr - \$remote_user [\$time_local] "\$request" \$status \$body_bytes_sent "\$http_referer" "\$http_user_agent"'
[zones.reject]
key = "\$binary_remote_addr"
size = "10m"
rate = "1r/1000s"
[zones.rejectmany]
key = "\$http_x_client"
size = "64m"
rate = "1r/1000s"
[[servers]]
listen = "127.0.0.1:$1"
proxy_pass = "http://127.0.0.1:$up_port"
[[servers.locations]]
path = "/reject"
limit_req = { zone = "reject" }
[[servers.locations]]
path = "/rejectmany"
limit_req = { zone = "rejectmany" }
[admin]
listen = "127.0.0.1:$2"
top_keys = $3
EOF
}
if wants topkeys; then
  tk_on_port=$(free_port) tk_off_port=$(free_port)
  topkeys_toml "$tk_on_port" "$(free_port)" 10 >"$work/topkeys-on.toml"
  topkeys_toml "$tk_off_port" "$(free_port)" 0 >"$work/topkeys-off.toml"
  "$sluice_bin" --config "$work/topkeys-on.toml" 2>"$work/topkeys-on.err" & pids+=($!)
  tk_on_pid=$!
  "$sluice_bin" --config "$work/topkeys-off.toml" 2>"$work/topkeys-off.err" & pids+=($!)
  tk_off_pid=$!
  for port in "$tk_on_port" "$tk_off_port"; do
    for _ in $(seq 100); do
      [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/reject" || true)" != 000 ]] && break
      sleep 0.1
    done
  done
  sed 's|"/many"|"/rejectmany"|' "$work/many.lua" >"$work/rejectmany.lua"
  echo
  echo "== topkeys (the reject flood, sluice with top_keys = 10 against the same with top_keys = 0)"
  fmt='%-11s %-6s %10s %7s %8s   %10s %7s %8s   %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" path round "on r/s" cpu_us non2xx "off r/s" cpu_us non2xx "r/s x" "cpu x"
  for path in /reject /rejectmany; do
    script=""
    [[ $path == /rejectmany ]] && script="$work/rejectmany.lua"
    run "$tk_on_port" "$path" "$script" "$tk_on_pid" >/dev/null
    run "$tk_off_port" "$path" "$script" "$tk_off_pid" >/dev/null
    r="$work/topkeys${path//\//.}.ratios"
    : >"$r"
    for ((i = 1; i <= pairs; i++)); do
      if ((i % 2)); then
        read -r a_rps _ _ a_bad a_cpu <<<"$(run "$tk_on_port" "$path" "$script" "$tk_on_pid")"
        read -r b_rps _ _ b_bad b_cpu <<<"$(run "$tk_off_port" "$path" "$script" "$tk_off_pid")"
      else
        read -r b_rps _ _ b_bad b_cpu <<<"$(run "$tk_off_port" "$path" "$script" "$tk_off_pid")"
        read -r a_rps _ _ a_bad a_cpu <<<"$(run "$tk_on_port" "$path" "$script" "$tk_on_pid")"
      fi
      rps_x="$(ratio "$a_rps" "$b_rps" 3)" cpu_x="$(ratio "$a_cpu" "$b_cpu" 3)"
      # shellcheck disable=SC2059
      printf "$fmt" "$path" "$i" "$a_rps" "$a_cpu" "$a_bad" "$b_rps" "$b_cpu" "$b_bad" "$rps_x" "$cpu_x"
      echo "$a_rps $a_cpu $b_rps $b_cpu $rps_x $cpu_x" >>"$r"
    done
    # shellcheck disable=SC2059
    printf "$fmt" "$path" median "$(col "$r" 1)" "$(col "$r" 2)" "" "$(col "$r" 3)" "$(col "$r" 4)" "" \
      "$(col "$r" 5)" "$(col "$r" 6)"
    target topkeys "cpu/request on vs off, $path" "$(col "$r" 6)" "<=" 1.03
    info topkeys "req/s on vs off, $path" "$(col "$r" 5)"
  done
fi

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
def batch(n):
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
        if not got.startswith(b"HTTP/1.1 200"):
            sys.exit(f"port {port}: {got[:40]!r}")
    time.sleep(3)
    return conns, (rss_kib() - before) * 1024 / n
# Settle first: 64 idle connections for 3 s, then closed, so that what the proxy frees or gives
# back once its clients go idle (memory the earlier scenarios left cached) is not counted as
# negative growth below.
settle, _ = batch(64)
for c in settle:
    c.close()
time.sleep(1)
first, a = batch(n)   # all at once: the peak, what the allocator keeps
second, b = batch(n)  # while the first idle: what one more idle connection costs
print(f"{a:.0f} {b:.0f}")
EOF
if wants idle; then
  mapfile -t ngx_pids < <(ngx_procs)
  read -r ngx_a ngx_b <<<"$(python3 "$work/idle.py" "$ngx_port" "$idle_n" "${ngx_pids[@]}")"
  read -r hap_a hap_b <<<"$(python3 "$work/idle.py" "$hap_port" "$idle_n" "$hap_pid")"
  read -r slu_a slu_b <<<"$(python3 "$work/idle.py" "$slu_port" "$idle_n" "$slu_pid")"
  echo
  echo "== idle (keep-alive connections, one request each, then idle 3 s; resident memory per connection)"
  fmt='%-42s %8s %8s %8s %8s %8s\n'
  # shellcheck disable=SC2059
  printf "$fmt" "" nginx haproxy sluice "x nginx" "x hap"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, first $idle_n (all at once: the peak)" "$ngx_a" "$hap_a" "$slu_a" \
    "$(ratio "$slu_a" "$ngx_a" 1)" "$(ratio "$slu_a" "$hap_a" 1)"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, $idle_n more while those idle" "$ngx_b" "$hap_b" "$slu_b" \
    "$(ratio "$slu_b" "$ngx_b" 1)" "$(ratio "$slu_b" "$hap_b" 1)"
  target idle "bytes/connection, peak" "$(ratio "$slu_a" "$ngx_a")" "<=" 1.00
  target idle "bytes/connection, further" "$(ratio "$slu_b" "$ngx_b")" "<=" 1.00
  info idle "bytes, peak vs HAProxy" "$(ratio "$slu_a" "$hap_a")"
  info idle "bytes, further vs HAProxy" "$(ratio "$slu_b" "$hap_b")"
fi

# --- tls: full handshakes per second ---------------------------------------------------------------
tls_clients=$((4 * $(nproc)))
# sluice's count of successful handshakes, from its metrics.
slu_handshakes() {
  curl -s "http://127.0.0.1:$slu_admin_port/metrics" |
    awk '/^sluice_tls_handshakes_total\{result="ok"\}/ { print $2 }'
}
# run_tls PORT PIDS… → "handshakes_per_s cpu_us_per_handshake"
run_tls() {
  local port=$1 i p t0 t1 s0 s1 w0 w1 n full resumed
  shift
  local spids=()
  s0="$(slu_handshakes)"
  read -r t0 _ <<<"$(cpu_ticks "$@")"
  w0=$(date +%s.%N)
  for ((i = 1; i <= tls_clients; i++)); do
    openssl s_time -connect "127.0.0.1:$port" -new -time "$duration" -www /idle >"$work/s_time.$i" 2>&1 &
    spids+=($!)
  done
  for p in "${spids[@]}"; do wait "$p" || die "tls: openssl s_time failed: $(tail -n 3 "$work"/s_time.*)"; done
  w1=$(date +%s.%N)
  read -r t1 _ <<<"$(cpu_ticks "$@")"
  s1="$(slu_handshakes)"
  n="$(cat "$work"/s_time.* | awk '/connections in .* real seconds/ { n += $1 } END { print n + 0 }')"
  # s_time prints one mark per connection: `*` a full handshake, `r` a resumed session.
  full="$(grep -hE '^[*rt3]+$' "$work"/s_time.* | tr -cd '*' | wc -c)"
  resumed="$(grep -hE '^[*rt3]+$' "$work"/s_time.* | tr -cd 'r' | wc -c)"
  [[ $n -gt 0 && $full -eq $n && $resumed -eq 0 ]] ||
    die "tls: port $port: $n connections, $full full handshakes, $resumed resumed"
  if [[ $port == "$slu_tls_port" && $((s1 - s0)) -ne $n ]]; then
    die "tls: sluice counted $((s1 - s0)) handshakes for $n connections"
  fi
  echo "$(awk -v n="$n" -v a="$w0" -v b="$w1" 'BEGIN { printf "%.1f", n / (b - a) }') $(cpu_us $((t1 - t0)) "$n")"
}
# what a handshake negotiates: protocol, cipher, key exchange
tls_params() {
  openssl s_client -brief -connect "127.0.0.1:$1" </dev/null 2>&1 |
    awk -F': ' '/^Protocol version/ { p = $2 } /^Ciphersuite/ { c = $2 } /^Server Temp Key/ { k = $2 }
      END { print p ", " c ", " k }'
}
if wants tls; then
  mapfile -t ngx_pids < <(ngx_procs)
  run_tls "$ngx_tls_port" "${ngx_pids[@]}" >/dev/null
  run_tls "$slu_tls_port" "$slu_pid" >/dev/null
  echo
  echo "== tls (full handshakes, ECDSA P-256, one HTTP/1.0 request each; $tls_clients openssl s_time -new clients)"
  echo "nginx:  $(tls_params "$ngx_tls_port")"
  echo "sluice: $(tls_params "$slu_tls_port")"
  fmt='%-6s %11s %7s   %11s %7s   %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" pair "nginx hs/s" cpu_us "sluice hs/s" cpu_us "hs/s x" "cpu x"
  : >"$work/tls.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_hs n_cpu <<<"$(run_tls "$ngx_tls_port" "${ngx_pids[@]}")"
    read -r s_hs s_cpu <<<"$(run_tls "$slu_tls_port" "$slu_pid")"
    row=("$n_hs" "$n_cpu" "$s_hs" "$s_cpu" "$(ratio "$s_hs" "$n_hs")" "$(ratio "$s_cpu" "$n_cpu")")
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
    echo "${row[*]}" >>"$work/tls.ratios"
  done
  r="$work/tls.ratios"
  # shellcheck disable=SC2059
  printf "$fmt" median "$(col "$r" 1)" "$(col "$r" 2)" "$(col "$r" 3)" "$(col "$r" 4)" "$(col "$r" 5)" "$(col "$r" 6)"
  target tls "handshakes/s vs nginx" "$(col "$r" 5)" ">=" 1.00
  info tls "cpu/handshake vs nginx" "$(col "$r" 6)"
fi

# --- h2: HTTP/2 over TLS ------------------------------------------------------------------------------
h2_streams=10
# run_h2 PORT REQUESTS PIDS… → "rps p50 p99 cpu_us_per_request"; REQUESTS 0: a warm-up of SECONDS
# (its in-flight streams at the end count as failed: not checked) that prints only its rate.
run_h2() {
  local port=$1 n=$2 t0 t1 out
  shift 2
  local args=(-c"$connections" -m"$h2_streams" -t"$threads" --log-file="$work/h2.log")
  if [[ $n -eq 0 ]]; then args+=(-D"$duration"); else args+=(-n"$n"); fi
  read -r t0 _ <<<"$(cpu_ticks "$@")"
  out="$(h2load "${args[@]}" "https://127.0.0.1:$port/pass" 2>&1)" || die "h2: h2load failed: $out"
  read -r t1 _ <<<"$(cpu_ticks "$@")"
  grep -q '^Application protocol: h2$' <<<"$out" || die "h2: port $port did not negotiate h2: $out"
  local rps
  rps="$(awk '/^finished in/ { print $4 }' <<<"$out")"
  if [[ $n -eq 0 ]]; then echo "$rps"; return; fi
  # requests: N total, N started, N done, N succeeded, 0 failed, 0 errored, 0 timeout
  # status codes: N 2xx, 0 3xx, 0 4xx, 0 5xx
  awk -v n="$n" '/^requests:/ { ok = ($2 == n && $6 == n && $8 == n && $10 == 0 && $12 == 0 && $14 == 0) }
    /^status codes:/ { st = ($3 == n && $5 == 0 && $7 == 0 && $9 == 0) }
    END { exit !(ok && st) }' <<<"$out" || die "h2: port $port: errors in a run of $n requests:
$(grep -E '^(requests|status codes):' <<<"$out")"
  local lat
  lat="$(awk '{ print $3 }' "$work/h2.log" | sort -n |
    awk '{ a[NR] = $1 } END { printf "%.3f %.3f", a[int(NR * 0.50 + 0.5)] / 1000, a[int(NR * 0.99 + 0.5)] / 1000 }')"
  echo "$rps $lat $(cpu_us $((t1 - t0)) "$n")"
}
if wants h2; then
  mapfile -t ngx_pids < <(ngx_procs)
  n_warm="$(run_h2 "$ngx_tls_port" 0 "${ngx_pids[@]}")"
  s_warm="$(run_h2 "$slu_tls_port" 0 "$slu_pid")"
  # The same number of requests for both: what the slower one made in SECONDS in its warm-up, in
  # whole rounds of the connections' streams.
  h2_n="$(awk -v a="$n_warm" -v b="$s_warm" -v d="$duration" -v q=$((connections * h2_streams)) \
    'BEGIN { r = (a < b ? a : b) * d; r = int(r / q) * q; print (r < q ? q : r) }')"
  echo
  echo "== h2 (h2load -c$connections -m$h2_streams -t$threads over TLS, $h2_n requests a run; p50/p99 from its --log-file)"
  fmt='%-6s %10s %7s %7s %6s   %10s %7s %7s %6s   %6s %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" pair "nginx r/s" p50ms p99ms cpu_us "sluice r/s" p50ms p99ms cpu_us "r/s x" "p99 x" "cpu x"
  : >"$work/h2.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps n_p50 n_p99 n_cpu <<<"$(run_h2 "$ngx_tls_port" "$h2_n" "${ngx_pids[@]}")"
    read -r s_rps s_p50 s_p99 s_cpu <<<"$(run_h2 "$slu_tls_port" "$h2_n" "$slu_pid")"
    row=("$n_rps" "$n_p50" "$n_p99" "$n_cpu" "$s_rps" "$s_p50" "$s_p99" "$s_cpu"
      "$(ratio "$s_rps" "$n_rps")" "$(ratio "$s_p99" "$n_p99")" "$(ratio "$s_cpu" "$n_cpu")")
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
    echo "${row[*]}" >>"$work/h2.ratios"
  done
  r="$work/h2.ratios"
  med=()
  for c in $(seq 1 11); do med+=("$(col "$r" "$c")"); done
  # shellcheck disable=SC2059
  printf "$fmt" median "${med[@]}"
  target h2 "cpu/request vs nginx" "${med[10]}" "<=" 1.00
  info h2 "req/s vs nginx" "${med[8]}"
  info h2 "p99 vs nginx" "${med[9]}"
fi

# --- h3: HTTP/3 beside HTTP/2 and HTTP/1.1 over TLS, sluice alone ----------------------------------------
# No HTTP/3 nginx here (Debian's is built without it) and no HTTP/3 h2load (Debian's 1.52 lacks ngtcp2):
# the load is scripts/h3-load.py on aioquic, which on these cores tops out near 1 000-1 500 requests/s,
# far below sluice. So each round runs the same number of requests over HTTP/3 (aioquic), then over
# HTTP/2 and HTTP/1.1 over TLS (h2load, -c/-m as aioquic's, --rps pacing them to the rate the HTTP/3 run
# reached): CPU per request compared at the same load, on the same sluice process and path (/pass on its
# TLS server, which also listens `quic`).
h3_py="$repo/target/py-aioquic/bin/python"
h3_conns=8 h3_streams=10 h3_idle_n=1000
# slu_quic_ok → sluice's successful QUIC handshakes so far (its metrics).
slu_quic_ok() {
  curl -s "http://127.0.0.1:$slu_admin_port/metrics" |
    awk '/^sluice_quic_handshakes_total\{result="ok"\}/ { print $2 }'
}
# json FIELDS… → those fields of the JSON line on stdin, space-separated
json() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(*(d[k] for k in sys.argv[1:]))' "$@"; }
# run_h3 N → "rps p50 p99 cpu_us": N requests over HTTP/3
run_h3() {
  local n=$1 t0 t1 out ok failed rps p50 p99
  read -r t0 _ <<<"$(cpu_ticks "$slu_pid")"
  out="$("$h3_py" "$repo/scripts/h3-load.py" load "127.0.0.1:$slu_tls_port" /pass \
    --connections "$h3_conns" --streams "$h3_streams" --requests "$n")" || die "h3: h3-load.py failed: $out"
  read -r t1 _ <<<"$(cpu_ticks "$slu_pid")"
  read -r ok failed rps p50 p99 <<<"$(json ok failed rps p50_ms p99_ms <<<"$out")"
  [[ $ok -eq $n && $failed -eq 0 ]] || die "h3: $ok of $n requests answered 2xx ($failed failed)"
  echo "$rps $p50 $p99 $(cpu_us $((t1 - t0)) "$n")"
}
# run_paced PROTOCOL N RATE → "rps p50 p99 cpu_us": N requests over TLS with h2load at RATE requests/s
# in all; PROTOCOL h2 or h1 (HTTP/1.1: --h1, one request at a time per connection).
run_paced() {
  local n=$2 t0 t1 out per=$((($3 + h3_conns - 1) / h3_conns))
  local args=(-c"$h3_conns" -m"$h3_streams" -t1 -n"$n" --rps="$per" --log-file="$work/h3.log")
  [[ $1 == h1 ]] && args+=(--h1)
  read -r t0 _ <<<"$(cpu_ticks "$slu_pid")"
  out="$(h2load "${args[@]}" "https://127.0.0.1:$slu_tls_port/pass" 2>&1)" || die "h3: h2load failed: $out"
  read -r t1 _ <<<"$(cpu_ticks "$slu_pid")"
  awk -v n="$n" '/^status codes:/ { st = ($3 == n) } END { exit !st }' <<<"$out" ||
    die "h3: h2load $1: not all $n answered 2xx: $(grep -E '^(requests|status codes):' <<<"$out")"
  local rps lat
  rps="$(awk '/^finished in/ { print $4 }' <<<"$out")"
  lat="$(awk '{ print $3 }' "$work/h3.log" | sort -n |
    awk '{ a[NR] = $1 } END { printf "%.3f %.3f", a[int(NR * 0.50 + 0.5)] / 1000, a[int(NR * 0.99 + 0.5)] / 1000 }')"
  echo "$rps $lat $(cpu_us $((t1 - t0)) "$n")"
}
# run_handshakes SECONDS → "handshakes_per_s cpu_us_per_handshake": a new QUIC connection per request
run_handshakes() {
  local t0 t1 q0 q1 out done failed rate
  q0="$(slu_quic_ok)"
  read -r t0 _ <<<"$(cpu_ticks "$slu_pid")"
  out="$("$h3_py" "$repo/scripts/h3-load.py" handshakes "127.0.0.1:$slu_tls_port" /idle \
    --concurrency "$h3_conns" --seconds "$1")" || die "h3: h3-load.py handshakes failed: $out"
  read -r t1 _ <<<"$(cpu_ticks "$slu_pid")"
  q1="$(slu_quic_ok)"
  read -r done failed rate <<<"$(json handshakes failed rate <<<"$out")"
  [[ $done -gt 0 && $failed -eq 0 && $((q1 - q0)) -eq $done ]] ||
    die "h3: $done handshakes answered, $failed failed, sluice counted $((q1 - q0))"
  echo "$rate $(cpu_us $((t1 - t0)) "$done")"
}
# h3_idle PROTOCOL → "peak further": bytes per idle connection over h3 or h2, in a sluice of its own
# started for it (the same configuration on ports of its own): memory an earlier run left resident
# would otherwise be reused by these connections and not counted.
h3_idle() {
  local plain tls admin pid out
  plain=$(free_port) tls=$(free_port) admin=$(free_port)
  sluice_conf "$plain" "$tls" "$admin" >"$work/idle-$1.toml"
  "$sluice_bin" --config "$work/idle-$1.toml" 2>"$work/idle-$1.err" &
  pid=$!
  # (Each failure stops this sluice first: it is not among the processes the exit trap stops.)
  if ! (wait_up "https://127.0.0.1:$tls") >&2; then
    kill "$pid"
    die "h3: the sluice for the $1 idle run did not start"
  fi
  out="$("$h3_py" "$repo/scripts/h3-load.py" idle "$1" "127.0.0.1:$tls" /idle "$h3_idle_n" "$pid")" ||
    { kill "$pid"; die "h3: h3-load.py idle $1 failed: $out"; }
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$out"
}
if wants h3; then
  # The same number of requests for all three: what HTTP/3 made in SECONDS in a warm-up of 2000.
  read -r h3_warm _ <<<"$(run_h3 2000)"
  h3_n="$(awk -v r="$h3_warm" -v d="$duration" -v q=$((h3_conns * h3_streams)) \
    'BEGIN { n = int(r * d / q) * q; print (n < q ? q : n) }')"
  h3_rate="$(printf '%.0f' "$h3_warm")"
  run_paced h2 "$h3_conns" "$h3_rate" >/dev/null
  run_paced h1 "$h3_conns" "$h3_rate" >/dev/null
  echo
  echo "== h3 (sluice alone, /pass over TLS: HTTP/3 by aioquic (scripts/h3-load.py, $h3_conns connections ×" \
    "$h3_streams streams), then HTTP/2 and HTTP/1.1 by h2load paced to its rate ($h3_rate r/s); $h3_n requests a run)"
  fmt='%-6s %8s %7s %7s %6s   %8s %7s %7s %6s   %8s %7s %7s %6s   %9s %9s\n'
  # shellcheck disable=SC2059
  printf "$fmt" round "h3 r/s" p50ms p99ms cpu_us "h2 r/s" p50ms p99ms cpu_us "h1 r/s" p50ms p99ms cpu_us \
    "cpu x h2" "cpu x h1"
  : >"$work/h3.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r a_rps a_p50 a_p99 a_cpu <<<"$(run_h3 "$h3_n")"
    read -r b_rps b_p50 b_p99 b_cpu <<<"$(run_paced h2 "$h3_n" "$h3_rate")"
    read -r c_rps c_p50 c_p99 c_cpu <<<"$(run_paced h1 "$h3_n" "$h3_rate")"
    row=("$a_rps" "$a_p50" "$a_p99" "$a_cpu" "$b_rps" "$b_p50" "$b_p99" "$b_cpu" "$c_rps" "$c_p50" "$c_p99" "$c_cpu"
      "$(ratio "$a_cpu" "$b_cpu")" "$(ratio "$a_cpu" "$c_cpu")")
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
    echo "${row[*]}" >>"$work/h3.ratios"
  done
  r="$work/h3.ratios"
  med=()
  for c in $(seq 1 14); do med+=("$(col "$r" "$c")"); done
  # shellcheck disable=SC2059
  printf "$fmt" median "${med[@]}"
  run_handshakes 2 >/dev/null
  echo
  echo "== h3 handshakes (a new QUIC connection per request: full handshake, GET /idle, close; $h3_conns aioquic clients)"
  fmt='%-6s %10s %10s\n'
  # shellcheck disable=SC2059
  printf "$fmt" run "hs/s" cpu_us
  : >"$work/h3hs.ratios"
  for ((i = 1; i <= 3; i++)); do
    read -r hs cpu <<<"$(run_handshakes "$(((duration + 1) / 2))")"
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "$hs" "$cpu"
    echo "$hs $cpu" >>"$work/h3hs.ratios"
  done
  # shellcheck disable=SC2059
  printf "$fmt" median "$(col "$work/h3hs.ratios" 1)" "$(col "$work/h3hs.ratios" 2)"
  read -r q_a q_b <<<"$(h3_idle h3)"
  read -r t_a t_b <<<"$(h3_idle h2)"
  echo
  echo "== h3 idle (connections with one request each, then idle 3 s; sluice's resident memory per connection)"
  fmt='%-42s %8s %8s %8s\n'
  # shellcheck disable=SC2059
  printf "$fmt" "" h3 h2 "h3 x h2"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, first $h3_idle_n (the peak)" "$q_a" "$t_a" "$(ratio "$q_a" "$t_a" 1)"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, $h3_idle_n more while those idle" "$q_b" "$t_b" "$(ratio "$q_b" "$t_b" 1)"
  figure h3 "cpu_us/req h3" "${med[3]}"
  figure h3 "cpu_us/req h2, same rate" "${med[7]}"
  figure h3 "cpu_us/req h1 TLS, same rate" "${med[11]}"
  info h3 "cpu/request h3 vs h2" "${med[12]}"
  info h3 "cpu/request h3 vs h1 (TLS)" "${med[13]}"
  figure h3 "req/s h3 (aioquic-bound)" "${med[0]}"
  figure h3 "handshakes/s h3 (client-bound)" "$(col "$work/h3hs.ratios" 1)"
  figure h3 "cpu_us/handshake h3" "$(col "$work/h3hs.ratios" 2)"
  figure h3 "bytes/idle conn h3, peak" "$q_a"
  figure h3 "bytes/idle conn h2, peak" "$t_a"
  info h3 "bytes/idle h3 vs h2, peak" "$(ratio "$q_a" "$t_a")"
  info h3 "bytes/idle h3 vs h2, further" "$(ratio "$q_b" "$t_b")"
fi

# --- grpc: unary calls through grpc_pass (sluice) and nginx's grpc_pass; memory per open stream -----------
# Its own upstream and proxies, started here: scripts/grpc-bench.py's python3-grpcio asyncio server (run
# by the python that has Debian's grpcio, not whichever python3 comes first in PATH), nginx with
# grpc_pass to an upstream block with kept connections, sluice with the same limit_req and grpc_pass.
grpc_py=/usr/bin/python3 grpc_connections=8 grpc_streams=10 grpc_hold=500
# one gRPC message of 100 bytes: uncompressed, its length (big-endian, 4 bytes), the bytes
printf '\0\0\0\0\144%0100d' 0 >"$work/grpc_req.bin"
# grpc_slu_calls → sluice's gRPC calls so far: "all OK" (sluice_grpc_calls_total, every code and OK)
grpc_slu_calls() {
  curl -s "http://127.0.0.1:$grpc_admin_port/metrics" |
    awk '/^sluice_grpc_calls_total\{/ { a += $2; if ($1 ~ /code="OK"/) ok += $2 } END { print a + 0, ok + 0 }'
}
# run_grpc PORT CALLS PIDS… → "calls_per_s p50 p99 cpu_us_per_call"; CALLS 0: a warm-up of SECONDS
# that prints only its rate. A measured run must see every call answered 2xx by h2load, counted by
# the upstream, and (sluice) ended grpc-status 0 in sluice's metrics.
run_grpc() {
  local port=$1 n=$2 t0 t1 out u0 u1 m0 m1
  shift 2
  local args=(-c"$grpc_connections" -m"$grpc_streams" -t"$threads" --log-file="$work/grpc.log"
    -d "$work/grpc_req.bin" -H 'content-type: application/grpc' -H 'te: trailers')
  if [[ $n -eq 0 ]]; then
    args+=(-D"$duration")
  else
    args+=(-n"$n" --rps="$(((grpc_rate + grpc_connections - 1) / grpc_connections))")
  fi
  u0="$("$grpc_py" "$repo/scripts/grpc-bench.py" count "$grpc_up_port")" m0="$(grpc_slu_calls)"
  read -r t0 _ <<<"$(cpu_ticks "$@")"
  out="$(h2load "${args[@]}" "http://127.0.0.1:$port/b.B/U" 2>&1)" || die "grpc: h2load failed: $out"
  read -r t1 _ <<<"$(cpu_ticks "$@")"
  u1="$("$grpc_py" "$repo/scripts/grpc-bench.py" count "$grpc_up_port")" m1="$(grpc_slu_calls)"
  local rps
  rps="$(awk '/^finished in/ { print $4 }' <<<"$out")"
  if [[ $n -eq 0 ]]; then echo "$rps"; return; fi
  awk -v n="$n" '/^requests:/ { ok = ($2 == n && $6 == n && $8 == n && $10 == 0 && $12 == 0 && $14 == 0) }
    /^status codes:/ { st = ($3 == n && $5 == 0 && $7 == 0 && $9 == 0) }
    END { exit !(ok && st) }' <<<"$out" || die "grpc: port $port: errors in a run of $n calls:
$(grep -E '^(requests|status codes):' <<<"$out")"
  [[ $((u1 - u0)) -eq $n ]] || die "grpc: port $port: the upstream answered $((u1 - u0)) of $n calls"
  if [[ $port == "$grpc_slu_port" ]]; then
    read -r a0 ok0 <<<"$m0"
    read -r a1 ok1 <<<"$m1"
    [[ $((a1 - a0)) -eq $n && $((ok1 - ok0)) -eq $n ]] ||
      die "grpc: sluice ended $((a1 - a0)) of $n calls, $((ok1 - ok0)) with grpc-status 0"
  fi
  local lat
  lat="$(awk '{ print $3 }' "$work/grpc.log" | sort -n |
    awk '{ a[NR] = $1 } END { printf "%.3f %.3f", a[int(NR * 0.50 + 0.5)] / 1000, a[int(NR * 0.99 + 0.5)] / 1000 }')"
  echo "$rps $lat $(cpu_us $((t1 - t0)) "$n")"
}
if wants grpc; then
  grpc_up_port=$(free_port) grpc_ngx_port=$(free_port) grpc_slu_port=$(free_port) grpc_admin_port=$(free_port)
  mkdir -p "$work/grpc-ngx"
  {
    nginx_common "$work/grpc-ngx"
    echo "worker_processes auto;"
    cat <<EOF
http {
$(nginx_temp "$work/grpc-ngx")
  keepalive_requests 1000000;
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  upstream grpcup { server 127.0.0.1:$grpc_up_port; keepalive 128; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$grpc_ngx_port http2;
    location / { limit_req zone=pass burst=1000000 nodelay; grpc_pass grpc://grpcup; }
  }
}
EOF
  } >"$work/grpc-ngx/nginx.conf"
  cat >"$work/grpc-sluice.toml" <<EOF
[zones.pass]
key = "\$binary_remote_addr"
size = "10m"
rate = "1000000r/s"
[[servers]]
listen = "127.0.0.1:$grpc_slu_port"
http2 = true
[[servers.locations]]
path = "/"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
grpc_pass = "grpc://127.0.0.1:$grpc_up_port"
[admin]
listen = "127.0.0.1:$grpc_admin_port"
EOF
  "$grpc_py" "$repo/scripts/grpc-bench.py" serve "$grpc_up_port" 2>"$work/grpc-up.err" & pids+=($!)
  nginx -p "$work/grpc-ngx/" -c "$work/grpc-ngx/nginx.conf" -e "$work/grpc-ngx/error.log" & pids+=($!)
  grpc_ngx_master=$!
  "$sluice_bin" --config "$work/grpc-sluice.toml" 2>"$work/grpc-sluice.err" & pids+=($!)
  grpc_slu_pid=$!
  # Before any load: one real gRPC call through each proxy ends OK with the upstream's answer.
  for port in "$grpc_ngx_port" "$grpc_slu_port"; do
    for try in $(seq 100); do
      "$grpc_py" "$repo/scripts/grpc-bench.py" check "$port" 2>"$work/grpc-check.err" && break
      [[ $try -eq 100 ]] && die "grpc: no gRPC call through port $port ends OK: $(tail -n 3 "$work/grpc-check.err")"
      sleep 0.1
    done
  done
  mapfile -t grpc_ngx_pids < <(echo "$grpc_ngx_master"; pgrep -P "$grpc_ngx_master")
  n_warm="$(run_grpc "$grpc_ngx_port" 0 "${grpc_ngx_pids[@]}")"
  s_warm="$(run_grpc "$grpc_slu_port" 0 "$grpc_slu_pid")"
  # The same rate and number of calls for both: 90 % of the slower warm-up's rate, for SECONDS.
  grpc_rate="$(awk -v a="$n_warm" -v b="$s_warm" 'BEGIN { printf "%d", (a < b ? a : b) * 0.9 }')"
  grpc_n="$(awk -v r="$grpc_rate" -v d="$duration" -v q=$((grpc_connections * grpc_streams)) \
    'BEGIN { r = r * d; r = int(r / q) * q; print (r < q ? q : r) }')"
  echo
  echo "== grpc (unary calls, one 100-byte message each way: h2load -c$grpc_connections -m$grpc_streams" \
    "-t$threads over h2c, paced to $grpc_rate calls/s, $grpc_n calls a run; upstream python3-grpcio $("$grpc_py" -c 'import grpc; print(grpc.__version__)') asyncio)"
  fmt='%-6s %10s %7s %7s %6s   %10s %7s %7s %6s   %6s %6s %6s\n'
  # shellcheck disable=SC2059
  printf "$fmt" pair "nginx c/s" p50ms p99ms cpu_us "sluice c/s" p50ms p99ms cpu_us "c/s x" "p99 x" "cpu x"
  : >"$work/grpc.ratios"
  for ((i = 1; i <= pairs; i++)); do
    read -r n_rps n_p50 n_p99 n_cpu <<<"$(run_grpc "$grpc_ngx_port" "$grpc_n" "${grpc_ngx_pids[@]}")"
    read -r s_rps s_p50 s_p99 s_cpu <<<"$(run_grpc "$grpc_slu_port" "$grpc_n" "$grpc_slu_pid")"
    row=("$n_rps" "$n_p50" "$n_p99" "$n_cpu" "$s_rps" "$s_p50" "$s_p99" "$s_cpu"
      "$(ratio "$s_rps" "$n_rps")" "$(ratio "$s_p99" "$n_p99")" "$(ratio "$s_cpu" "$n_cpu")")
    # shellcheck disable=SC2059
    printf "$fmt" "$i" "${row[@]}"
    echo "${row[*]}" >>"$work/grpc.ratios"
  done
  r="$work/grpc.ratios"
  med=()
  for c in $(seq 1 11); do med+=("$(col "$r" "$c")"); done
  # shellcheck disable=SC2059
  printf "$fmt" median "${med[@]}"
  target grpc "cpu/unary call vs nginx" "${med[10]}" "<=" 1.00
  info grpc "calls/s vs nginx" "${med[8]}"
  info grpc "p99 vs nginx" "${med[9]}"

  read -r ngx_a ngx_b <<<"$("$grpc_py" "$repo/scripts/grpc-bench.py" hold "$grpc_ngx_port" "$grpc_hold" "${grpc_ngx_pids[@]}")"
  read -r slu_a slu_b <<<"$("$grpc_py" "$repo/scripts/grpc-bench.py" hold "$grpc_slu_port" "$grpc_hold" "$grpc_slu_pid")"
  [[ -n $ngx_b && -n $slu_b ]] || die "grpc: the held calls failed"
  echo
  echo "== grpc streams (server-streaming calls held open after one message, 100 per client connection;" \
    "resident memory per call)"
  fmt='%-44s %8s %8s %8s\n'
  # shellcheck disable=SC2059
  printf "$fmt" "" nginx sluice "x nginx"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, first $grpc_hold (all at once: the peak)" "$ngx_a" "$slu_a" "$(ratio "$slu_a" "$ngx_a")"
  # shellcheck disable=SC2059
  printf "$fmt" "bytes, $grpc_hold more while those are open" "$ngx_b" "$slu_b" "$(ratio "$slu_b" "$ngx_b")"
  info grpc "bytes/open stream, peak" "$(ratio "$slu_a" "$ngx_a")"
  info grpc "bytes/open stream, further" "$(ratio "$slu_b" "$ngx_b")"
fi

# --- instructions: per request, under callgrind -------------------------------------------------------
# ir_client PORT PATH COUNT: COUNT requests over one keep-alive connection, every one answered as the
# scenario wants (pass 200; reject 429, but for the first: the bucket's one admission).
cat >"$work/ir_client.py" <<'EOF'
import http.client, sys
port, path, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
want = 429 if path == "/reject" else 200
c = http.client.HTTPConnection("127.0.0.1", port)
for i in range(count):
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    if r.status != want and not (i == 0 and r.status == 200):
        sys.exit(f"port {port} {path}: request {i} answered {r.status}, not {want}")
    if r.will_close:
        sys.exit(f"port {port} {path}: request {i} closed the connection")
EOF
if wants instructions; then
  # shellcheck source=scripts/callgrind.sh disable=SC1091
  source "$repo/scripts/callgrind.sh"
  ir_small=500 ir_big=$((500 + requests))
  # h2_client PORT COUNT: COUNT HTTP/2 requests to /pass over TLS, one connection, ten streams at a
  # time, every one answered 2xx.
  h2_client() {
    local out
    out="$(h2load -c1 -m10 -n"$2" "https://127.0.0.1:$1/pass" 2>&1)" || return 1
    grep -q "status codes: $2 2xx" <<<"$out" || { echo "h2load: $out" >&2; return 1; }
  }
  # ir SYSTEM PATH COUNT → the instructions of one run: a fresh server under callgrind, COUNT requests
  # (PATH h2: HTTP/2 over TLS to /pass).
  ir() {
    local port tls_port out="$work/callgrind.$1.${2#/}.$3" client
    port=$(free_port) tls_port=$(free_port)
    if [[ $2 == h2 ]]; then
      client=(h2_client "$tls_port" "$3")
    else
      client=(python3 "$work/ir_client.py" "$port" "$2" "$3")
    fi
    if [[ $1 == nginx ]]; then
      mkdir -p "$work/ir-ngx"
      ngx_front_conf "$work/ir-ngx" "$port" "$tls_port" "master_process off;" >"$work/ir-ngx/nginx.conf"
      callgrind_ir "$out" "http://127.0.0.1:$port/idle" "${client[@]}" -- \
        nginx -p "$work/ir-ngx/" -c "$work/ir-ngx/nginx.conf" -e "$work/ir-ngx/error.log" ||
        die "instructions: nginx $2 failed"
    else
      sluice_conf "$port" "$tls_port" "$(free_port)" >"$work/ir-sluice.toml"
      SLUICE_WORKERS=1 callgrind_ir "$out" "http://127.0.0.1:$port/idle" "${client[@]}" -- \
        "$sluice_bin" --config "$work/ir-sluice.toml" ||
        die "instructions: sluice $2 failed"
    fi
  }
  echo
  echo "== instructions (callgrind, one process / SLUICE_WORKERS=1, one keep-alive connection (h2: HTTP/2" \
    "over TLS to /pass, h2load -c1 -m10); per request: (Ir of $ir_big requests − Ir of $ir_small) / $requests)"
  fmt='%-8s %12s %12s %10s\n'
  # shellcheck disable=SC2059
  printf "$fmt" path "nginx Ir/req" "sluice Ir/req" "sluice x"
  for path in /pass /reject h2; do
    declare -A per=()
    for sys in nginx sluice; do
      small=$(ir "$sys" "$path" "$ir_small")
      big=$(ir "$sys" "$path" "$ir_big")
      per[$sys]=$(((big - small) / requests))
    done
    # shellcheck disable=SC2059
    printf "$fmt" "$path" "${per[nginx]}" "${per[sluice]}" "$(ratio "${per[sluice]}" "${per[nginx]}")"
    info instr "Ir/request ${path#/} vs nginx" "$(ratio "${per[sluice]}" "${per[nginx]}")"
  done
  echo
  echo "== instructions: where sluice's go (scripts/callgrind-groups.py: shared code charged to its callers)"
  python3 "$repo/scripts/callgrind-groups.py" "$requests" \
    pass "$work/callgrind.sluice.pass.$ir_big" "$work/callgrind.sluice.pass.$ir_small" \
    reject "$work/callgrind.sluice.reject.$ir_big" "$work/callgrind.sluice.reject.$ir_small"
fi

if ls "$work"/split.* >/dev/null 2>&1; then
  echo
  echo "== where the CPU goes (user and kernel time per request, summed over every run of the scenario)"
  printf '%-11s %-11s %9s %9s %9s %6s\n' scenario system user_us kernel_us total_us user%
  rows=()
  for scenario in pass reject many logged gzip; do
    for sys in nginx:$ngx_port haproxy:$hap_port sluice:$slu_port; do rows+=("$scenario:$sys"); done
  done
  if wants topkeys; then
    for scenario in reject rejectmany; do rows+=("$scenario:top-on:$tk_on_port" "$scenario:top-off:$tk_off_port"); done
  fi
  for row in "${rows[@]}"; do
    IFS=: read -r scenario name port <<<"$row"
    f="$work/split.$port.$scenario"
    [[ -s $f ]] || continue
    awk -v s="$scenario" -v name="$name" -v hz="$tck" '{ u += $1; t += $2; n += $3 } END {
      printf "%-11s %-11s %9.2f %9.2f %9.2f %5.0f%%\n", s, name, u * 1e6 / hz / n, (t - u) * 1e6 / hz / n,
        t * 1e6 / hz / n, (t > 0 ? 100 * u / t : 0) }' "$f"
  done
fi

echo
echo "== summary (sluice's medians from the tables above against their targets: issue #17's; topkeys: issue #28's; grpc: issue #45's)"
cat "$work/summary"
