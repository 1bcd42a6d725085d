#!/usr/bin/env bash
# The Rust HTTP suites (tests/it/http_*.rs) with every test server's default catalog on S3.
#
#   tests/http_on_s3.sh [extra cargo args, e.g. --locked]
#
# Starts a throwaway SeaweedFS with STS (scripts/s3-server.sh, loopback only), then runs
# `cargo test --release --test it -- http_api:: http_errors:: http_idempotency::
# http_auth:: http_scan:: http_notifications::` with FLOE_TEST_S3_ENDPOINT
# set: each test server's default catalog is then an S3 catalog with a warehouse of its
# own (tests/it/common/files.rs), the server
# holds the S3 admin keys (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as a deployed one
# would), and the tests' file checks (a purge deleted the table's files, a refused
# request wrote nothing) read the bucket. The S3 server is stopped and deleted afterwards.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
S3_SCRIPT="$ROOT/scripts/s3-server.sh"
S3_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-http-s3.XXXXXX")"

cleanup() { bash "$S3_SCRIPT" stop "$S3_DIR" || true; }
trap cleanup EXIT

# shellcheck source=scripts/service.sh
source "$ROOT/scripts/service.sh"

endpoint=""
for attempt in 1 2 3; do
  if endpoint="$(bash "$S3_SCRIPT" start "$S3_DIR" "$(service_free_port)")"; then
    endpoint="$(printf '%s\n' "$endpoint" | tail -n 1)"
    break
  fi
  echo "[http-on-s3] the S3 server did not start (attempt $attempt)" >&2
  endpoint=""
done
[[ -n "$endpoint" ]] || { echo "[http-on-s3] ERROR: no S3 server" >&2; exit 1; }
echo "[http-on-s3] S3 server at $endpoint"

# The fixed identity and role of scripts/s3-server.sh.
export FLOE_TEST_S3_ENDPOINT="$endpoint"
export FLOE_TEST_S3_BUCKET=lake
export FLOE_TEST_S3_ROLE_ARN="arn:aws:iam::000000000000:role/FloeVended"
export AWS_ACCESS_KEY_ID=floe-admin
export AWS_SECRET_ACCESS_KEY=floe-admin-secret
export AWS_REGION=us-east-1

cd "$ROOT"
cargo test --release --test it "$@" -- http_api:: http_errors:: http_idempotency:: \
  http_auth:: http_scan:: http_notifications::
