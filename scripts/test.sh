#!/usr/bin/env bash
# test.sh — the project's one test command: everything CI checks, in order.
#
# Usage:
#   scripts/test.sh
#
# Steps (each one runs, and each one is reported PASS or FAIL at the end; nothing is skipped):
#   1. system packages: installs what is missing of nginx (nginx-light), redis-server, wrk, curl, openssl,
#      h2load (nghttp2-client), python3-websockets, python3-h2, python3-grpcio (the gRPC server and
#      client of tests/it/grpc.rs) and chromium (the dashboard's browser test,
#      tests/it/admin_dashboard.rs), systemd (systemd-analyze, for the unit) and dpkg-dev (dpkg-shlibdeps,
#      for the Debian package's dependencies) with apt-get (as root, or through sudo); cargo must already be
#      there; then cargo-deb (`cargo install cargo-deb --locked`, a few minutes once), which
#      tests/it/packaging.rs builds the Debian package with (scripts/deb.sh); and aioquic (the HTTP/3
#      client of tests/it/h3.rs, from the Python registry) in target/py-aioquic, a venv (python3-venv);
#   2. cargo build --release --locked (Cargo.lock current, as `cargo install --locked --path .` and
#      config/Dockerfile need it);
#   3. cargo test --release (unit tests and the integration tests, which start nginx, redis and
#      sluice themselves; the unit tests include the replay of the fuzz corpora, fuzz/corpus and
#      fuzz/regressions, through src/fuzzing/);
#   4. scripts/compare-nginx.sh --check: the article's burst test against real nginx and against
#      sluice, statuses identical and delays within ±100 ms;
#   5. `sluice check` on a copy of config/sluice.toml with an unknown key `bogus = 1` on line 2:
#      must exit 1 and print a `FILE:2:1: message` line on stderr;
#   6. `cargo run --release -- check --config config/sluice.toml` (the README's run command, checking
#      instead of serving): must exit 0 and print its summary (naming zone z_plain);
#   7. scripts/redis-race.sh 3: the article's Redis race (50 threads x 4 requests at once on one
#      bucket of capacity 10): sluice's atomic script admits exactly 10 in every run, token bucket
#      and leaky bucket alike;
#   8. `sluice simulate --scenario A` and `B`: the article's table, number for number;
#   9. instructions per request (`scripts/bench.sh --only instructions`: callgrind, sluice and nginx
#      side by side, the same on a busy machine as on an idle one, 1.5–2.5 minutes): sluice's must stay
#      within its budget on pass, reject and HTTP/2, as a ratio of nginx's in the same run
#      (INSTRUCTION_BUDGET below), so that a change that makes every request costlier fails here,
#      not in the next benchmark someone runs.
# Exits 0 only if every step passed.

# The step functions are called through run_step, which shellcheck cannot follow:
# shellcheck disable=SC2317
set -euo pipefail
export LC_ALL=C
export PATH="/usr/sbin:/sbin:$PATH"   # nginx lives in /usr/sbin

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

scratch="$(mktemp -d -t sluice-test.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT

# --- steps ------------------------------------------------------------------------------------

install_packages() {
  local -a missing=() sudo=()
  command -v nginx        >/dev/null || missing+=(nginx)
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v wrk          >/dev/null || missing+=(wrk)
  command -v curl         >/dev/null || missing+=(curl)
  command -v openssl      >/dev/null || missing+=(openssl)   # the TLS tests make their certificates
  command -v h2load       >/dev/null || missing+=(nghttp2-client)   # HTTP/2 bursts over one connection
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)   # the dashboard, in a real browser
  command -v valgrind     >/dev/null || missing+=(valgrind)   # callgrind, for the instruction budget
  command -v haproxy      >/dev/null || missing+=(haproxy)    # bench.sh starts all three proxies
  command -v systemd-analyze >/dev/null || missing+=(systemd)   # verifies config/sluice.service
  command -v dpkg-shlibdeps  >/dev/null || missing+=(dpkg-dev)  # the .deb's Depends (cargo-deb)
  [[ -x /usr/bin/python3 ]]         || missing+=(python3)   # Debian's own: the tests run /usr/bin/python3
  /usr/bin/python3 -c 'import websockets' 2>/dev/null || missing+=(python3-websockets)   # the WebSocket client
  /usr/bin/python3 -c 'import hpack' 2>/dev/null || missing+=(python3-h2)   # HPACK for the HTTP/2 conformance client
  /usr/bin/python3 -c 'import grpc' 2>/dev/null || missing+=(python3-grpcio)   # gRPC server and client (grpc_pass)
  /usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)   # the venv for aioquic (HTTP/3)
  command -v cargo        >/dev/null || { echo "cargo is not installed: install the Rust toolchain first" >&2; return 1; }

  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "nginx, redis-server, wrk, curl, openssl, h2load, valgrind, haproxy, systemd, dpkg-dev, python3-websockets, python3-h2, python3-grpcio and chromium are installed"
  else
    echo "missing: ${missing[*]}"
    if [[ $EUID -ne 0 ]]; then
      command -v sudo >/dev/null || { echo "not root and no sudo: cannot install ${missing[*]}" >&2; return 1; }
      sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update
    local -a pkgs=()
    for p in "${missing[@]}"; do
      if [[ $p == nginx ]]; then
        # nginx-light is Debian 12's small build; later releases have only "nginx".
        if apt-cache show nginx-light >/dev/null 2>&1; then pkgs+=(nginx-light); else pkgs+=(nginx); fi
      else
        pkgs+=("$p")
      fi
    done
    # Keep the packages from starting system services (nginx on port 80, redis on 6379): the tests
    # start their own, on loopback and on ports of their own.
    local made_policy_rc_d=0 rc=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
      "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
      made_policy_rc_d=1
    fi
    "${sudo[@]}" apt-get install -y "${pkgs[@]}" || rc=$?
    if [[ $made_policy_rc_d -eq 1 ]]; then "${sudo[@]}" rm -f /usr/sbin/policy-rc.d; fi
    [[ $rc -eq 0 ]] || { echo "apt-get install ${pkgs[*]} failed (exit $rc)" >&2; return 1; }
  fi

  # The Debian package's builder (scripts/deb.sh), from crates.io.
  if ! command -v cargo-deb >/dev/null; then
    echo "installing cargo-deb (cargo install cargo-deb --locked)"
    cargo install cargo-deb --locked --version '^3' --quiet
  fi

  local tool
  for tool in nginx redis-server wrk curl openssl h2load valgrind haproxy systemd-analyze dpkg-shlibdeps cargo-deb; do
    command -v "$tool" >/dev/null || { echo "$tool is still missing after installation" >&2; return 1; }
  done
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
    || { echo "chromium is still missing after installation" >&2; return 1; }
  /usr/bin/python3 -c 'import websockets' || { echo "python3-websockets is still missing after installation" >&2; return 1; }
  /usr/bin/python3 -c 'import hpack' || { echo "python3-h2 is still missing after installation" >&2; return 1; }
  /usr/bin/python3 -c 'import grpc' || { echo "python3-grpcio is still missing after installation" >&2; return 1; }
  # aioquic (QUIC and HTTP/3, the HTTP/3 tests' client, tests/it/h3.rs) is not packaged by Debian:
  # from the Python registry, in a venv of its own under target/.
  if ! target/py-aioquic/bin/python -c 'import aioquic' 2>/dev/null; then
    mkdir -p target
    /usr/bin/python3 -m venv target/py-aioquic || { echo "python3 -m venv target/py-aioquic failed" >&2; return 1; }
    target/py-aioquic/bin/pip install --quiet 'aioquic>=1.2,<2' \
      || { echo "pip install aioquic failed" >&2; return 1; }
  fi
  target/py-aioquic/bin/python -c 'import aioquic' || { echo "aioquic is still missing after installation" >&2; return 1; }
  echo "$(nginx -v 2>&1); $(redis-server --version | cut -d' ' -f1-3); $(wrk --version 2>&1 | head -n1 | cut -d' ' -f1-2); $(cargo --version)"
}

build() {
  cargo build --release --locked
}

unit_and_integration_tests() {
  cargo test --release
}

compare_with_nginx() {
  scripts/compare-nginx.sh --check
}

check_rejects_broken_config() {
  local bad="$scratch/bogus.toml" rc=0
  [[ -x target/release/sluice ]] || { echo "target/release/sluice is not built" >&2; return 1; }
  [[ -f config/sluice.toml ]] || { echo "config/sluice.toml is missing" >&2; return 1; }
  # config/sluice.toml with an unknown key inserted as line 2.
  { head -n 1 config/sluice.toml; echo 'bogus = 1'; tail -n +2 config/sluice.toml; } >"$bad"
  target/release/sluice check --config "$bad" >"$scratch/check.out" 2>"$scratch/check.err" || rc=$?
  echo "sluice check --config $bad -> exit $rc; stderr:"
  sed 's/^/  | /' "$scratch/check.err"
  [[ $rc -eq 1 ]] || { echo "expected exit status 1, got $rc" >&2; return 1; }
  grep -q ':2:1:' "$scratch/check.err" || { echo "stderr has no ':2:1:' (FILE:LINE:COL of the bogus key)" >&2; return 1; }
  grep -Eq 'bogus\.toml:2:1: [^[:space:]]' "$scratch/check.err" \
    || { echo "stderr has no 'FILE:2:1: message' line naming bogus.toml" >&2; return 1; }
}

check_accepts_example_config() {
  [[ -f config/sluice.toml ]] || { echo "config/sluice.toml is missing" >&2; return 1; }
  # Through `cargo run`, as the README's first command runs sluice (this also checks that cargo
  # knows which of the package's binaries to run).
  cargo run --release --quiet -- check --config config/sluice.toml | tee "$scratch/summary.out"
  # The one-screen summary names the zones.
  grep -q 'z_plain' "$scratch/summary.out" || { echo "the summary does not mention zone z_plain" >&2; return 1; }
}

redis_race() {
  scripts/redis-race.sh 3
}

simulate_reproduces_the_article() {
  local out="$scratch/simulate.out"
  # name, allowed, most in any 10 s, per row, as the article's table.
  target/release/sluice simulate --scenario A | tee "$out"
  for row in "fixed_window 20 20" "sliding_log 10 10" "sliding_window 11 11" "token_bucket 10 10" \
             "leaky_queue 11 11" "gcra 10 10"; do
    set -- $row
    awk -v n="$1" -v a="$2" -v m="$3" '$1 == n && $2 == a && $4 == m { found = 1 } END { exit !found }' "$out" \
      || { echo "scenario A: $1 is not $2 allowed / $3 in any 10 s" >&2; return 1; }
  done
  target/release/sluice simulate --scenario B | tee "$out"
  for row in "fixed_window 20 19" "sliding_log 20 10" "sliding_window 20 10" "token_bucket 29 19" \
             "leaky_queue 30 20" "gcra 29 19"; do
    set -- $row
    awk -v n="$1" -v a="$2" -v m="$3" '$1 == n && $2 == a && $4 == m { found = 1 } END { exit !found }' "$out" \
      || { echo "scenario B: $1 is not $2 allowed / $3 in any 10 s" >&2; return 1; }
  done
}

# sluice's instructions per request, at most this many times nginx's (pass, reject). Set by issue
# #44's session, which measured 1.07x and 1.07x (scripts/benchmarks.md, "The rejection rendered,
# the clock read once"); the margin is for toolchain and package updates (nginx's own count moves
# by about 2 % between runs on HTTP/2). Lower them as the count comes down. 1.11x since 2026-12-07:
# error_log's per-request log choice, compression's check and HTTP/3's left 1.103x and 1.098x
# (25 773 / 23 367 and 13 197 / 12 015) after the errlog merge's 1.12x and 1.13x were cut back.
INSTRUCTION_BUDGET_PASS=1.11
INSTRUCTION_BUDGET_REJECT=1.11
# HTTP/2 over TLS (h2load -c1 -m10): 1.31x when set; 1.34x–1.38x after error_log, compression and
# HTTP/3 (2026-12-07), where nginx's own count moved from 42 517 to 44 151 between runs of one build
# (h2load's batching under callgrind) and sluice's from 58 954 to 60 703: 1.35x sat inside that noise.
INSTRUCTION_BUDGET_H2=1.40

instruction_budget() {
  local out="$scratch/instructions.out"
  scripts/bench.sh --only instructions | tee "$out"
  # "/pass  NGINX  SLUICE  RATIO": the ratio again from the counts, to more places.
  awk -v bp="$INSTRUCTION_BUDGET_PASS" -v br="$INSTRUCTION_BUDGET_REJECT" -v bh="$INSTRUCTION_BUDGET_H2" '
    $1 == "/pass" || $1 == "/reject" || $1 == "h2" {
      r = $3 / $2; b = ($1 == "/pass") ? bp : ($1 == "/reject") ? br : bh; seen++
      printf "%s: sluice %d, nginx %d instructions a request: %.3fx, budget %.2fx\n", $1, $3, $2, r, b
      if (r > b) over++
    }
    END { if (seen != 3) { print "no instruction counts in the output"; exit 1 } exit over > 0 }' "$out"
}

# --- runner -----------------------------------------------------------------------------------

results=()
failures=0
passes=0

# run_step NAME FUNCTION: runs FUNCTION in a subshell with errexit in force, records PASS/FAIL.
run_step() {
  local name="$1" fn="$2" rc=0 start=$SECONDS
  echo
  echo "=================== $name"
  set +e
  ( set -e; "$fn" )
  rc=$?
  set -e
  local took=$(( SECONDS - start ))
  if [[ $rc -eq 0 ]]; then
    results+=("PASS  $name (${took} s)")
    passes=$(( passes + 1 ))
  else
    results+=("FAIL  $name (exit $rc, ${took} s)")
    failures=$(( failures + 1 ))
  fi
}

run_step "system packages (nginx, redis-server, wrk, curl, chromium, valgrind)" install_packages
run_step "cargo build --release --locked" build
run_step "cargo test --release" unit_and_integration_tests
run_step "scripts/compare-nginx.sh --check" compare_with_nginx
run_step "sluice check: broken config exits 1 with FILE:LINE:COL" check_rejects_broken_config
run_step "sluice check: config/sluice.toml exits 0" check_accepts_example_config
run_step "scripts/redis-race.sh: the atomic script admits exactly 10" redis_race
run_step "sluice simulate: the article's scenarios A and B" simulate_reproduces_the_article
run_step "instructions per request within budget (callgrind, against nginx)" instruction_budget

echo
echo "=================== summary"
printf '%s\n' "${results[@]}"
echo
echo "steps: $passes passed, $failures failed"
if [[ $failures -eq 0 ]]; then
  echo "PASS"
  exit 0
fi
echo "FAIL"
exit 1
