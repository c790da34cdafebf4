#!/usr/bin/env bash
# fuzz.sh — run each cargo-fuzz target of fuzz/ for SECONDS (nightly toolchain).
#
# Usage:
#   scripts/fuzz.sh SECONDS [--update-corpus] [TARGET...]
#
#   SECONDS          how long each target runs (libFuzzer's -max_total_time)
#   --update-corpus  afterwards, merge what the run found into fuzz/corpus/TARGET,
#                    minimised (libFuzzer's -set_cover_merge=1, a smaller `cargo fuzz cmin`; edges only,
#                    -use_counters=0, so that a few hundred files cover it)
#   TARGET...        some of fuzz/fuzz_targets/*.rs: config upstream limiter http1 h1loop http2 http3 h2upstream algorithms proxy_protocol (default: all)
#
# The targets run one after another under `nice -n 19`. Each starts from its committed
# corpus (fuzz/corpus/TARGET, read only) and writes what it finds to a scratch directory,
# so the committed corpus changes only with --update-corpus. A crash or a broken invariant
# stops that target: libFuzzer prints the input and its backtrace, and the input is saved
# in fuzz/artifacts/TARGET/ (reproduce with `cargo +nightly fuzz run TARGET FILE`; commit
# it to fuzz/regressions/TARGET/ once fixed: scripts/test.sh replays that directory).
# The checks themselves live in src/fuzzing/.
#
# Installs cargo-fuzz (`cargo install cargo-fuzz`) when it is missing; needs the nightly
# toolchain (`rustup toolchain install nightly`). Exits 0 only if no target found anything.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

usage() { sed -n '4,10s/^# \{0,1\}//p' "$0" >&2; exit 2; }

[[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || usage
seconds=$1
shift
update=0
targets=()
for a in "$@"; do
  case $a in
    --update-corpus) update=1 ;;
    -*) usage ;;
    *) targets+=("$a") ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in fuzz/fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
for t in "${targets[@]}"; do
  [[ -f fuzz/fuzz_targets/$t.rs ]] || { echo "no fuzz target \"$t\" (fuzz/fuzz_targets/$t.rs)" >&2; exit 2; }
done

cargo +nightly --version >/dev/null 2>&1 \
  || { echo "the nightly toolchain is missing: rustup toolchain install nightly" >&2; exit 1; }
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz
fi

scratch="$(mktemp -d -t sluice-fuzz.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT

results=()
failed=0
for t in "${targets[@]}"; do
  echo
  echo "=================== fuzz target $t: ${seconds} s"
  mkdir -p "fuzz/corpus/$t" "$scratch/$t"
  rc=0
  # -max_len: src/fuzzing/'s inputs are read up to 4096 bytes; -timeout: a hang is a finding.
  (cd fuzz && nice -n 19 cargo +nightly fuzz run "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1) \
    >"$scratch/$t.log" 2>&1 || rc=$?
  grep -E '^#[0-9]+.*(DONE|pulse|NEW)' "$scratch/$t.log" | tail -n 1 || true
  stats=$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$scratch/$t.log" \
    | sed 's/^stat:://' | tr -s ' \n' ' ' || true)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$scratch/$t.log" | tail -n 1 || true)
  if [[ $rc -eq 0 ]]; then
    results+=("PASS  $t: $cov; $stats")
    if [[ $update -eq 1 ]]; then
      merged="$scratch/$t.merged"
      mkdir -p "$merged"
      (cd fuzz && nice -n 19 cargo +nightly fuzz run "$t" "$merged" "corpus/$t" "$scratch/$t" -- \
          -set_cover_merge=1 -use_counters=0 -max_len=4096) >"$scratch/$t.merge.log" 2>&1
      rm -rf "fuzz/corpus/$t"
      mv "$merged" "fuzz/corpus/$t"
      echo "fuzz/corpus/$t: $(find "fuzz/corpus/$t" -type f | wc -l) files after merging"
    fi
  else
    failed=$((failed + 1))
    results+=("FAIL  $t (exit $rc): $cov")
    echo "--- the end of $t's log:"
    tail -n 60 "$scratch/$t.log"
    ls fuzz/artifacts/"$t"/ 2>/dev/null | sed "s|^|  fuzz/artifacts/$t/|" || true
  fi
done

echo
echo "=================== summary"
printf '%s\n' "${results[@]}"
[[ $failed -eq 0 ]] || { echo "FAIL: $failed target(s) found something"; exit 1; }
echo "PASS"
