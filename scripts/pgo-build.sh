#!/usr/bin/env bash
# Builds Floe's server with profile-guided optimisation (PGO):
#
#   scripts/pgo-build.sh                        # -> target/pgo/floe
#   scripts/pgo-build.sh --check-training BIN   # only the training workloads, on BIN
#
# Three steps: a release build instrumented to count which branches and calls run
# (`-Cprofile-generate`), a training run of that build on `floe bench`'s workloads, and
# the release build again with those counts (`-Cprofile-use`), so that LLVM lays out hot
# code together and inlines by what runs rather than by guesses. BENCHMARKS.md ("The
# release build with profile-guided optimisation") measures what it gives.
#
# The training covers both configurations a server runs in: the defaults
# (authentication on, a log line per request) and `--auth none --log warn`, each with
# the Polaris tree's creation, the 50/50 and 99/1 read/write mixes, single-endpoint
# loads and hot-table commits. Paths it never runs (PostgreSQL, object storage, events
# to a broker) are laid out as cold: still correct, perhaps slower than in the plain
# release build; the PostgreSQL store's 50/50 mix, whose store code the training never
# runs, was no slower (BENCHMARKS.md).
#
# `--check-training` runs the training on a plain build, writing no profile: what CI does
# (`scripts/test-all.sh`), so that a change to `floe bench` or the server that breaks
# the training is found without CI paying for two more whole-program builds.
#
# Needs `llvm-profdata` of the LLVM version rustc uses (`rustc -vV`), installed with
# apt-get as `llvm-<major>` when missing. Each build rebuilds every crate (new compiler
# flags): on 2 cores the instrumented one took 18.5 min, the optimised one 12, the
# training 2. Both have target directories of their own under target/pgo, so the plain
# build's is left alone.
#
# Environment: PGO_TRAIN_SECONDS (default 15: seconds per mix), PGO_TREE_DEPTH (6).
set -euo pipefail
if [[ ${1:-} == --check-training ]]; then
  check_bin=$(realpath "${2:?usage: pgo-build.sh --check-training BINARY}")
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"
out=$root/target/pgo
seconds=${PGO_TRAIN_SECONDS:-15}
depth=${PGO_TREE_DEPTH:-6}

# One server, trained on every workload. `$1` is `auth` (the defaults, the client logging
# in) or `none` (`--auth none --log warn`).
train() {
  local port auth=() serve=()
  if [[ $1 == auth ]]; then
    auth=(--client-id pgo-trainer --client-secret pgo-trainer-secret)
  else
    serve=(--auth none --log warn)
  fi
  port=$(service_free_port)
  dir=$(mktemp -d "$out/train.XXXXXX")  # global: the exit trap removes it
  FLOE_BOOTSTRAP_CREDENTIALS=pgo-trainer,pgo-trainer-secret \
    LLVM_PROFILE_FILE="$out/profiles/server/floe-%p.profraw" \
    "$bin" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" "${serve[@]}" > "$dir/log" 2>&1 &
  server=$!
  # Until it answers, it exits, or 30 s pass.
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$port/readyz" > /dev/null && break
    kill -0 "$server" 2> /dev/null || break
    sleep 0.1
  done
  if ! curl -sf "http://127.0.0.1:$port/readyz" > /dev/null; then
    echo "the training server did not get ready; its log:" >&2
    cat "$dir/log" >&2
    exit 1
  fi
  local tree=(--namespace-width 2 --namespace-depth "$depth" --tables-per-namespace 5 --views-per-namespace 3)
  # The load generator is the same binary; its own counts (17 MB a run) are not written.
  # A workload whose requests failed would train the error paths: it stops the script.
  client() {
    LLVM_PROFILE_FILE=/dev/null \
      "$bin" bench --quiet --url "http://127.0.0.1:$port" "${auth[@]}" "$@" > "$dir/bench.out"
    if grep -qE 'errors:|[1-9][0-9]* failed' "$dir/bench.out"; then
      echo "training workload '$1' had failed requests:" >&2
      cat "$dir/bench.out" >&2
      exit 1
    fi
  }
  client create-tree "${tree[@]}" --base-location "file://$dir/warehouse"
  client read-update "${tree[@]}" --read-write-ratio 0.5 --users 50 --warmup 2s --duration "${seconds}s"
  client read-update "${tree[@]}" --read-write-ratio 0.99 --users 50 --warmup 2s --duration "${seconds}s"
  client read-tree "${tree[@]}"
  for endpoint in get-table list-table get-namespace list-namespace; do
    client endpoint "$endpoint" --namespaces 10 --tables-per-namespace 10 --duration 3s
  done
  client events --sink none --tables 1 --users 10 --duration 5s
  kill -TERM "$server"
  # The counts are written when the server exits.
  if ! wait "$server"; then
    echo "the training server exited with an error; its log:" >&2
    cat "$dir/log" >&2
    exit 1
  fi
  server=""
  rm -rf "$dir"
  dir=""
}
# Both configurations, one server each.
train_both() {
  echo "== training workloads on $bin: the defaults"
  train auth
  echo "== training workloads on $bin: --auth none --log warn"
  train none
}
server=""
dir=""
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2> /dev/null || true; wait "$server" 2> /dev/null || true; fi
  if [[ -n $dir ]]; then rm -rf "$dir"; fi
}
trap cleanup EXIT

if [[ ${1:-} == --check-training ]]; then
  bin=$check_bin
  mkdir -p "$out"
  train_both
  echo "== the training workloads ran"
  exit 0
fi

# llvm-profdata must read the raw profiles rustc's LLVM writes: same major version.
llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
profdata=$(command -v "llvm-profdata-$llvm" || true)
if [[ -z $profdata ]]; then
  echo "== installing llvm-$llvm for llvm-profdata"
  sudo=""
  if [[ $(id -u) != 0 ]]; then sudo=sudo; fi
  $sudo apt-get update -q > /dev/null
  $sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q "llvm-$llvm" > /dev/null
  profdata=$(command -v "llvm-profdata-$llvm")
fi

rm -rf "$out/profiles"
mkdir -p "$out/profiles/server"

echo "== instrumented build"
# Build scripts run instrumented too; their counts land in profiles/build, unused.
RUSTFLAGS="-Cprofile-generate=$out/profiles/build" CARGO_TARGET_DIR="$out/instrumented" \
  cargo build --release --bin floe
bin=$out/instrumented/release/floe
train_both

"$profdata" merge -o "$out/floe.profdata" "$out/profiles/server"
echo "== profile: $(du -h "$out/floe.profdata" | cut -f1)"

echo "== optimised build"
# Cargo does not see a new profile behind the same flags: every crate is built afresh,
# so none keeps the last profile's counts.
rm -rf "$out/optimised"
# Functions the profile has no counts for (the tests', code changed since) are normal;
# LLVM's warning about each is noise here.
RUSTFLAGS="-Cprofile-use=$out/floe.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
  CARGO_TARGET_DIR="$out/optimised" cargo build --release --bin floe
cp "$out/optimised/release/floe" "$out/floe"
echo "== built $out/floe"
