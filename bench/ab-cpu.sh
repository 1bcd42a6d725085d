#!/usr/bin/env bash
# Two builds of Floe on the side by side's warmed-up read/write mix, with the server's
# CPU per request (steadier than requests/s on a shared host):
#
#   bench/ab-cpu.sh OLD_BINARY NEW_BINARY [RUNS] [RATIO]
#
# For each run (default 3) and each binary, alternating (old first in odd runs, new
# first in even ones; use an even RUNS): a fresh embedded server
# (--auth none --log warn), `floe bench create-tree` (the Polaris tree: width 2, depth 7,
# 5 tables and 3 views per namespace), then `floe bench read-update` at read/write ratio
# RATIO (default 0.5), 50 users, WARM s of warm-up (default 20) and DUR s measured
# (default 20). The server's user+system CPU is read from /proc over the measured part;
# one line per run: requests/s, CPU µs per request, read and write p50/p99 (ms), RSS,
# the CPU of the embedded store's commit thread (its one serial section) per write, and
# the commit cache's misses in the measured part (`-` for a build without the metric).
# The mix's documents grow as it runs (each write adds a property), and on 2026-12-01 the
# then 32 MiB default stopped holding every model about 30 s in (64 MiB since 2026-12-02):
# misses say when a run did. 128 MiB since 2026-12-02's evening held the mix for 120 s.
#
# Environment: WARM, DUR; ARGS (more `serve` arguments for both sides).
#
# Each server starts once the disk is quiet (`bench/quiet-disk.sh`): a few seconds after
# the last run, longer after another A/B's cleanup.
#
# Each run's files are kept until the end (or until the disk runs low): ext4 without a
# journal skips inodes freed in the last minute when it allocates one, so a run started
# just after the last one's files were deleted spent ~7% of the server's CPU in that scan
# (`find_inode_bit` under `openat`), more for whichever side ran second. Deletions also
# slow the disk for a while after them (this host mounts `/` with online `discard`):
# hot-table commits fell from ~5,000 to ~1,700/s over back-to-back runs that each
# deleted their files (BENCHMARKS.md, "The commit thread asks for a short scheduler slice").
set -euo pipefail
# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"
# shellcheck source=bench/quiet-disk.sh
source "$(dirname "$0")/quiet-disk.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
# Two copies of one build make an A/A run: say so, since its ratios then measure only
# the noise (BENCHMARKS.md, "Documents packed with lz4", reported one such run as an A/B).
if cmp -s "$OLD" "$NEW"; then
  echo "note: $OLD and $NEW are the same file contents: this is an A/A run" >&2
fi
RUNS=${3:-3}
RATIO=${4:-0.5}
WARM=${WARM:-20}
DUR=${DUR:-20}
TREE=(--namespace-width 2 --namespace-depth 7 --tables-per-namespace 5 --views-per-namespace 3)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# The commit thread's ticks (thread names are cut to 15 bytes in comm).
# 0 for a build without one (before group commit).
cticks() {
  local n=0
  for t in /proc/"$1"/task/*; do if grep -q floe-sqlite-com "$t/comm"; then n=$(awk '{print $14+$15}' "$t/stat"); fi; done
  echo "$n"
}
# The commit cache's misses so far (empty for a build without the metric).
misses() {
  curl -sf "http://127.0.0.1:$1/metrics" | awk '/^floe_cache_lookups_total\{cache="commit",result="miss"\}/ {print $2}' || true
}
kept=()
cleanup() { if ((${#kept[@]})); then rm -rf "${kept[@]}"; fi; }
trap cleanup EXIT
for r in $(seq "$RUNS"); do
  # Odd runs start with the old build, even runs with the new. With a fixed order, the
  # side that ran second measured a few % slower (two sets of 3 pairs with the order
  # swapped, 2026-11-27; the cause was not found), which biased every pair one way.
  order=(old new)
  if (( r % 2 == 0 )); then order=(new old); fi
  for side in "${order[@]}"; do
    # A run writes up to ~300 MiB of metadata files a second of the mix (12 GiB for the
    # default 40 s); with the old fixed 12 GiB check, a 140 s run filled the disk.
    if (( $(df --output=avail -k /tmp | tail -1) < (WARM + DUR) * 300 * 1024 )); then
      # Low on space: delete, then wait out the minute those inodes are skipped for.
      cleanup; kept=(); sync; sleep 65
    fi
    # The last run's writes (or the last A/B's deletions) settled first (`quiet-disk.sh`).
    wait_for_quiet_disk
    if [[ $side == old ]]; then bin=$OLD; else bin=$NEW; fi
    port=$(service_free_port)
    dir=$(mktemp -d /tmp/floe-ab-cpu.XXXXXX)
    # shellcheck disable=SC2086
    "$bin" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" --auth none --log warn ${ARGS:-} > "$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
    # The catalog's files under the run's directory, removed with it (the default base
    # location, file:///tmp/polaris as in Polaris's tool, keeps gigabytes per run).
    "$NEW" bench --quiet --url "http://127.0.0.1:$port" create-tree "${TREE[@]}" \
      --base-location "file://$dir/warehouse" > /dev/null 2>&1
    "$NEW" bench --quiet --url "http://127.0.0.1:$port" read-update "${TREE[@]}" \
      --read-write-ratio "$RATIO" --users 50 --warmup "${WARM}s" --duration "${DUR}s" > "$dir/out" 2>&1 &
    bench=$!
    sleep "$WARM"
    t0=$(ticks $pid); c0=$(cticks $pid); m0=$(misses "$port")
    wait $bench || true
    t1=$(ticks $pid); c1=$(cticks $pid); m1=$(misses "$port")
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    python3 - "$side" "$r" "$t0" "$t1" "$dir/out" "$rss" "$c0" "$c1" "${m0:-}" "${m1:-}" <<'PY'
import re, sys
side, run, t0, t1, out, rss, c0, c1, m0, m1 = sys.argv[1:]
rows = {}
for line in open(out):
    # count, then ok, failed, retried, mean, min, p50, p75, p99, max, req/s
    m = re.match(r"^\[(Read|Write)\]\s+(\d+)" + r"\s+([\d.]+)" * 10, line)
    if m:
        rows[m.group(1)] = (int(m.group(2)), [float(x) for x in m.groups()[2:]])
n = sum(c for c, _ in rows.values())
cpu_us = (int(t1) - int(t0)) * 1e4 / max(n, 1)  # ticks are 10 ms
rps = sum(v[-1] for _, v in rows.values())
r, w = rows["Read"][1], rows["Write"][1]
print(f"{side} run {run}: {rps:7.0f} req/s  cpu/req {cpu_us:6.1f} us  "
      f"read p50 {r[5]:.2f} p99 {r[7]:.2f}  write p50 {w[5]:.2f} p99 {w[7]:.2f}  rss {int(rss)//1024} MiB  "
      f"commit thread {(int(c1)-int(c0))*1e4/max(rows['Write'][0],1):.1f} us/write  "
      f"commit cache misses {int(float(m1)) - int(float(m0)) if m0 and m1 else '-'}")
PY
    kill $pid; wait $pid 2>/dev/null || true
    kept+=("$dir")
  done
done
