#!/usr/bin/env bash
# readme-images.sh — remake the README's two pictures, checked in under config/images/:
#   config/images/dashboard.png   the admin dashboard during a burst: scripts/dashboard-screenshot.sh,
#                                 its colours reduced with pngquant (Debian's package) to stay small
#                                 (tests/it/first_run.rs: a PNG of at most 150 KB);
#   config/images/scenario-b.svg  `sluice simulate --scenario B --plot`: the article's scenario B, one lane
#                                 per algorithm (tests/it/first_run.rs: byte for byte what sluice draws now).
#
# Usage:
#   scripts/readme-images.sh            both
#   scripts/readme-images.sh --svg      the plot only (no browser needed)
#
# Uses target/release/sluice (built with `cargo build --release` if missing). Run it after a change to the
# dashboard or to the simulator's plot, and commit the two files.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
die() { echo "readme-images.sh: $*" >&2; exit 1; }
only_svg=0
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --svg) only_svg=1 ;;
  "") ;;
  *) die "unknown argument $1" ;;
esac

sluice=target/release/sluice
[[ -x $sluice ]] || cargo build --release --quiet
mkdir -p config/images

"$sluice" simulate --scenario B --plot config/images/scenario-b.svg >/dev/null
echo "config/images/scenario-b.svg: $(wc -c <config/images/scenario-b.svg) bytes"
[[ $only_svg -eq 1 ]] && exit 0

command -v pngquant >/dev/null || die "pngquant is not installed (apt-get install pngquant)"
scratch="$(mktemp -d -t sluice-images.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
# The zones' table whole, down to the upstreams; 15 s of traffic, so that the sparklines have a shape.
WINDOW="${WINDOW:-1280,760}" SECONDS_SHOWN="${SECONDS_SHOWN:-15}" \
  scripts/dashboard-screenshot.sh "$scratch/dashboard.png" >/dev/null
# 64 colours: the page's flat colours and text survive; the file shrinks about fivefold.
pngquant --force --strip --speed 1 --quality 60-90 64 --output config/images/dashboard.png "$scratch/dashboard.png"
size="$(wc -c <config/images/dashboard.png)"
echo "config/images/dashboard.png: $size bytes"
[[ $size -le 153600 ]] || die "config/images/dashboard.png is over 150 KB"
