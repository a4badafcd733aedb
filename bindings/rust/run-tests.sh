#!/bin/sh
# Runs the Rust bindings' tests (cargo test --offline: unit, integration and
# doc tests of elastic-sys, elastic and the demo trainer) against the library
# in ELASTIC_LIB_DIR, as make test does through test_bindings_rust.c.
#   run-tests.sh            plain library
#   run-tests.sh asan       ASan/UBSan library: every test program (doc tests
#                           included) links the ASan runtime first, with its
#                           preinit entry (elastic-sys/build.rs)
set -eu
cd "$(dirname "$0")"
: "${ELASTIC_LIB_DIR:?set ELASTIC_LIB_DIR to the directory of libelastic.so}"
root=$(cd ../.. && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/build/rust}"
export LD_LIBRARY_PATH="$ELASTIC_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo=${CARGO:-cargo}
# Under `make -jN test` the make jobserver's descriptors are named in MAKEFLAGS
# but not inherited through the test runner: cargo would fail to join it.
unset MAKEFLAGS MFLAGS CARGO_MAKEFLAGS
case "${1:-plain}" in
plain)
    exec "$cargo" test --offline --workspace ;;
asan)
    ELASTIC_SANITIZER_RUNTIME=asan exec "$cargo" test --offline --workspace ;;
*)
    echo "usage: run-tests.sh [plain|asan]" >&2; exit 2 ;;
esac
