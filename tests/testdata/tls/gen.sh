#!/bin/bash
# Regenerates the TEST-ONLY certificates in this folder: a CA, a server
# certificate for localhost/127.0.0.1, a client certificate and a cluster
# node's certificate (server and client use), all signed by
# the CA, plus a second CA that signed nothing here (for "wrong CA" tests).
# The keys are public by being in the repository: never use them anywhere
# else. Valid for 100 years so the tests do not start failing one day.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=kvstore test CA" \
  -keyout ca.key -out ca.pem 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=kvstore other CA" \
  -keyout other-ca.key -out other-ca.pem 2>/dev/null
make_cert() {  # name subject extensions
  openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile <(printf '%s\n' "$3") -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
make_cert server "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth"
make_cert client "/CN=kvstore test client" "extendedKeyUsage=clientAuth"
# A cluster node's certificate: it serves its ports and, as a client
# certificate, authenticates the node to its peers (mutual TLS).
make_cert node "/CN=127.0.0.1" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
rm -f ca.srl other-ca.key
chmod 644 ./*.key
echo "test certificates written to $(pwd)"
