#!/usr/bin/env bash
# compare-nginx.sh — run the seed article's burst test against real nginx and against sluice, side by side.
#
# Usage:
#   scripts/compare-nginx.sh [--check]
#
#   --check   exit 1 if sluice's table differs from nginx's (without it the comparison is only printed)
#
# What it does:
#   1. starts real nginx from a temporary prefix built from config/nginx/seed.conf (listen port
#      rewritten to a free port, html/ok.txt created; logs and temp files stay in the prefix);
#   2. builds sluice (cargo build --release) and starts target/release/sluice --config on a temporary
#      copy of config/sluice.toml in which every address a server listens on (127.0.0.1:7060, the
#      built-in upstream 127.0.0.1:7070, ...) is rewritten, everywhere in the file, to a free port;
#   3. waits (up to 10 s each) until both answer HTTP;
#   4. runs scripts/burst10.sh --summary against nginx, then against sluice, and prints both tables;
#   5. compares them line by line: the status counts must be identical and each delay of the 200s
#      equal within ±100 ms.
# Both servers are stopped on exit, whatever happens. Their logs are kept (and their place printed)
# only when something went wrong.
#
# Needs: nginx (/usr/sbin/nginx), cargo, curl; python3 if available (for picking free ports).
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"

readonly TOLERANCE_MS=100
readonly STARTUP_TIMEOUT_S=10

check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-nginx.sh: unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

die() { echo "compare-nginx.sh: error: $*" >&2; exit 1; }

command -v nginx >/dev/null || die "nginx is not installed (apt-get install nginx-light, or run scripts/test.sh)"
command -v curl  >/dev/null || die "curl is not installed"
command -v cargo >/dev/null || die "cargo is not installed"
[[ -f config/nginx/seed.conf ]] || die "config/nginx/seed.conf is missing"
[[ -f config/sluice.toml ]]     || die "config/sluice.toml is missing"

work="$(mktemp -d -t sluice-compare.XXXXXX)"
nginx_pid=""
sluice_pid=""

# (shellcheck cannot see that these run from the trap)
# shellcheck disable=SC2317
stop_pid() {  # stop_pid PID: TERM, then KILL after 5 s
  local pid="$1" i
  if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then return 0; fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$nginx_pid"
  stop_pid "$sluice_pid"
  if [[ $rc -eq 0 ]]; then
    rm -rf "$work"
  else
    echo "compare-nginx.sh: logs kept in $work (nginx/logs/, sluice.log)" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- free ports -------------------------------------------------------------------------------
taken_ports=" "
free_port() {  # prints a port on 127.0.0.1 nobody listens on, never the same twice in this run
  local port
  while :; do
    if command -v python3 >/dev/null; then
      port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    else
      port=$(( 20000 + RANDOM % 40000 ))
      # Something answers there: taken.
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
    fi
    [[ "$taken_ports" == *" $port "* ]] && continue
    taken_ports+="$port "
    echo "$port"
    return
  done
}

# --- waiting for a server ---------------------------------------------------------------------
wait_http() {  # wait_http NAME PID URL LOG: until URL gives any HTTP answer
  local name="$1" pid="$2" url="$3" log="$4" deadline code
  deadline=$(( SECONDS + STARTUP_TIMEOUT_S ))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "compare-nginx.sh: $name exited during startup; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      exit 1
    fi
    code="$(curl -s -o /dev/null --noproxy '*' --max-time 1 -w '%{http_code}' "$url" 2>/dev/null || true)"
    [[ -n "$code" && "$code" != "000" ]] && return 0
    if (( SECONDS >= deadline )); then
      echo "compare-nginx.sh: $name did not answer on $url within ${STARTUP_TIMEOUT_S} s; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}

# --- nginx ------------------------------------------------------------------------------------
nginx_port="$(free_port)"
prefix="$work/nginx"
mkdir -p "$prefix/conf" "$prefix/html" "$prefix/logs" "$prefix/temp"
sed "s/listen 127\.0\.0\.1:7060;/listen 127.0.0.1:$nginx_port;/" config/nginx/seed.conf >"$prefix/conf/nginx.conf"
grep -q "listen 127.0.0.1:$nginx_port;" "$prefix/conf/nginx.conf" \
  || die "could not rewrite 'listen 127.0.0.1:7060;' in config/nginx/seed.conf"
printf 'ok\n' >"$prefix/html/ok.txt"

# -e: the error log before the config is read stays in the prefix too (nginx >= 1.19.5).
nginx -p "$prefix/" -c "$prefix/conf/nginx.conf" -e "$prefix/logs/error.log" >"$prefix/logs/stdout.log" 2>&1 &
nginx_pid=$!
wait_http nginx "$nginx_pid" "http://127.0.0.1:$nginx_port/" "$prefix/logs/error.log"
echo "nginx  $(nginx -v 2>&1 | sed 's/^nginx version: //') listening on 127.0.0.1:$nginx_port (prefix $prefix)"

# --- sluice -----------------------------------------------------------------------------------
echo "building sluice (cargo build --release) ..."
cargo build --release --quiet || die "cargo build --release failed"
[[ -x target/release/sluice ]] || die "target/release/sluice was not built"

# Every 127.0.0.1:PORT that a server listens on gets a free port, in the whole file, so that
# proxy_pass = "http://127.0.0.1:7070" follows its built-in upstream. Other addresses (redis, ...)
# are left alone.
sluice_conf="$work/sluice.toml"
cp config/sluice.toml "$sluice_conf"
mapfile -t listen_ports < <(sed -n 's/^[[:space:]]*listen[[:space:]]*=[[:space:]]*"127\.0\.0\.1:\([0-9]\{1,5\}\)".*/\1/p' config/sluice.toml | sort -u)
[[ ${#listen_ports[@]} -gt 0 ]] || die "no 'listen = \"127.0.0.1:PORT\"' line found in config/sluice.toml"
declare -A new_port=()
for old in "${listen_ports[@]}"; do
  new_port[$old]="$(free_port)"
  sed -i "s/127\.0\.0\.1:$old\b/127.0.0.1:${new_port[$old]}/g" "$sluice_conf"
done
sluice_port="${new_port[7060]:-}"
[[ -n "$sluice_port" ]] || die "config/sluice.toml has no server listening on 127.0.0.1:7060"

target/release/sluice --config "$sluice_conf" >"$work/sluice.log" 2>&1 &
sluice_pid=$!
for old in "${listen_ports[@]}"; do
  wait_http sluice "$sluice_pid" "http://127.0.0.1:${new_port[$old]}/" "$work/sluice.log"
done
echo "sluice listening on 127.0.0.1:$sluice_port (config $sluice_conf)"
echo

# --- the two runs -----------------------------------------------------------------------------
# One after the other, so they do not compete for the CPU.
nginx_table="$("$repo/scripts/burst10.sh" --summary "http://127.0.0.1:$nginx_port")"
sluice_table="$("$repo/scripts/burst10.sh" --summary "http://127.0.0.1:$sluice_port")"

echo "nginx"
echo "$nginx_table"
echo
echo "sluice"
echo "$sluice_table"
echo

# --- comparison -------------------------------------------------------------------------------
# A summary line is: PATH COUNTS...  [delays of the 200s: D1, D2, ...]
differences=0
mapfile -t nginx_lines  <<<"$nginx_table"
mapfile -t sluice_lines <<<"$sluice_table"
if [[ ${#nginx_lines[@]} -ne ${#sluice_lines[@]} ]]; then
  echo "DIFF: nginx printed ${#nginx_lines[@]} lines, sluice ${#sluice_lines[@]}"
  differences=1
fi
for i in "${!nginx_lines[@]}"; do
  n="${nginx_lines[$i]}"
  s="${sluice_lines[$i]:-}"
  n_head="${n%%  delays*}"; s_head="${s%%  delays*}"
  path="${n_head%% *}"
  verdict=""
  if [[ "$(tr -s ' ' <<<"$n_head")" != "$(tr -s ' ' <<<"$s_head")" ]]; then  # padding may differ
    verdict="statuses differ"
  else
    n_delays=""; s_delays=""
    [[ "$n" == *"delays of the 200s: "* ]] && n_delays="${n##*delays of the 200s: }"
    [[ "$s" == *"delays of the 200s: "* ]] && s_delays="${s##*delays of the 200s: }"
    verdict="$(awk -v a="$n_delays" -v b="$s_delays" -v tol="$TOLERANCE_MS" 'BEGIN {
      na = split(a, x, /, /); nb = split(b, y, /, /)
      if (na != nb) { print "number of delays differs"; exit }
      for (k = 1; k <= na; k++) {
        d = x[k] - y[k]; if (d < 0) d = -d
        if (d > tol) { printf "%s%d ms vs %d ms", sep, x[k], y[k]; sep = "; " }
      }
    }')"
    [[ -n "$verdict" ]] && verdict="delays differ by more than ${TOLERANCE_MS} ms: $verdict"
  fi
  if [[ -n "$verdict" ]]; then
    differences=1
    printf 'DIFF %-10s %s\n' "$path" "$verdict"
    printf '     nginx:  %s\n     sluice: %s\n' "$n" "$s"
  else
    printf 'same %s\n' "$path"
  fi
done

echo
if [[ $differences -eq 0 ]]; then
  echo "compare-nginx: sluice matches nginx (statuses identical, delays within ±${TOLERANCE_MS} ms)"
else
  echo "compare-nginx: sluice DIFFERS from nginx"
  [[ $check -eq 1 ]] && exit 1
fi
exit 0
