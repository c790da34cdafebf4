#!/usr/bin/env bash
# redis-race.sh — the seed article's Redis experiment against sluice's Lua script.
#
# Usage:
#   scripts/redis-race.sh [RUNS]          # default 5 runs of each variant
#   scripts/redis-race.sh --cost          # also: time per decision, memory vs Redis
#
# Starts its own redis-server on a free loopback port (no persistence), builds
# target/release/redis-race, and runs 50 threads x 4 requests at once against one
# bucket of capacity 10, for two limits:
#   token_bucket   the article's own: capacity 10 refilled at 1/s
#                  (algorithm = "token_bucket", rate = "1r/s", burst = 9)
#   leaky_bucket   nginx's: burst=9 nodelay at 1r/m
# each three ways:
#   atomic (sluice's Lua script)   one EVALSHA per request         -> exactly 10, every run
#   read-compute-write             HMGET+TIME, compute, HSET       -> far above 10
#   read, 1 ms, write              the same with 1 ms in between   -> far above 10
# It prints the number admitted per run, one line per limit and variant. Exit
# status 1 if an atomic variant ever admitted anything but 10.
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

runs=5
cost=0
for a in "$@"; do
  case "$a" in
    --cost) cost=1 ;;
    ''|*[!0-9]*) echo "usage: $0 [RUNS] [--cost]" >&2; exit 2 ;;
    *) runs="$a" ;;
  esac
done

command -v redis-server >/dev/null || { echo "redis-server is not installed (scripts/test.sh installs it)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli is not installed (package redis-tools)" >&2; exit 1; }

dir="$(mktemp -d -t sluice-race.XXXXXX)"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# A free port: let redis-server try random ones until one binds.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  port=$(( 20000 + RANDOM % 40000 ))
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    >"$dir/redis.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 500); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then break 2; fi
    sleep 0.01
  done
  wait "$pid" 2>/dev/null || true
  pid=""
done
[[ -n "$pid" ]] || { echo "could not start redis-server:" >&2; cat "$dir/redis.log" >&2; exit 1; }
echo "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port"

cargo build --release --quiet --bin redis-race
bin="target/release/redis-race"
url="redis://127.0.0.1:$port"

"$bin" race --url "$url" --runs "$runs" | tee "$dir/race.out"
status=0
lines="$(grep -c ' atomic ' "$dir/race.out" || true)"
[[ "$lines" -ge 2 ]] || { echo "FAIL: expected an atomic line per limit, got $lines" >&2; status=1; }
while read -r alg rest; do
  for n in ${rest##*admitted per run: }; do
    [[ "$n" == 10 ]] || { echo "FAIL: $alg, the atomic script admitted $n (expected 10)" >&2; status=1; }
  done
done < <(grep ' atomic ' "$dir/race.out")
[[ $status -eq 0 ]] && echo "atomic script: exactly 10 in every run, for every limit"

if [[ $cost -eq 1 ]]; then
  echo
  "$bin" cost --url "$url"
fi
exit $status
