#!/usr/bin/env bash
# tls-cert.sh — make the throw-away certificates config/tls.toml uses: a local test CA and a
# certificate for localhost and 127.0.0.1 (ECDSA P-256) that it signed, valid 30 days.
#
# Usage:
#   scripts/tls-cert.sh [DIR]      # default DIR: config/tls (git-ignored; never commit the keys)
#
# Then:
#   cargo run --release -- --config config/tls.toml
#   curl --cacert config/tls/ca.crt https://localhost:7443/burst
# Existing files are kept (delete DIR to make new ones).
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/config/tls}"
mkdir -p "$dir"
cd "$dir"
command -v openssl >/dev/null || { echo "openssl is not installed (apt-get install openssl)" >&2; exit 1; }

if [[ -s localhost.crt && -s localhost.key && -s ca.crt ]]; then
  echo "$dir: certificates already there ($(openssl x509 -noout -enddate -in localhost.crt))"
  exit 0
fi

ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 30 -subj "/CN=sluice example CA" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > localhost.ext
openssl req "${ec[@]}" -keyout localhost.key -out localhost.csr -subj "/CN=localhost" 2>/dev/null
openssl x509 -req -in localhost.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
  -extfile localhost.ext -out localhost.leaf.crt 2>/dev/null
# The chain a server sends: its certificate, then the CA's.
cat localhost.leaf.crt ca.crt > localhost.crt
rm -f localhost.csr localhost.ext localhost.leaf.crt ca.srl
chmod 600 ca.key localhost.key
echo "$dir: made ca.crt, localhost.crt (chain) and localhost.key ($(openssl x509 -noout -enddate -in localhost.crt))"
