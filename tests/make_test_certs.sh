#!/usr/bin/env bash
# Writes a throw-away PKI for the security tests into DIR (openssl CLI):
#   ca.pem                  the CA the servers and clients trust
#   server.pem, server.key  signed by ca.pem, for 127.0.0.1 and localhost
#   client.pem, client.key  signed by ca.pem (mutual TLS)
#   other_ca.pem            a CA that signed none of them
#   stranger.pem/.key       signed by other_ca.pem
#   expired.pem             signed by ca.pem, no longer valid (key: client.key)
#   token, wrong_token      two job tokens
# Usage: make_test_certs.sh DIR
set -euo pipefail
d="$1"
mkdir -p "$d"
cd "$d"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # ca NAME CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" 2>/dev/null
}
leaf() {  # leaf NAME CA DAYS [KEY]
  local k="${4:-$1.key}"
  [[ -f "$k" ]] || key "$k"
  openssl req -new -key "$k" -out "$1.csr" -subj "/CN=cohort $1" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
    -out "$1.pem" -days "$3" -extfile san.ext 2>/dev/null
  rm -f "$1.csr"
}
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
ca ca "cohort test CA"
ca other_ca "some other CA"
leaf server ca 2
leaf client ca 2
leaf stranger other_ca 2
leaf expired ca -1 client.key
printf 'job-token-%s\n' "$(openssl rand -hex 16)" > token
printf 'job-token-%s\n' "$(openssl rand -hex 16)" > wrong_token
