#!/usr/bin/env bash
# bench-redis.sh — what sharing a zone through Redis costs, on this machine, in one run: the same
# zones in memory, on one Redis and on a Redis Cluster of 3 masters; alternating runs, medians,
# ratios against the memory zone taken within the run.
#
# Usage:
#   scripts/bench-redis.sh [--duration SECONDS] [--pairs N] [--connections N] [--threads N]
#                          [--only SCENARIO] [--conns N]
#
# Starts one redis-server and a Redis Cluster of 3 masters (redis-server with `cluster-enabled yes`,
# joined by `redis-cli --cluster create`, no replicas), all without persistence, on free ports in a
# temporary directory, and five sluice processes with the same zones and locations, each answering
# with `return 200` (no upstream: what is measured is the limiter, not a proxy):
#   memory          the zones in memory (the reference)
#   redis           the zones on the one Redis, `reject_cache = true` (the default)
#   redis-nocache   the same, `reject_cache = false`
#   cluster         the zones on the cluster, `reject_cache = true`
#   cluster-nocache the same, `reject_cache = false`
#   redis-cN        `redis` with `[redis] connections = N` (--conns, default the number of cores:
#   cluster-cN      one connection per sluice worker thread); likewise `cluster`
# Every process stops with the script. Each scenario runs wrk -t THREADS -c CONNECTIONS against each
# system in turn (one warm-up run each, then --pairs rounds) and prints per run req/s, p50 and p99
# latency, non-2xx answers and cpu_us: the CPU time sluice spent per request (user + system, all
# its threads, from /proc/PID/stat), with the ratios against the memory zone of the same round
# (`r/s x`, `cpu x`); then the median of each column per system. Scenarios:
#   pass         limits that never reject, one client key (every request from 127.0.0.1): a hot key
#   pass-many    the same with 100 000 client keys, from a header a wrk Lua script sets
#   reject       every request refused (1r/1000s, no burst), one client key: a reject flood
#   reject-many  the same over 100 000 keys (each key's first request passes, in the warm-up)
#   scale        Redis as the bottleneck: 3 sluice processes share the pass-many zone, each loaded
#                by its own wrk (-t1, CONNECTIONS/2 connections) at once; aggregate decisions/s on
#                the one Redis against the cluster, and the CPU per decision of sluice (its 3
#                processes) and of Redis (all its servers)
# The systems without a rejection cache run only in reject and reject-many, where it matters; those
# with N connections only in pass and pass-many (a cached refusal makes no call).
# Last, a summary against issue #27's targets: reject with the cache ≥ 0.90× memory's req/s,
# pass ≥ 0.50×, scale: the cluster ≥ 1.5× one Redis. Then what Redis itself spent per call
# (`INFO commandstats`: calls and usec_per_call of FCALL, EVALSHA and EVAL on each server).
# Defaults: 5 s per run, 3 rounds, 64 connections, 2 wrk threads: about 9 minutes in all (20
# system-scenarios × 4 runs, scale 2 × 4 runs; reject-many's keys primed, 4-12 s a system), plus
# the release build. Machines here are shared and noisy: read the medians and ratios, not single
# runs. Installs what is missing with apt-get (redis-server, redis-tools, wrk, curl, python3).
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"

scenarios=(pass pass-many reject reject-many scale)
duration=5 pairs=3 connections=64 threads=2 only="" conns="$(nproc)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --conns) conns="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-redis.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n $only && " ${scenarios[*]} " != *" $only "* ]]; then
  echo "bench-redis.sh: unknown scenario $only (one of: ${scenarios[*]})" >&2
  exit 2
fi
wants() { [[ -z $only || $only == "$1" ]]; }
main_pid=$$
die() {
  echo "bench-redis.sh: $*" >&2
  [[ $BASHPID != "$main_pid" ]] && kill -TERM "$main_pid"
  exit 1
}
trap 'exit 1' TERM INT

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
if [[ ${#need[@]} -gt 0 ]]; then
  echo "installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo build --release --quiet
sluice_bin="$repo/target/release/sluice"

work="$(mktemp -d -t sluice-bench-redis.XXXXXX)"
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

# --- Redis: one server, and a cluster of 3 masters ----------------------------------------------
# redis_start NAME PORT ARGS… → starts redis-server in $work/NAME, records its pid in redis_pid
redis_start() {
  local name=$1 port=$2
  shift 2
  mkdir -p "$work/$name"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work/$name" \
    --daemonize no --protected-mode no "$@" >"$work/$name/log" 2>&1 &
  pids+=($!)
  redis_pid=$!
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  die "redis-server $name on port $port does not answer: $(tail -n 5 "$work/$name/log")"
}
single_port=$(free_port)
redis_start single "$single_port"
single_pids=("$redis_pid")
cluster_ports=() cluster_pids=()
for i in 1 2 3; do
  p=$(free_port) bus=$(free_port)
  redis_start "node$i" "$p" --cluster-enabled yes --cluster-config-file "nodes.conf" \
    --cluster-port "$bus" --cluster-node-timeout 5000
  cluster_ports+=("$p") cluster_pids+=("$redis_pid")
done
redis-cli --cluster create "${cluster_ports[@]/#/127.0.0.1:}" --cluster-yes >"$work/cluster-create.log" 2>&1 ||
  die "redis-cli --cluster create failed: $(tail -n 5 "$work/cluster-create.log")"
for p in "${cluster_ports[@]}"; do
  for _ in $(seq 200); do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
    sleep 0.05
  done
  redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || die "cluster node $p is not ok"
done

# --- sluice: the same zones and locations, five ways ---------------------------------------------
# sluice_conf BACKEND REDIS_TABLE PORT → a configuration
sluice_conf() {
  cat <<EOF
limit_req_status = 429

[zones.pass]
key = "\$binary_remote_addr"
size = "10m"
rate = "1000000r/s"
backend = "$1"
[zones.reject]
key = "\$binary_remote_addr"
size = "10m"
rate = "1r/1000s"
backend = "$1"
[zones.pass_many]
key = "\$http_x_client"
size = "64m"
rate = "1000000r/s"
backend = "$1"
[zones.reject_many]
key = "\$http_x_client"
size = "64m"
rate = "1r/1000s"
backend = "$1"
$2
[[servers]]
listen = "127.0.0.1:$3"
[[servers.locations]]
path = "/pass"
limit_req = { zone = "pass", burst = 1000000, nodelay = true }
return = { status = 200, body = "ok\n" }
[[servers.locations]]
path = "/reject"
limit_req = { zone = "reject" }
return = { status = 200, body = "ok\n" }
[[servers.locations]]
path = "/pass-many"
limit_req = { zone = "pass_many", burst = 1000000, nodelay = true }
return = { status = 200, body = "ok\n" }
[[servers.locations]]
path = "/reject-many"
limit_req = { zone = "reject_many" }
return = { status = 200, body = "ok\n" }
EOF
}
# redis_table WHERE CACHE [CONNECTIONS] → the [redis] table (WHERE: single or cluster)
redis_table() {
  echo "[redis]"
  if [[ $1 == single ]]; then
    echo "url = \"redis://127.0.0.1:$single_port\""
  else
    echo "cluster = [$(printf '"redis://127.0.0.1:%s",' "${cluster_ports[@]}" | sed 's/,$//')]"
  fi
  echo "reject_cache = $2"
  echo "timeout = \"1s\""
  [[ -n ${3:-} ]] && echo "connections = $3"
  return 0
}
declare -A port_of pid_of
# sluice_start NAME BACKEND REDIS_TABLE
sluice_start() {
  local port
  port=$(free_port)
  sluice_conf "$2" "$3" "$port" >"$work/$1.toml"
  "$sluice_bin" --config "$work/$1.toml" 2>"$work/$1.err" & pids+=($!)
  pid_of[$1]=$! port_of[$1]=$port
}
sluice_start memory memory ""
sluice_start redis redis "$(redis_table single true)"
sluice_start redis-nocache redis "$(redis_table single false)"
sluice_start cluster redis "$(redis_table cluster true)"
sluice_start cluster-nocache redis "$(redis_table cluster false)"
sluice_start "redis-c$conns" redis "$(redis_table single true "$conns")"
sluice_start "cluster-c$conns" redis "$(redis_table cluster true "$conns")"
for i in 1 2 3; do
  sluice_start "scale-redis$i" redis "$(redis_table single true)"
  sluice_start "scale-cluster$i" redis "$(redis_table cluster true)"
done
for name in "${!port_of[@]}"; do
  ok=""
  for _ in $(seq 100); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${port_of[$name]}/pass" || true)"
    [[ $code == 200 ]] && { ok=1; break; }
    sleep 0.1
  done
  [[ -n $ok ]] || die "sluice $name does not answer 200 on /pass: $(tail -n 5 "$work/$name.err")"
done

cat >"$work/many.lua" <<'EOF'
-- 100 000 distinct client keys, one random key per request.
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", nil, { ["X-Client"] = tostring(math.random(1, 100000)) })
end
EOF
# Every one of the 100 000 keys in turn (thread t of N sends keys OFFSET + t, OFFSET + t + N, …):
# what primes reject-many. wrk -s seq.lua URL -- THREADS OFFSET.
cat >"$work/seq.lua" <<'EOF'
local id = 0
function setup(thread) id = id + 1; thread:set("tid", id) end
function init(args) step = tonumber(args[1]); next_key = (tonumber(args[2]) + tid) % 100000 + 1 end
request = function()
  local k = next_key
  next_key = next_key + step
  if next_key > 100000 then next_key = next_key - 100000 end
  return wrk.format("GET", nil, { ["X-Client"] = tostring(k) })
end
EOF
# prime SYSTEM: every key of reject-many twice, so that each is refused from then on (1r/1000s, no
# burst: its first request passes) and a rejection cache holds each one, as after a flood.
prime() {
  local done=0 n
  while [[ $done -lt 220000 ]]; do
    wrk -t"$threads" -c"$connections" -d4s -s "$work/seq.lua" \
      "http://127.0.0.1:${port_of[$1]}/reject-many" -- "$threads" "$done" >"$work/prime.out" 2>&1 ||
      die "priming $1 failed: $(cat "$work/prime.out")"
    n="$(awk '/requests in/ { print $1 }' "$work/prime.out")"
    [[ $n -gt 0 ]] || die "priming $1: no requests"
    done=$((done + n))
  done
}

# --- measuring ------------------------------------------------------------------------------------
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}
# CPU ticks (user + system) used so far by PIDS, all their threads.
cpu_ticks() {
  local p
  for p in "$@"; do cat /proc/"$p"/stat 2>/dev/null; done |
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}
tck=$(getconf CLK_TCK)
cpu_us() { awk -v t="$1" -v hz="$tck" -v n="$2" 'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }'; }
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, (b > 0 ? a / b : 0) }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# col FILE N → the median of column N of FILE
col() { awk -v c="$2" '{ print $c }' "$1" | median; }

# wrk_out → "rps p50 p99 non2xx requests" of a wrk output on stdin
parse_wrk() {
  local out rps p50 p99 non2xx n
  out="$(cat)"
  rps="$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")"
  p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")"
  p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")"
  non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")"
  n="$(awk '/requests in/ { print $1 }' <<<"$out")"
  echo "$rps $p50 $p99 ${non2xx:-0} $n"
}

# run SYSTEM PATH → "rps p50 p99 non2xx cpu_us"; checks that pass paths pass and reject paths reject
run() {
  local sys=$1 path=$2 args=(-t"$threads" -c"$connections" -d"${duration}s" --latency) out t0 t1
  [[ $path == *-many ]] && args+=(-s "$work/many.lua")
  t0="$(cpu_ticks "${pid_of[$sys]}")"
  out="$(wrk "${args[@]}" "http://127.0.0.1:${port_of[$sys]}$path")" || die "wrk failed against $sys: $out"
  t1="$(cpu_ticks "${pid_of[$sys]}")"
  local rps p50 p99 non2xx n
  read -r rps p50 p99 non2xx n <<<"$(parse_wrk <<<"$out")"
  case $path in
    /pass*) [[ $non2xx -eq 0 ]] || die "$sys $path: $non2xx non-2xx answers of $n" ;;
    /reject*) [[ $((non2xx * 100)) -ge $((n * 99)) ]] || die "$sys $path: only $non2xx of $n refused" ;;
  esac
  echo "$rps $p50 $p99 $non2xx $(cpu_us $((t1 - t0)) "$n")"
}

: >"$work/summary"
target() {
  local verdict
  verdict="$(awk -v r="$3" -v op="$4" -v l="$5" 'BEGIN {
    ok = (op == "<=") ? (r + 0 <= l + 0) : (r + 0 >= l + 0); print (ok ? "met" : "not met") }')"
  printf '%-12s %-36s %6sx   target %s %sx   %s\n' "$1" "$2" "$3" "$4" "$5" "$verdict" >>"$work/summary"
}
info() { printf '%-12s %-36s %6sx   (no target)\n' "$1" "$2" "$3" >>"$work/summary"; }

sluice_ver="$("$sluice_bin" --version 2>/dev/null | awk '{ print $2 }') ($(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
echo "sluice zones in memory, on one Redis and on a 3-master Redis Cluster — one run: wrk -t$threads -c$connections, ${duration} s per run, rounds: $pairs"
echo "versions: sluice $sluice_ver, $(redis-server --version | awk '{ print $1, $2, $3 }'), wrk $( (wrk -v 2>&1 || true) | awk 'NR == 1 { print $2 }')"
echo "machine: $(uname -sr), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"

fmt='%-6s %-16s %9s %7s %7s %8s %7s   %6s %6s\n'
for scenario in pass pass-many reject reject-many; do
  wants "$scenario" || continue
  systems=(memory redis "redis-c$conns" cluster "cluster-c$conns")
  [[ $scenario == reject* ]] && systems=(memory redis redis-nocache cluster cluster-nocache)
  for sys in "${systems[@]}"; do
    [[ $scenario == reject-many ]] && prime "$sys"
    run "$sys" "/$scenario" >/dev/null
  done
  echo
  case $scenario in
    pass) echo "== pass (limits that never reject; one client key)" ;;
    pass-many) echo "== pass-many (limits that never reject; 100 000 client keys)" ;;
    reject) echo "== reject (every request refused; one client key)" ;;
    reject-many) echo "== reject-many (every request refused; 100 000 client keys)" ;;
  esac
  # shellcheck disable=SC2059
  printf "$fmt" round system "r/s" p50ms p99ms non2xx cpu_us "r/s x" "cpu x"
  for sys in "${systems[@]}"; do : >"$work/$scenario.$sys"; done
  for ((i = 1; i <= pairs; i++)); do
    for sys in "${systems[@]}"; do
      read -r rps p50 p99 bad cpu <<<"$(run "$sys" "/$scenario")"
      if [[ $sys == memory ]]; then m_rps=$rps m_cpu=$cpu; fi
      rx="$(ratio "$rps" "$m_rps")" cx="$(ratio "$cpu" "$m_cpu")"
      # shellcheck disable=SC2059
      printf "$fmt" "$i" "$sys" "$(printf '%.0f' "$rps")" "$p50" "$p99" "$bad" "$cpu" "$rx" "$cx"
      echo "$rps $p50 $p99 $cpu $rx $cx" >>"$work/$scenario.$sys"
    done
  done
  for sys in "${systems[@]}"; do
    f="$work/$scenario.$sys"
    # shellcheck disable=SC2059
    printf "$fmt" median "$sys" "$(printf '%.0f' "$(col "$f" 1)")" "$(col "$f" 2)" "$(col "$f" 3)" "" \
      "$(col "$f" 4)" "$(col "$f" 5)" "$(col "$f" 6)"
  done
  case $scenario in
    pass | pass-many)
      target "$scenario" "req/s, one Redis vs memory" "$(col "$work/$scenario.redis" 5)" ">=" 0.50
      target "$scenario" "req/s, one Redis, $conns conns vs memory" "$(col "$work/$scenario.redis-c$conns" 5)" ">=" 0.50
      info "$scenario" "req/s, cluster vs memory" "$(col "$work/$scenario.cluster" 5)"
      info "$scenario" "req/s, cluster, $conns conns vs memory" "$(col "$work/$scenario.cluster-c$conns" 5)" ;;
    reject | reject-many)
      target "$scenario" "req/s, one Redis + cache vs memory" "$(col "$work/$scenario.redis" 5)" ">=" 0.90
      info "$scenario" "req/s, one Redis, no cache" "$(col "$work/$scenario.redis-nocache" 5)"
      info "$scenario" "req/s, cluster + cache vs memory" "$(col "$work/$scenario.cluster" 5)"
      info "$scenario" "req/s, cluster, no cache" "$(col "$work/$scenario.cluster-nocache" 5)" ;;
  esac
done

# --- scale: three sluice processes, Redis the bottleneck ------------------------------------------
# run_scale WHERE → "aggregate_rps p99_max sluice_cpu_us redis_cpu_us" (3 processes, one wrk each)
run_scale() {
  local where=$1 i spids=() rpids t0 t1 r0 r1 wpids=()
  for i in 1 2 3; do spids+=("${pid_of[scale-$where$i]}"); done
  if [[ $where == redis ]]; then rpids=("${single_pids[@]}"); else rpids=("${cluster_pids[@]}"); fi
  t0="$(cpu_ticks "${spids[@]}")" r0="$(cpu_ticks "${rpids[@]}")"
  for i in 1 2 3; do
    wrk -t1 -c$((connections / 2)) -d"${duration}s" --latency -s "$work/many.lua" \
      "http://127.0.0.1:${port_of[scale-$where$i]}/pass-many" >"$work/scale.$i" 2>&1 &
    wpids+=($!)
  done
  for p in "${wpids[@]}"; do wait "$p" || die "scale: wrk failed: $(cat "$work"/scale.*)"; done
  t1="$(cpu_ticks "${spids[@]}")" r1="$(cpu_ticks "${rpids[@]}")"
  local sum=0 n=0 p99=0 rps q99 bad k
  for i in 1 2 3; do
    read -r rps _ q99 bad k <<<"$(parse_wrk <"$work/scale.$i")"
    [[ $bad -eq 0 ]] || die "scale $where: $bad non-2xx answers"
    sum="$(awk -v a="$sum" -v b="$rps" 'BEGIN { print a + b }')" n=$((n + k))
    p99="$(awk -v a="$p99" -v b="$q99" 'BEGIN { print (b > a ? b : a) }')"
  done
  echo "$sum $p99 $(cpu_us $((t1 - t0)) "$n") $(cpu_us $((r1 - r0)) "$n")"
}
if wants scale; then
  run_scale redis >/dev/null
  run_scale cluster >/dev/null
  echo
  echo "== scale (3 sluice processes share the pass-many zone, a wrk -t1 -c$((connections / 2)) each; aggregate)"
  sfmt='%-6s %-8s %9s %7s %12s %11s   %6s\n'
  # shellcheck disable=SC2059
  printf "$sfmt" round redis "r/s" p99ms "sluice cpu_us" "redis cpu_us" "r/s x"
  : >"$work/scale.redis" ; : >"$work/scale.cluster"
  for ((i = 1; i <= pairs; i++)); do
    read -r a_rps a_p99 a_cpu a_rcpu <<<"$(run_scale redis)"
    read -r b_rps b_p99 b_cpu b_rcpu <<<"$(run_scale cluster)"
    x="$(ratio "$b_rps" "$a_rps")"
    # shellcheck disable=SC2059
    printf "$sfmt" "$i" one "$(printf '%.0f' "$a_rps")" "$a_p99" "$a_cpu" "$a_rcpu" ""
    # shellcheck disable=SC2059
    printf "$sfmt" "$i" cluster "$(printf '%.0f' "$b_rps")" "$b_p99" "$b_cpu" "$b_rcpu" "$x"
    echo "$a_rps $a_p99 $a_cpu $a_rcpu" >>"$work/scale.redis"
    echo "$b_rps $b_p99 $b_cpu $b_rcpu $x" >>"$work/scale.cluster"
  done
  for w in redis cluster; do
    f="$work/scale.$w" name=one
    [[ $w == cluster ]] && name=cluster
    # shellcheck disable=SC2059
    printf "$sfmt" median "$name" "$(printf '%.0f' "$(col "$f" 1)")" "$(col "$f" 2)" "$(col "$f" 3)" "$(col "$f" 4)" \
      "$([[ $w == cluster ]] && col "$f" 5)"
  done
  target scale "decisions/s, cluster vs one Redis" "$(col "$work/scale.cluster" 5)" ">=" 1.50
fi

echo
echo "== inside Redis (INFO commandstats over the whole run: decisions by FCALL, EVALSHA, EVAL)"
printf '%-8s %-8s %10s %14s\n' redis command calls usec_per_call
for where in single "${cluster_ports[@]}"; do
  port=$where name=$where
  [[ $where == single ]] && port=$single_port
  [[ $where != single ]] && name="c:$where"
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    awk -F'[:,=]' -v name="$name" '/^cmdstat_(fcall|evalsha|eval):/ {
      sub("cmdstat_", "", $1); printf "%-8s %-8s %10s %14s\n", name, $1, $3, $7 }'
done

echo
echo "== summary (medians of the ratios above against issue #27's targets)"
cat "$work/summary"
