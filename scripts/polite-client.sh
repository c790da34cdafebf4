#!/usr/bin/env bash
# polite-client.sh — a client that behaves well against a rate limit (the seed article's client section).
#
# Usage:
#   scripts/polite-client.sh URL [COUNT]      (COUNT successful requests, default 10)
#
# For each of COUNT requests it retries until it gets a non-429/503 answer:
#   - on 429 or 503 with Retry-After: waits exactly that many seconds, then retries;
#   - on 429 or 503 without it: exponential backoff with full jitter (1 s, 2 s, 4 s … capped at 30 s,
#     each wait a random time in [0, cap]), so that many clients do not retry in lockstep.
# Prints one line per attempt: `ATTEMPT_TIME_S STATUS [waiting N s (retry-after|backoff)]`, then a summary
# line `done: N ok, M limited, T s`.
set -euo pipefail

url="${1:?usage: polite-client.sh URL [COUNT]}"
count="${2:-10}"
max_backoff=30

start_ns=$(date +%s%N)
elapsed() {
  local ms=$((($(date +%s%N) - start_ns) / 1000000))
  printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

ok=0
limited=0
for ((i = 1; i <= count; i++)); do
  attempt=0
  while :; do
    headers="$(mktemp)"
    status="$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' "$url" || echo 000)"
    retry_after="$(tr -d '\r' <"$headers" | awk -F': *' 'tolower($1) == "retry-after" { print $2; exit }')"
    rm -f "$headers"
    if [[ $status != 429 && $status != 503 ]]; then
      echo "$(elapsed) $status"
      ok=$((ok + 1))
      break
    fi
    limited=$((limited + 1))
    if [[ $retry_after =~ ^[0-9]+$ ]]; then
      echo "$(elapsed) $status waiting $retry_after s (retry-after)"
      sleep "$retry_after"
    else
      cap=$((1 << attempt))
      ((cap > max_backoff)) && cap=$max_backoff
      wait_ms=$((RANDOM % (cap * 1000 + 1)))
      echo "$(elapsed) $status waiting $(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000))) s (backoff)"
      sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
      attempt=$((attempt + 1))
    fi
  done
done
echo "done: $ok ok, $limited limited, $(elapsed) s"
