#!/usr/bin/env bash
# Quick start 2: install what is needed, then build and run every test:
#   1. unit tests, fuzz-corpus replays, e2e and packaging checks (gcc, -Werror)
#   2. the unit tests of a release build (--buildtype=release: -O3, NDEBUG), the
#      configuration the Dockerfile and users build
#   3. the same unit and corpus suites under ASan+UBSan
#   4. short libFuzzer runs of every fuzz target (clang)
# Ends with one line "N passed, N failed" summing the four stages.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0
log=build-logs; mkdir -p "$log"

# run_tests NAME BUILDDIR "MESON TEST ARGS": one meson test run, its counts added
run_tests() {
  local name=$1 dir=$2 targs=$3
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs $targs 2>&1 | tee "$log/$name-test.log" | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout|Skipped):'
  local ok fail to
  ok=$(awk '/^Ok:/{print $2}' "$log/$name-test.log" | tail -1)
  fail=$(awk '/^Fail:/{print $2}' "$log/$name-test.log" | tail -1)
  to=$(awk '/^Timeout:/{print $2}' "$log/$name-test.log" | tail -1)
  if [ -z "$ok" ]; then echo "$name: no test summary"; failed=$((failed + 1)); return; fi
  if [ "${fail:-0}" -gt 0 ] || [ "${to:-0}" -gt 0 ]; then
    echo "-- $name: output of the failing tests (last 200 lines; all in $log/$name-test.log)"
    grep -vE '^ *[0-9]+/[0-9]+ .* (OK|SKIP|EXPECTEDFAIL) ' "$log/$name-test.log" | tail -200
  fi
  passed=$((passed + ok)); failed=$((failed + ${fail:-0} + ${to:-0}))
}

# run_stage NAME BUILDDIR "SETUP ARGS" "MESON TEST ARGS" ["MESON TEST ARGS" of a second run]
run_stage() {
  local name=$1 dir=$2 setup=$3 targs=$4 targs2=${5:-}
  echo "== $name"
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    if ! meson setup "$dir" $setup >"$log/$name-setup.log" 2>&1; then
      cat "$log/$name-setup.log"; echo "$name: meson setup failed"; failed=$((failed + 1)); return
    fi
  fi
  if ! ninja -C "$dir" >"$log/$name-build.log" 2>&1; then
    tail -50 "$log/$name-build.log"; echo "$name: build failed"; failed=$((failed + 1)); return
  fi
  run_tests "$name" "$dir" "$targs"
  [ -z "$targs2" ] || run_tests "$name-2" "$dir" "$targs2"
}

# the e2e suite waits on compressed scenarios far more than it computes (its processes
# use about a tenth of a core each): four files at a time, after everything else
run_stage main build "" "--no-suite e2e" "--suite e2e --num-processes 4"
run_stage release build-release "--buildtype=release" "--suite unit"
run_stage asan build-asan "-Db_sanitize=address,undefined -Db_lundef=false" "--suite unit --suite fuzz"
CC=clang run_stage fuzz build-fuzz "-Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false" "--suite fuzz-smoke"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
