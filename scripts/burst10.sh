#!/usr/bin/env bash
# burst10.sh — fire 10 concurrent requests at each path and show how the rate limiter answered.
#
# Usage:
#   scripts/burst10.sh [--summary] [BASE_URL] [PATH...]
#
#   BASE_URL   default http://127.0.0.1:7060
#   PATH...    default /plain /burst /nodelay /delay (the four locations of the seed article)
#   --summary  print only the one summary line per path (used by scripts/compare-nginx.sh)
#
# For each path, one after the other, 10 curl processes are started together in the background
# (each on its own connection) and the script waits for all of them. It then prints the 10 results
# sorted by latency (status, milliseconds) and a summary line like the article's table:
#
#   /burst     200=6 429=4  delays of the 200s: 0, 501, 1001, 1502, 2000, 2500
#
# (status counts in ascending status order; the 200s' latencies in ms, rounded, ascending.)
# A request that got no HTTP answer at all is counted under curl's status 000.
#
# It only uses curl, so it runs unchanged against real nginx (config/nginx/seed.conf) and against
# sluice (config/sluice.toml). The limiter's state carries over between runs: run it against a
# freshly started server, or wait a few seconds between runs, to get the article's numbers.
set -euo pipefail
export LC_ALL=C   # '.' as the decimal point for curl's %{time_total} and awk

readonly N=10

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

summary_only=0
args=()
for arg in "$@"; do
  case "$arg" in
    --summary) summary_only=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "burst10.sh: unknown option: $arg (see --help)" >&2; exit 2 ;;
    *) args+=("$arg") ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"

base_url="${1:-http://127.0.0.1:7060}"
base_url="${base_url%/}"
if [[ $# -gt 1 ]]; then
  shift
  paths=("$@")
else
  paths=(/plain /burst /nodelay /delay)
fi

command -v curl >/dev/null || { echo "burst10.sh: curl is not installed" >&2; exit 1; }

workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT

# One request: writes "STATUS SECONDS" to $2. Never fails: a refused or timed-out request is "000 ...".
one_request() {
  local url="$1" out="$2"
  curl -s -o /dev/null --noproxy '*' --max-time 30 \
       -w '%{http_code} %{time_total}\n' "$url" >"$out" 2>/dev/null || true
  [[ -s "$out" ]] || echo "000 0" >"$out"
}

for path in "${paths[@]}"; do
  [[ "$path" == /* ]] || path="/$path"
  rm -f "$workdir"/r.*

  pids=()
  for i in $(seq 1 "$N"); do
    one_request "$base_url$path" "$workdir/r.$i" &
    pids+=("$!")
  done
  wait "${pids[@]}"

  # "STATUS MS" per request, sorted by latency (then status).
  results="$(cat "$workdir"/r.* | awk '{ printf "%s %d\n", $1, int($2 * 1000 + 0.5) }' | sort -k2,2n -k1,1n)"

  if [[ $summary_only -eq 0 ]]; then
    echo "$path"
    awk '{ printf "  %s %6d ms\n", $1, $2 }' <<<"$results"
  fi

  counts="$(awk '{ print $1 }' <<<"$results" | sort -n | uniq -c | awk '{ printf "%s%s=%s", sep, $2, $1; sep=" " }')"
  delays="$(awk '$1 == 200 { printf "%s%s", sep, $2; sep=", " }' <<<"$results")"
  line="$(printf '%-10s %s' "$path" "$counts")"
  [[ -n "$delays" ]] && line+="  delays of the 200s: $delays"
  echo "$line"
  [[ $summary_only -eq 1 ]] || echo
done
