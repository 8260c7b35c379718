#!/usr/bin/env bash
# Prints the Secret cohort-security with real material for a job in
# NAMESPACE: a fresh job token, a CA, and one certificate (with its key)
# that every cohort process presents, as a server and as a client (mutual
# TLS). Its names are the ones the manifests dial and advertise:
#   cohort-coordinator[.NAMESPACE[.svc[.DOMAIN]]]  workers, shards -> coordinator
#   *.cohort-ps.NAMESPACE.svc[.DOMAIN]             workers -> each shard
#   localhost, 127.0.0.1                           kubectl port-forward
# Usage: gen-secret.sh NAMESPACE [DAYS] [CLUSTER_DOMAIN] > base/secret.yaml
#   DAYS: validity (default 365); CLUSTER_DOMAIN: default cluster.local.
# Written over base/secret.yaml (the placeholders) before `kubectl apply -k`;
# never commit it. Needs the openssl command.
set -euo pipefail
ns="${1:?usage: gen-secret.sh NAMESPACE [DAYS] [CLUSTER_DOMAIN]}"
days="${2:-365}"
domain="${3:-cluster.local}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}
key ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days "$days" \
  -subj "/CN=cohort CA ($ns)" 2>/dev/null
key tls.key
coordinator=cohort-coordinator
names=("DNS:$coordinator" "DNS:$coordinator.$ns" "DNS:$coordinator.$ns.svc"
       "DNS:$coordinator.$ns.svc.$domain" "DNS:*.cohort-ps.$ns.svc"
       "DNS:*.cohort-ps.$ns.svc.$domain" "DNS:localhost" "IP:127.0.0.1")
cat > leaf.ext <<EOF
basicConstraints=CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$(IFS=,; echo "${names[*]}")
EOF
openssl req -new -key tls.key -out tls.csr -subj "/CN=cohort ($ns)" 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -out tls.crt -days "$days" -extfile leaf.ext 2>/dev/null
# The CA's key is not needed again: a new certificate means a new CA.
printf 'job-token-%s\n' "$(openssl rand -hex 24)" > token

b64() { base64 -w0 < "$1"; }
cat <<EOF
# Made by deploy/k8s/gen-secret.sh for namespace $ns; valid $days days.
apiVersion: v1
kind: Secret
metadata:
  name: cohort-security
  namespace: $ns
  labels:
    app.kubernetes.io/name: cohort
type: Opaque
data:
  token: $(b64 token)
  tls.crt: $(b64 tls.crt)
  tls.key: $(b64 tls.key)
  ca.crt: $(b64 ca.crt)
EOF
