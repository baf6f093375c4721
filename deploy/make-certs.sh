#!/usr/bin/env bash
# Makes a private CA and the TLS certificates of a kvstore cluster with the
# openssl CLI (docs/security.md §2.2 says what each is for and how to rotate).
#
# Usage: deploy/make-certs.sh [--dir=DIR] [--days=N] [--nodes="kvserver1 kvserver2 ..."]
#                             [--renew] [--force]
#
#   DIR (default deploy/compose/.state/tls) gets:
#     ca.pem, ca.key          the CA (keep ca.key off the servers)
#     NAME.pem, NAME.key      one per node (default kvserver1..kvserver4): the
#                             node serves its control and RESP ports with it and
#                             presents it to its peers and to etcd (server and
#                             client use). Names: NAME, localhost, 127.0.0.1.
#     etcd.pem, etcd.key      etcd's (names: etcd, localhost, 127.0.0.1)
#     client.pem, client.key  for kvctl, redis-cli and applications (client use)
#   The same files serve the compose cluster (service names) and a cluster of
#   local processes (localhost / 127.0.0.1).
#
#   --days      validity of the leaf certificates (default 365; the CA: 10 years)
#   --renew     new keys and certificates for every leaf from the existing CA
#               (rotation): each pair is written beside the old one and renamed
#               over it, key first, so a server that reloads sees either the old
#               pair or the new one; kvserver picks them up without a restart
#   --force     start over: a new CA too (every client must get the new ca.pem)
#
# Without --renew or --force an existing file is left alone, so running it
# twice is harmless.
set -euo pipefail

dir="$(cd "$(dirname "$0")" && pwd)/compose/.state/tls"
days=365
nodes="kvserver1 kvserver2 kvserver3 kvserver4"
renew=0
force=0
for arg in "$@"; do
  case "$arg" in
    --dir=*) dir="${arg#--dir=}" ;;
    --days=*) days="${arg#--days=}" ;;
    --nodes=*) nodes="${arg#--nodes=}" ;;
    --renew) renew=1 ;;
    --force) force=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "make-certs.sh: unknown argument $arg (see --help)" >&2
      exit 2
      ;;
  esac
done
command -v openssl >/dev/null || {
  echo "make-certs.sh: openssl not found (Debian: apt-get install openssl)" >&2
  exit 1
}
[[ "$days" =~ ^[0-9]+$ ]] || {
  echo "make-certs.sh: --days must be a number of days" >&2
  exit 2
}

mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
umask 077

if [[ $force == 1 ]]; then
  rm -f ./*.pem ./*.key ./*.srl
fi
if [[ ! -f ca.pem || ! -f ca.key ]]; then
  openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -subj "/CN=kvstore cluster CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
  echo "made the CA: $dir/ca.pem"
fi

# leaf NAME SUBJECT_CN EXTENSIONS
leaf() {
  local name="$1" cn="$2" ext="$3"
  if [[ -f "$name.pem" && -f "$name.key" && $renew == 0 ]]; then
    return
  fi
  local tmp
  tmp="$(mktemp -d "$dir/.new.XXXXXX")"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn" -keyout "$tmp/key" -out "$tmp/csr" \
    2>/dev/null
  printf '%s\n' "$ext" >"$tmp/ext"
  openssl x509 -req -in "$tmp/csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$tmp/ext" -out "$tmp/pem" 2>/dev/null
  # Readable by the containers' users (the directory itself stays 0700 on
  # the host); the key first, then the certificate: see --renew.
  chmod 644 "$tmp/key" "$tmp/pem"
  mv -f "$tmp/key" "$name.key"
  mv -f "$tmp/pem" "$name.pem"
  rm -rf "$tmp"
  echo "made $dir/$name.pem"
}

for node in $nodes; do
  leaf "$node" "$node" "subjectAltName=DNS:$node,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
done
leaf etcd etcd "subjectAltName=DNS:etcd,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
leaf client "kvstore client" "extendedKeyUsage=clientAuth"
chmod 644 ca.pem
rm -f ca.srl
