# shellcheck shell=bash
# callgrind.sh — sourced (not run) by bench.sh (--only instructions), topkeys-instructions.sh and
# proxy-protocol-instructions.sh:
# one server under `valgrind --tool=callgrind`, one client run against it, the instructions counted.
#
#   callgrind_ir OUT URL CLIENT… -- SERVER…
#
# starts SERVER… under callgrind (its profile written to OUT, valgrind's messages to OUT.err), waits
# until URL answers with any status (a refused connection costs the server nothing, so the number of
# tries does not change the count), runs CLIENT…, then stops the server with SIGTERM (callgrind
# writes the profile as the process exits) and prints the server's total instructions (Ir), all its
# threads. The environment of the call reaches the server (`SLUICE_WORKERS=1 callgrind_ir …`). A
# failed client stops the server and returns 1. Only the server is counted: the client, curl and
# anything the server talks to (an upstream) run outside valgrind. Needs valgrind and curl.

# free_port → a port on 127.0.0.1 that nothing listens on now (the scripts that source this start
# their servers there).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

callgrind_ir() {
  local out=$1 url=$2 pid
  shift 2
  local client=()
  while [[ $# -gt 0 && $1 != -- ]]; do client+=("$1"); shift; done
  shift
  valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>"$out.err" &
  pid=$!
  for _ in $(seq 600); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)" != 000 ]] && break
    kill -0 "$pid" 2>/dev/null || { echo "callgrind_ir: $1 exited: $(tail -n 5 "$out.err")" >&2; return 1; }
    sleep 0.1
  done
  if ! "${client[@]}"; then
    kill -TERM "$pid"
    wait "$pid" || true
    return 1
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}
