#!/usr/bin/env bash
# Two builds of Floe on the side by side's warmed-up read/write mix, run AT THE SAME TIME,
# each with its own load generator, so that both see the same host:
#
#   bench/ab-together.sh OLD_BINARY NEW_BINARY [RUNS] [RATIO]
#
# Why: on this shared VM the host's speed drifts by ±10% between runs minutes apart
# (`bench/ab-cpu.sh` measured one build at 9,665 and 11,504 req/s in one session), which
# buries a change of a few %. Run together, the two servers share the cores through the
# whole measured part; the one that needs less CPU per request serves more requests, and
# a drift of the host slows both alike. The figures are not those of a server alone (each
# gets about half the machine): read the ratio, and the CPU per request. It cannot see a
# change in how a server uses the kernel's shared pools: pages one build hands back to the
# page allocator are as likely the other's next (BENCHMARKS.md, "Metadata files' pages
# dropped once synced"); use `bench/ab-cpu.sh` for those.
#
# For each run: two fresh embedded servers (--auth none --log warn), `floe bench
# create-tree` on each (the Polaris tree: width 2, depth 7, 5 tables and 3 views per
# namespace), then both `floe bench read-update` generators at once (ratio RATIO, default
# 0.5; USERS users each, default 25; WARM s of warm-up, default 20; DUR s measured, default
# 20). Odd runs start the old build's generator first, even runs the new one's. One line
# per side and run: requests/s, the server's CPU per request, p50s; then the run's ratio.
#
# Environment: WARM, DUR, USERS; ARGS (more `serve` arguments for both sides).
#
# Each run starts once the disk is quiet (`bench/quiet-disk.sh`).
set -euo pipefail
# shellcheck source=bench/quiet-disk.sh
source "$(dirname "$0")/quiet-disk.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
# Two copies of one build make an A/A run: say so, since its ratios then measure only
# the noise (BENCHMARKS.md, "Documents packed with lz4", reported one such run as an A/B).
if cmp -s "$OLD" "$NEW"; then
  echo "note: $OLD and $NEW are the same file contents: this is an A/A run" >&2
fi
RUNS=${3:-4}
RATIO=${4:-0.5}
WARM=${WARM:-20}
DUR=${DUR:-20}
USERS=${USERS:-25}
TREE=(--namespace-width 2 --namespace-depth 7 --tables-per-namespace 5 --views-per-namespace 3)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"
dirs=()
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if ((${#dirs[@]})); then rm -rf "${dirs[@]}"; fi
}
trap cleanup EXIT
for r in $(seq "$RUNS"); do
  order=(old new)
  if (( r % 2 == 0 )); then order=(new old); fi
  declare -A port pid dir bench t0 t1
  # Each run's files are kept until the end (or until the disk runs low), as in
  # `bench/ab-cpu.sh`: ext4 without a journal scans past inodes freed in the last minute
  # when it allocates one, which cost the next run's file creations several % of the CPU.
  if (( $(df --output=avail -k /tmp | tail -1) < 16 * 1024 * 1024 )); then
    if ((${#dirs[@]})); then rm -rf "${dirs[@]}"; fi; dirs=(); sync; sleep 65
  fi
  # The last run's writes (or the last A/B's deletions) settled first (`quiet-disk.sh`).
  wait_for_quiet_disk
  for side in "${order[@]}"; do
    if [[ $side == old ]]; then bin=$OLD; else bin=$NEW; fi
    port[$side]=$(service_free_port)
    dir[$side]=$(mktemp -d /tmp/floe-ab-together.XXXXXX)
    dirs+=("${dir[$side]}")
    # shellcheck disable=SC2086
    "$bin" serve --bind "127.0.0.1:${port[$side]}" --data-dir "${dir[$side]}/data" --auth none \
      --log warn ${ARGS:-} > "${dir[$side]}/log" 2>&1 &
    pid[$side]=$!
    pids+=("${pid[$side]}")
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:${port[$side]}/readyz" >/dev/null && break; sleep 0.1; done
    "$NEW" bench --quiet --url "http://127.0.0.1:${port[$side]}" create-tree "${TREE[@]}" \
      --base-location "file://${dir[$side]}/warehouse" > /dev/null 2>&1
  done
  for side in "${order[@]}"; do
    "$NEW" bench --quiet --url "http://127.0.0.1:${port[$side]}" read-update "${TREE[@]}" \
      --read-write-ratio "$RATIO" --users "$USERS" --warmup "${WARM}s" --duration "${DUR}s" \
      > "${dir[$side]}/out" 2>&1 &
    bench[$side]=$!
  done
  sleep "$WARM"
  for side in old new; do t0[$side]=$(ticks "${pid[$side]}"); done
  for side in old new; do wait "${bench[$side]}" || true; done
  for side in old new; do t1[$side]=$(ticks "${pid[$side]}"); done
  python3 - "$r" "${dir[old]}/out" "${t0[old]}" "${t1[old]}" "${dir[new]}/out" "${t0[new]}" "${t1[new]}" <<'PY'
import re, sys
run = sys.argv[1]
def read(out, t0, t1):
    rows = {}
    for line in open(out):
        # count, then ok, failed, retried, mean, min, p50, p75, p99, max, req/s
        m = re.match(r"^\[(Read|Write)\]\s+(\d+)" + r"\s+([\d.]+)" * 10, line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), [float(x) for x in m.groups()[2:]])
    n = sum(c for c, _ in rows.values())
    return (sum(v[-1] for _, v in rows.values()), (int(t1) - int(t0)) * 1e4 / max(n, 1),
            rows["Read"][1][5], rows["Write"][1][5])
got = {"old": read(*sys.argv[2:5]), "new": read(*sys.argv[5:8])}
for side, (rps, cpu, r50, w50) in got.items():
    print(f"{side} run {run}: {rps:7.0f} req/s  cpu/req {cpu:6.1f} us  read p50 {r50:.2f}  write p50 {w50:.2f}")
print(f"run {run}: new/old req/s {got['new'][0] / got['old'][0]:.3f}  "
      f"cpu/req {got['new'][1] / got['old'][1]:.3f}")
PY
  for side in old new; do kill "${pid[$side]}"; wait "${pid[$side]}" 2>/dev/null || true; done
  pids=()
  unset port pid dir bench t0 t1
done
