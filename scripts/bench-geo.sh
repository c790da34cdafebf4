#!/usr/bin/env bash
# A geo of 100 000 networks, as people load from country lists: how long nginx and sluice take
# to load it (`nginx -t` against `sluice check`, the median of 5 each, same table), then the
# criterion bench `geo` (load through the configuration stages, the table alone, lookups, and
# the memory the table keeps). Needs nginx (installed if missing).
#
#   scripts/bench-geo.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5
[ "${1:-}" = "--runs" ] && runs="$2"

command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
cargo build --release -q
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/conf" "$dir/logs"

# The same 100 000 networks for both: 90 % IPv4 /12–/32, 10 % IPv6 /32–/64, 250 values.
/usr/bin/python3 - "$dir" <<'PY'
import random, sys, ipaddress
d = sys.argv[1]
r = random.Random(7)
lines = {}
i = 0
while len(lines) < 100_000:
    i += 1
    if i % 10 == 9:
        net = ipaddress.ip_network((r.getrandbits(64) << 64, 32 + r.randrange(33)), strict=False)
    else:
        net = ipaddress.ip_network((r.getrandbits(32), 12 + r.randrange(21)), strict=False)
    lines[str(net)] = f"c{r.randrange(250)}"
lines = list(lines.items())
with open(f"{d}/conf/geo.conf", "w") as f:
    f.writelines(f"{n} {v};\n" for n, v in lines)
with open(f"{d}/conf/nginx.conf", "w") as f:
    f.write("user root; pid logs/nginx.pid; error_log logs/error.log;\nevents {}\nhttp {\n"
            "  geo $country { default zz; include geo.conf; }\n"
            "  server { listen 127.0.0.1:1; return 200 $country; }\n}\n")
with open(f"{d}/sluice.toml", "w") as f:
    f.write('[geos.country]\ndefault = "zz"\n[geos.country.networks]\n')
    f.writelines(f'"{n}" = "{v}"\n' for n, v in lines)
    f.write('[[servers]]\nlisten = "127.0.0.1:1"\n[[servers.locations]]\npath = "/"\n'
            'return = { status = 200, body = "$country" }\n')
PY

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
n=$(for _ in $(seq "$runs"); do time_ms nginx -p "$dir/" -c "$dir/conf/nginx.conf" -t; done | median)
s=$(for _ in $(seq "$runs"); do time_ms target/release/sluice check --config "$dir/sluice.toml"; done | median)
echo "load 100 000 networks (median of $runs): nginx -t ${n} ms, sluice check ${s} ms ($(awk -v a="$s" -v b="$n" 'BEGIN {printf "%.2f", a / b}')× nginx)"

cargo bench -q --bench geo 2>&1 | grep -E "^geo|time:"
