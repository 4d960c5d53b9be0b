#!/usr/bin/env bash
# Quick start 1: install what is needed, build gpuscaler and run
# `gpuscaler simulate` on the bundled trace. The report lands in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
mkdir -p out
build/cmd/gpuscaler/gpuscaler simulate --report out/simulate.svg --timeline out/timeline.csv "$@"
echo
echo "report: $(pwd)/out/simulate.svg (chart), $(pwd)/out/timeline.csv (per-interval timeline)"
