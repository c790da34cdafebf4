#!/usr/bin/env bash
# deb.sh — build sluice's Debian package with cargo-deb (Cargo.toml's [package.metadata.deb]).
#
# Usage:
#   scripts/deb.sh [--no-build] [--profile PROFILE] [OUT_DIR]     (default OUT_DIR: target/debian)
#
# Builds target/release/sluice (`cargo build --release --locked`; --no-build: use the one there),
# writes what the package holds besides the binary to target/deb-assets/ — the manual pages
# (`sluice man`, `sluice man COMMAND`), the bash, zsh and fish completions (`sluice completions
# SHELL`), config/sluice.service with /usr/bin/sluice — then runs `cargo deb --no-build`. Prints
# the path of the .deb. The package: /usr/bin/sluice; /etc/sluice/sluice.toml (config/sluice.toml,
# a conffile: an edited one survives upgrades); the unit, enabled and started on install (it runs
# `sluice check` before every start and reload); man pages; completions; the documentation.
# Install it with `apt install ./target/debian/sluice_*.deb`.
# Needs cargo-deb (`cargo install cargo-deb --locked`; scripts/test.sh installs it) and dpkg-dev.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
die() { echo "deb.sh: $*" >&2; exit 1; }

build=1 profile=release out=target/debian
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --no-build) build=0; shift ;;
    --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
    -*) die "unknown option $1" ;;
    *) out="$1"; shift ;;
  esac
done
command -v cargo-deb >/dev/null || die "cargo-deb is not installed: cargo install cargo-deb --locked"

if [[ $build -eq 1 ]]; then
  cargo build --locked --profile "$profile" --bin sluice
fi
target_dir="$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
dir="$profile"; [[ $profile == dev ]] && dir=debug
sluice="$target_dir/$dir/sluice"
[[ -x $sluice ]] || die "$sluice is not built (run without --no-build)"

# Cargo.toml's assets name these paths, relative to the repository.
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$sluice" man >"$assets/man/sluice.1"
# One page per command, as `sluice --help` lists them.
commands="$("$sluice" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on && $1 != "help" { print $1 }')"
[[ -n $commands ]] || die "no commands in sluice --help"
for c in $commands; do
  "$sluice" man "$c" >"$assets/man/sluice-$c.1"
done
"$sluice" completions bash >"$assets/completions/sluice"
"$sluice" completions zsh >"$assets/completions/_sluice"
"$sluice" completions fish >"$assets/completions/sluice.fish"
# The unit as the package installs it: the binary in /usr/bin, the by-hand instructions left out.
{
  echo "# sluice as a systemd service, installed by the sluice package (config/sluice.service in"
  echo "# its source; configuration: /etc/sluice/sluice.toml)."
  sed -e '1,/^\[Unit\]$/{/^#/d}' -e 's|/usr/local/bin/sluice|/usr/bin/sluice|g' config/sluice.service
} >"$assets/sluice.service"

mkdir -p "$out"
cargo deb --no-build --strip --profile "$profile" --output "$out" --quiet \
  | tail -n 1
