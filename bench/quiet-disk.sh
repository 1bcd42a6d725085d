#!/usr/bin/env bash
# Sourced by the A/B scripts (`bench/ab-cpu.sh`, `bench/ab-together.sh`,
# `bench/ab-read-update.sh` and `bench/ab-create.sh` through `bench/ab-server.sh`):
# `wait_for_quiet_disk` returns once the disk has been quiet for about ten seconds.
#
# Why: each A/B run leaves tens of thousands of metadata files, deleted when the script
# ends. The deletion (a minute or more of `rm`, then this host's online discards) went on
# while the next A/B began, and its first pairs measured the disk's backlog, not the
# builds: on 2026-12-01 a run of cb25994 against b5547f2 started as the last one's
# cleanup ran, and its first pair served 1,866 and 3,488 req/s (write p99 287 and 363 ms)
# where the same builds served ~3,700 and ~10,000 two pairs later (BENCHMARKS.md).
#
# Quiet means /proc/pressure/io's `some avg10` (the share of the last ten seconds in which
# some task waited on I/O) under 5%. Without that file (no PSI), it returns at once.

wait_for_quiet_disk() {
  local psi=/proc/pressure/io some=0
  [[ -r $psi ]] || return 0
  for _ in $(seq 120); do
    some=$(awk '/^some/ { sub("avg10=", "", $2); print $2 }' "$psi")
    if awk -v s="$some" 'BEGIN { exit !(s < 5) }'; then
      return 0
    fi
    sleep 5
  done
  echo "note: the disk stayed busy for 10 minutes (I/O pressure ${some}%); measuring anyway" >&2
}
