#!/usr/bin/env bash
# What the flight recorder and the metrics counters (both on by default:
# HETCCL_FLIGHT_RECORDER=2000, HETCCL_METRICS=1) cost a call: the same
# AllReduce on two communicators of one job, one with both on and a split
# of it with both off, ROUNDS (default 9) rounds alternating between them,
# the best round of each side per size (hetccl-flight-cost,
# bench/flight_cost.cc). Both sides run in the same processes, so where the
# kernel placed the ranks is the same for both. Host ranks (NP, default 2)
# over TRANSPORT (default shm); PERF_ARGS adds hetccl-perf options (e.g.
# "--devices cuda,cuda --groups a,b": two GPU ranks in two groups).
#   bash bench/flight_overhead.sh [BUILD_DIR]
# Prints per size:
#   ratio flight_recorder+metrics <bytes> off_us=.. on_us=.. on/off=.. added_us=..
# Targets (issue of record): at most 1% from 1 MiB, 0.3 us per call at 8 B.
set -euo pipefail
build=${1:-build}
for size in 8 1048576; do
  # shellcheck disable=SC2086
  HETCCL_FLIGHT_RECORDER=2000 HETCCL_METRICS=1 "$build/tools/hetccl-flight-cost" --np "${NP:-2}" \
    --transport "${TRANSPORT:-shm}" -o allreduce -d float -b "$size" -e "$size" -n "${ITERS:-2000}" -w 200 -c 0 \
    --rounds "${ROUNDS:-9}" ${PERF_ARGS:-}
done
