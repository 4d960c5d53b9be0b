#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Make a private CA and a serving certificate for gpuscaler's external metrics
# API (Service <service>.<namespace>.svc), for the plain manifests in deploy/.
# It only writes files and prints the kubectl commands to run; it touches no
# cluster. (The Helm chart can use cert-manager instead.)
#
# usage: deploy/gen-certs.sh [-n NAMESPACE] [-s SERVICE] [-d DAYS] OUTDIR
# writes OUTDIR/ca.crt, OUTDIR/ca.key, OUTDIR/tls.crt, OUTDIR/tls.key
set -eu
ns=gpuscaler
svc=gpuscaler
days=365
while getopts n:s:d: opt; do
  case $opt in
    n) ns=$OPTARG ;;
    s) svc=$OPTARG ;;
    d) days=$OPTARG ;;
    *) echo "usage: $0 [-n NAMESPACE] [-s SERVICE] [-d DAYS] OUTDIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { echo "usage: $0 [-n NAMESPACE] [-s SERVICE] [-d DAYS] OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
umask 077

openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days "$days" \
  -keyout "$out/ca.key" -out "$out/ca.crt" -subj "/CN=gpuscaler-ca" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

cat > "$out/tls.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local
EXT
openssl req -new -nodes -newkey rsa:2048 -sha256 \
  -keyout "$out/tls.key" -out "$out/tls.csr" -subj "/CN=$svc.$ns.svc" 2>/dev/null
openssl x509 -req -sha256 -days "$days" -in "$out/tls.csr" \
  -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -extfile "$out/tls.ext" -out "$out/tls.crt" 2>/dev/null
rm -f "$out/tls.csr" "$out/tls.ext" "$out/ca.srl"
chmod 644 "$out/ca.crt" "$out/tls.crt"

cat <<MSG
Wrote $out/ca.crt, $out/tls.crt, $out/tls.key (CA key: $out/ca.key, keep it safe).
Next:
  kubectl create namespace $ns --dry-run=client -o yaml | kubectl apply -f -
  kubectl -n $ns create secret tls $svc-tls --cert=$out/tls.crt --key=$out/tls.key
  kubectl apply -k deploy/
  kubectl patch apiservice v1beta1.external.metrics.k8s.io --type=merge \\
    -p "{\"spec\":{\"caBundle\":\"\$(base64 -w0 $out/ca.crt)\"}}"
MSG
