#!/usr/bin/env bash
# pgo.sh — a profile-guided (PGO) release build of sluice: an instrumented build, a training run,
# the profile merged, then the release build again optimised with it (issue #44 item 1).
#
# Usage:
#   scripts/pgo.sh [--measure]
#
# Leaves the optimised binary at target/pgo/sluice (target/release/sluice is not touched). Steps,
# each in its own target directory under target/pgo/ (the same release profile: fat LTO, one
# codegen unit; RUSTFLAGS given for the host --target only, so that build scripts and proc macros are
# neither instrumented nor profiled):
#   1. -Cprofile-generate: an instrumented build (target/pgo/gen)
#   2. training: scripts/bench.sh with that binary (SLUICE_BENCH_BIN): --only instructions (/pass,
#      /reject and HTTP/2 over TLS, one worker, under callgrind) and --only pass --duration 3
#      --pairs 1 (wrk, all workers); sluice writes its counters when it exits (SIGTERM, as bench.sh
#      stops it) to target/pgo/profraw/
#   3. llvm-profdata merge (from the toolchain's llvm-tools: rustup component add llvm-tools)
#   4. -Cprofile-use: the optimised build (target/pgo/use), copied to target/pgo/sluice
# --measure then runs scripts/bench.sh --only instructions on it.
# Measured (scripts/benchmarks.md, 66bf3b5, callgrind, instructions per request): /pass 25 489 →
# 20 099 (−21 %), /reject 13 382 → 10 769 (−20 %), h2 58 240 → 50 798 (−13 %). About 20 minutes on
# 2 cores: two release builds (≈ 5–7 min each) and ≈ 3 min of training. The profile is for the code
# it was made from: functions changed since get no profile data (rustc warns with
# -pgo-warn-missing-function) and lose its benefit, so rerun this for every release.
set -euo pipefail
export LC_ALL=C

measure=""
case "${1:-}" in
  --measure) measure=1 ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "pgo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
host="$(rustc -vV | awk '/^host:/ { print $2 }')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
[[ -x $profdata ]] || { echo "pgo.sh: no $profdata (rustup component add llvm-tools)" >&2; exit 1; }

pgo="$repo/target/pgo"
rm -rf "$pgo/profraw" "$pgo/merged.profdata"
mkdir -p "$pgo/profraw"

# build DIR RUSTFLAGS → the release build into target/pgo/DIR, for the host target only.
build() {
  local start=$SECONDS
  CARGO_TARGET_DIR="$pgo/$1" RUSTFLAGS="$2" cargo build --release --quiet --target "$host"
  echo "pgo: $1 build in $((SECONDS - start)) s" >&2
}

echo "pgo: 1/4 instrumented build" >&2
build gen "-Cprofile-generate=$pgo/profraw"
echo "pgo: 2/4 training (scripts/bench.sh --only instructions, --only pass)" >&2
SLUICE_BENCH_BIN="$pgo/gen/$host/release/sluice" scripts/bench.sh --only instructions >"$pgo/train.log"
SLUICE_BENCH_BIN="$pgo/gen/$host/release/sluice" scripts/bench.sh --only pass --duration 3 --pairs 1 \
  >>"$pgo/train.log"
compgen -G "$pgo/profraw/*.profraw" >/dev/null || { echo "pgo.sh: training left no profile" >&2; exit 1; }
echo "pgo: 3/4 merge" >&2
"$profdata" merge -o "$pgo/merged.profdata" "$pgo/profraw"
echo "pgo: 4/4 optimised build" >&2
build use "-Cprofile-use=$pgo/merged.profdata"
cp "$pgo/use/$host/release/sluice" "$pgo/sluice"
echo "pgo: $pgo/sluice ($(git describe --always --dirty 2>/dev/null || echo '?'), profile $pgo/merged.profdata)"
if [[ -n $measure ]]; then
  SLUICE_BENCH_BIN="$pgo/sluice" scripts/bench.sh --only instructions
fi
