#!/usr/bin/env bash
# h2-flood.sh — HTTP/2 frame floods against sluice and against nginx, side by side.
#
# Usage:
#   scripts/h2-flood.sh [--rounds N] [--seconds S] [--kinds K,K,…] [--sluice-bin PATH]
#                       [--nginx-log-level LEVEL] [--keep]
#
#   --rounds N           measurements of each kind on each server (3); the table shows medians
#   --seconds S          the longest one flood lasts (3): a server that never closes the
#                        connection burns S seconds of it
#   --kinds K,K,…        some of: ping settings window_update priority rst_stream empty_data
#                        headers_empty continuation rapid_reset unknown (all of them)
#   --sluice-bin PATH    measure this sluice binary instead of building target/release/sluice
#                        (an older build, to compare)
#   --nginx-log-level L  nginx's error_log level (info, sluice's default: nginx's flood lines are
#                        at info; with `error`, nginx's default, it writes none of them)
#   --keep               keep the work directory (configurations, logs, raw results)
#
# For each kind, each server and each round: a fresh server on free loopback ports in its own
# directory, then one flood client (tests/it/h2/flood.py: an h2c connection, one valid request
# answered, then frames of that kind as fast as it can, reading all the server sends) until the
# server closes the connection or --seconds pass. Measured for each flood:
#   closed   seconds from the flood's start until the server closed the connection ("open": it
#            never did within --seconds);
#   goaway   the GOAWAY's error code (0xb is ENHANCE_YOUR_CALM; "-": none arrived before the close);
#   cpu      CPU seconds the server's threads ran (/proc/PID/task/TID/schedstat, in ns) from the
#            client's start until 0.2 s after it ended; nginx's master and workers together;
#   rss      resident memory before the flood and its peak during it, sampled every 5 ms
#            (/proc/PID/status VmRSS; nginx's master and workers added up);
#   sent     frames the client handed to the kernel: what the server read, plus what sat in the
#            socket buffers when it closed (up to a few MB on loopback);
#   log      what the server wrote to its error log about the connection, each message once with
#            how often (nginx: error_log at --nginx-log-level; sluice: its stderr, info by default);
#   metric   sluice's sluice_http2_floods_total after the flood (its admin listener's /metrics).
# Then a table of medians per kind and server, and what each server logged.
#
# Servers: nginx (`listen ADDR http2;`, `user root;`, worker_processes auto) and sluice
# (`http2 = true`), each answering `GET /` itself (200 "ok") and proxying `/upload`, the
# empty_data flood's POST, whose body never ends: both read a body whole before going upstream,
# so the upstream (the discard port, where nothing listens) is never reached. sluice runs with
# its default workers (one per core), nginx with one worker per core.
#
# Needs nginx (Debian's nginx-light or nginx), /usr/bin/python3 (the standard library only:
# flood.py writes and reads its frames itself, python3-h2 is not needed), cargo unless
# --sluice-bin. Installs nothing. Not part of scripts/test.sh: with the defaults it takes about a
# minute and a half after the build (20 servers started per round; a server that cuts no flood
# spends --seconds on each kind, about two minutes in all).
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"

rounds=3 seconds=3 kinds="" sluice_bin="" nginx_level=info keep=0
all_kinds=(ping settings window_update priority rst_stream empty_data headers_empty continuation rapid_reset unknown)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --kinds) kinds="$2"; shift 2 ;;
    --sluice-bin) sluice_bin="$2"; shift 2 ;;
    --nginx-log-level) nginx_level="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "h2-flood.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n $kinds ]]; then IFS=, read -r -a kind_list <<<"$kinds"; else kind_list=("${all_kinds[@]}"); fi
for k in "${kind_list[@]}"; do
  [[ " ${all_kinds[*]} " == *" $k "* ]] || { echo "h2-flood.sh: unknown kind $k (see --help)" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "h2-flood.sh: --rounds must be a positive integer" >&2; exit 2; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
flood_py="$repo/tests/it/h2/flood.py"

# Checked, not installed: this is a measurement, run by hand on a machine set up for the tests.
command -v nginx >/dev/null \
  || { echo "h2-flood.sh: nginx is not installed (apt-get install nginx-light, or run scripts/test.sh once)" >&2; exit 1; }
[[ -x /usr/bin/python3 ]] \
  || { echo "h2-flood.sh: /usr/bin/python3 is missing (apt-get install python3)" >&2; exit 1; }
nginx -V 2>&1 | grep -q -- --with-http_v2_module \
  || { echo "h2-flood.sh: this nginx has no HTTP/2 module" >&2; exit 1; }

if [[ -z $sluice_bin ]]; then
  command -v cargo >/dev/null || { echo "h2-flood.sh: cargo is not installed (or pass --sluice-bin)" >&2; exit 1; }
  cargo build --release --quiet
  sluice_bin="$repo/target/release/sluice"
fi
[[ -x $sluice_bin ]] || { echo "h2-flood.sh: $sluice_bin is not an executable" >&2; exit 1; }

work="$(mktemp -d -t sluice-h2-flood.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [[ $keep -eq 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_up PORT: until the server accepts there (5 s at most, and only while it runs).
wait_up() {
  local i
  for i in $(seq 100); do
    if (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "h2-flood.sh: nothing accepts on port $1" >&2
  tail -n 20 "$dir"/*.log "$dir"/*.err >&2 2>/dev/null || true
  exit 1
}

# start_nginx DIR PORT → $server_pid (the master; its workers are its children).
start_nginx() {
  local dir=$1 port=$2
  cat >"$dir/nginx.conf" <<EOF
user root;
daemon off;
worker_processes auto;
pid $dir/nginx.pid;
error_log $dir/error.log $nginx_level;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/t1; proxy_temp_path $dir/t2; fastcgi_temp_path $dir/t3;
  uwsgi_temp_path $dir/t4; scgi_temp_path $dir/t5;
  server {
    listen 127.0.0.1:$port http2;
    location / { return 200 "ok\n"; }
    location /upload { proxy_pass http://127.0.0.1:9; }
  }
}
EOF
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" 2>"$dir/nginx.err" &
  server_pid=$!
  log="$dir/error.log"
}

# start_sluice DIR PORT ADMIN → $server_pid.
start_sluice() {
  local dir=$1 port=$2 admin=$3
  cat >"$dir/sluice.toml" <<EOF
[admin]
listen = "127.0.0.1:$admin"
[[servers]]
listen = "127.0.0.1:$port"
http2 = true
[[servers.locations]]
path = "/"
return = { status = 200, body = "ok\n" }
[[servers.locations]]
path = "/upload"
proxy_pass = "http://127.0.0.1:9"
EOF
  (cd "$dir" && exec "$sluice_bin" --config "$dir/sluice.toml" 2>"$dir/sluice.err" >"$dir/sluice.out") &
  server_pid=$!
  log="$dir/sluice.err"
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# --- one measurement: the flood client beside a sampler of the server's /proc ---------------------
cat >"$work/measure.py" <<'EOF'
# measure.py FLOOD_PY TARGET KIND SECONDS PID LOG [METRICS_URL] → one JSON line: flood.py's
# report with cpu_s, rss_before_kib, rss_peak_kib, log (message → count) and metric.
import json, os, re, subprocess, sys, time, urllib.request

flood_py, target, kind, seconds, pid, log = sys.argv[1:7]
metrics_url = sys.argv[7] if len(sys.argv) > 7 else ""

def family():
    # The server and its children: nginx's master and workers; sluice alone (its threads are in
    # its own counts).
    pids = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            pids += f.read().split()
    return pids

def cpu(pids):
    # Nanoseconds on a CPU of every thread (/proc/PID/task/TID/schedstat): /proc/PID/stat counts
    # in ticks of 10 ms, longer than a whole flood that is cut.
    total = 0
    for p in pids:
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:
                pass
    return total / 1e9

def rss(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            pass
    return total

pids = family()
cpu0, rss0 = cpu(pids), rss(pids)
peak = rss0
client = subprocess.Popen(
    ["/usr/bin/python3", flood_py, "--target", target, "--kind", kind, "--seconds", seconds],
    stdout=subprocess.PIPE,
)
while client.poll() is None:
    peak = max(peak, rss(pids))
    time.sleep(0.005)
report = json.loads(client.stdout.read() or b"{}")
# What the server still had in its socket buffer when the client left.
time.sleep(0.2)
peak = max(peak, rss(pids))
report.update(cpu_s=round(cpu(pids) - cpu0, 4), rss_before_kib=rss0, rss_peak_kib=peak)

# The error log's messages about connections, without date, process, connection number and the
# client/server fields; nginx's startup lines (notice) left out.
line_re = re.compile(r"^\S+ \S+ \[(\w+)\] [0-9#]+: (?:\*\d+ )?(.*?)(?:, client: .*)?$")
messages = {}
with open(log, errors="replace") as f:
    for line in f:
        m = line_re.match(line.rstrip("\n"))
        if not m or m.group(1) == "notice":
            continue
        key = f"[{m.group(1)}] {m.group(2)}"
        messages[key] = messages.get(key, 0) + 1
report["log"] = messages

metric = {}
if metrics_url:
    with urllib.request.urlopen(metrics_url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            m = re.match(r'sluice_http2_floods_total\{frame="(\w+)"\} (\d+)', line)
            if m and int(m.group(2)):
                metric[m.group(1)] = int(m.group(2))
report["metric"] = metric
print(json.dumps(report))
EOF

# measure SERVER KIND ROUND → one JSON line appended to results.jsonl
measure() {
  local server=$1 kind=$2 round=$3 port admin="" out
  dir="$work/$server-$kind-$round"
  mkdir -p "$dir"
  port=$(free_port)
  if [[ $server == nginx ]]; then
    start_nginx "$dir" "$port"
  else
    admin=$(free_port)
    start_sluice "$dir" "$port" "$admin"
  fi
  wait_up "$port"
  [[ -n $admin ]] && wait_up "$admin"
  out="$(/usr/bin/python3 "$work/measure.py" "$flood_py" "127.0.0.1:$port" "$kind" "$seconds" \
    "$server_pid" "$log" ${admin:+"http://127.0.0.1:$admin/metrics"})"
  stop_server
  /usr/bin/python3 -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(server=sys.argv[2], round=int(sys.argv[3])); print(json.dumps(r))' \
    "$out" "$server" "$round" >>"$work/results.jsonl"
  /usr/bin/python3 - "$out" "$server" "$round" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
closed = "open" if r.get("closed_after") is None else f"{r['closed_after']:.4f}"
goaway = "-" if r.get("goaway_code") is None else hex(r["goaway_code"])
print(f"  {r['kind']:<14} {sys.argv[2]:<7} round {sys.argv[3]}: closed {closed} s, goaway {goaway}, "
      f"cpu {r.get('cpu_s')} s, rss {r.get('rss_before_kib')} -> {r.get('rss_peak_kib')} KiB, "
      f"sent {r.get('frames_sent')}" + (f", error: {r['error']}" if r.get("error") else ""))
EOF
}

echo "HTTP/2 floods, sluice vs nginx — $(nproc) cores, $(nginx -v 2>&1 | cut -d' ' -f3), $rounds rounds, ${seconds} s at most each"
echo "sluice: $sluice_bin; nginx error_log level: $nginx_level"
for ((r = 1; r <= rounds; r++)); do
  for kind in "${kind_list[@]}"; do
    for server in nginx sluice; do
      measure "$server" "$kind" "$r"
    done
  done
done

# --- the table -------------------------------------------------------------------------------------
/usr/bin/python3 - "$work/results.jsonl" "$seconds" <<'EOF'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1])]
limit = float(sys.argv[2])
codes = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 6: "FRAME_SIZE_ERROR",
         9: "COMPRESSION_ERROR", 11: "ENHANCE_YOUR_CALM"}
kinds = list(dict.fromkeys(r["kind"] for r in rows))

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

print()
print("== medians per kind and server")
fmt = "{:<14} {:<7} {:>10} {:<22} {:>7} {:>9} {:>10} {:>10}  {}"
print(fmt.format("kind", "server", "closed s", "goaway", "cpu s", "rss MiB", "peak +KiB",
                 "sent", "metric"))
for kind in kinds:
    for server in ("nginx", "sluice"):
        rs = [r for r in rows if r["kind"] == kind and r["server"] == server]
        if not rs:
            continue
        errors = [r["error"] for r in rs if r.get("error")]
        if errors:
            print(fmt.format(kind, server, "error", errors[0][:60], "", "", "", "", ""))
            continue
        open_ = sum(r.get("closed_after") is None for r in rs)
        closed = med([r.get("closed_after") for r in rs])
        shown = f"{closed:.4f}" if closed is not None else f">{limit:g}"
        if open_ and closed is not None:
            shown = f"{shown} ({open_} open)"
        elif open_:
            shown = "open"
        gs = sorted({r.get("goaway_code") for r in rs}, key=lambda c: -1 if c is None else c)
        goaway = ",".join("-" if c is None else f"{c:#x} {codes.get(c, '')}".strip() for c in gs)
        cpu = med([r["cpu_s"] for r in rs])
        before = med([r["rss_before_kib"] for r in rs]) / 1024
        peak = med([r["rss_peak_kib"] - r["rss_before_kib"] for r in rs])
        sent = med([r["frames_sent"] for r in rs])
        metric = ",".join(f"{k}={v}" for k, v in sorted(rs[0].get("metric", {}).items()))
        print(fmt.format(kind, server, shown, goaway, f"{cpu:.3f}", f"{before:.1f}",
                         f"{peak:.0f}", f"{sent:.0f}", metric))

print()
print("== what each server logged (round 1; each message with how often)")
for kind in kinds:
    for server in ("nginx", "sluice"):
        rs = [r for r in rows if r["kind"] == kind and r["server"] == server and r["round"] == 1]
        for r in rs:
            log = r.get("log") or {}
            print(f"{kind:<14} {server:<7} " + ("(nothing)" if not log else ""))
            for msg, n in sorted(log.items(), key=lambda kv: -kv[1]):
                print(f"    {n:>8}x {msg[:150]}")
EOF
