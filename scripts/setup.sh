#!/usr/bin/env bash
# Install the Debian 12 packages gpuscaler needs to build, test and run its
# e2e suite. Idempotent: apt is only invoked for packages that are missing.
# usage: scripts/setup.sh [build|test]
set -euo pipefail
mode=${1:-build}
pkgs=(build-essential meson ninja-build pkg-config libuv1-dev libcurl4-openssl-dev
      libjansson-dev libyaml-dev libssl-dev zlib1g-dev libcmocka-dev node-llhttp python3 openssl
      curl)
if [ "$mode" = test ]; then
  pkgs+=(clang libclang-rt-14-dev llvm python3-jsonschema python3-yaml wrk prometheus nodejs libfaketime
         golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
         golang-gopkg-yaml.v3-dev golang-github-burntsushi-toml-dev golang-github-gobwas-glob-dev
         golang-github-xeipuuv-gojsonschema-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
