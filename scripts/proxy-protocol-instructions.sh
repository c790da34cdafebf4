#!/usr/bin/env bash
# proxy-protocol-instructions.sh — what reading a PROXY protocol header (`listen … proxy_protocol`) costs,
# in instructions per connection: the same on a busy machine, where CPU time per connection swings more
# than the cost being measured.
#
# Usage:
#   scripts/proxy-protocol-instructions.sh [N]      # default N = 1000 connections per measurement
#
# sluice (the release build, one worker: SLUICE_WORKERS=1) under `valgrind --tool=callgrind`, with two
# listeners answering `return 200`: one plain, one with `proxy_protocol` and `real_ip` trusting loopback.
# A python3 client opens connections one after another, each sending one request with `Connection:
# close` and reading the answer to its end:
#   plain   no header, to the plain listener (what every connection cost before)
#   v1      `PROXY TCP4 …` to the proxy_protocol listener, each from another client address
#   v2      the binary version 2 header (with a 4-byte TLV), likewise
# and then, over one kept-alive connection, N requests: ka-plain (no header, the plain listener) and
# ka-v1 (the header once, the proxy_protocol listener): what each request pays after the header.
# Each mode is run with 100 and with 100 + N connections; the difference, divided by N, is the
# instructions per connection. Prints them and v1/plain, v2/plain. Needs valgrind and python3.
set -euo pipefail
export LC_ALL=C
n="${1:-1000}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v valgrind >/dev/null || { echo "proxy-protocol-instructions.sh: valgrind is not installed" >&2; exit 1; }
cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
work="$(mktemp -d -t sluice-ppir.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/callgrind.sh disable=SC1091
source "$repo/scripts/callgrind.sh"

cat >"$work/client.py" <<'EOF'
import socket, struct, sys
port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
request = b"GET /r HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
sig = b"\r\n\r\n\x00\r\nQUIT\n"
if mode.startswith("ka-"):
    # One kept-alive connection: the header once, then n requests.
    s = socket.create_connection(("127.0.0.1", port))
    if mode == "ka-v1":
        s.sendall(b"PROXY TCP4 10.9.0.1 10.0.0.1 1024 443\r\n")
    for i in range(n):
        s.sendall(b"GET /r HTTP/1.1\r\nHost: a\r\n\r\n")
        got = b""
        while not got.endswith(b"\r\n\r\nok\n"):
            chunk = s.recv(4096)
            if not chunk:
                sys.exit(f"{mode}: closed at request {i}")
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            sys.exit(f"{mode}: request {i} answered {got[:40]!r}")
    sys.exit(0)
for i in range(n):
    a, b = (i >> 8) & 255, i & 255
    if mode == "v1":
        head = b"PROXY TCP4 10.9.%d.%d 10.0.0.1 %d 443\r\n" % (a, b, 1024 + i)
    elif mode == "v2":
        block = bytes([10, 9, a, b, 10, 0, 0, 1]) + struct.pack(">HH", 1024 + i, 443)
        tlv = b"\x04\x00\x01\x00"
        head = sig + b"\x21\x11" + struct.pack(">H", len(block) + len(tlv)) + block + tlv
    else:
        head = b""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head + request)
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    s.close()
    if not got.startswith(b"HTTP/1.1 200"):
        sys.exit(f"{mode}: connection {i} answered {got[:40]!r}")
EOF

plain_port=$(free_port)
pp_port=$(free_port)
cat >"$work/sluice.toml" <<EOF
[[servers]]
listen = "127.0.0.1:$plain_port"
[[servers.locations]]
path   = "/"
return = { status = 200, body = "ok\n" }

[[servers]]
listen  = "127.0.0.1:$pp_port proxy_protocol"
real_ip = { from = ["127.0.0.1"], header = "proxy_protocol" }
[[servers.locations]]
path   = "/"
return = { status = 200, body = "ok\n" }
EOF

# instructions MODE COUNT → sluice's total instructions (Ir) for that run
instructions() {
  local port=$pp_port
  [[ $1 == plain || $1 == ka-plain ]] && port=$plain_port
  SLUICE_WORKERS=1 callgrind_ir "$work/callgrind.$1.$2" "http://127.0.0.1:$plain_port/" \
    python3 "$work/client.py" "$port" "$1" "$2" -- \
    "$repo/target/release/sluice" --config "$work/sluice.toml" || exit 1
}

echo "instructions per connection of one request (callgrind, sluice with one worker, $n connections, startup subtracted)"
printf '%-8s %12s %10s\n' mode "Ir/conn" "x plain"
declare -A per=()
for mode in plain v1 v2; do
  small=$(instructions "$mode" 100)
  big=$(instructions "$mode" $((100 + n)))
  per[$mode]=$(((big - small) / n))
  printf '%-8s %12s %10s\n' "$mode" "${per[$mode]}" \
    "$(awk -v a="${per[$mode]}" -v b="${per[plain]}" 'BEGIN { printf "%.3f", a / b }')"
done

echo
echo "instructions per request over one kept-alive connection ($n requests, startup subtracted)"
printf '%-8s %12s %10s\n' mode "Ir/req" "x plain"
for mode in ka-plain ka-v1; do
  small=$(instructions "$mode" 100)
  big=$(instructions "$mode" $((100 + n)))
  per[$mode]=$(((big - small) / n))
  printf '%-8s %12s %10s\n' "$mode" "${per[$mode]}" \
    "$(awk -v a="${per[$mode]}" -v b="${per[ka-plain]}" 'BEGIN { printf "%.3f", a / b }')"
done
