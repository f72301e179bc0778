#!/usr/bin/env bash
# GPU checks, for a machine with an NVIDIA GPU, CUDA, NCCL and (for the
# benchmark) PyTorch. Builds what the GPU tests need and runs them:
#   bash scripts/gpu-check.sh [STEP...]     steps: build unit matrix torch torchcalls overhead c10d fsdp2 train bench
#                                           matrix2 faults small mps overlap relay ucx (default: all but relay, ucx)
# UCX_PREFIX: a UCX install (include/, lib/) to build the ucx transport
# against where the machine has none, e.g. Debian's libucx0 and libucx-dev
# unpacked with dpkg -x; the ucx step runs the GPU matrix over it.
# Logs go to $LOGDIR (default build-gpu/logs). GoogleTest comes from
# HETCCL_GTEST_SOURCE (a googletest source tree) when no package is installed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build-gpu}
logs=${LOGDIR:-$build/logs}
steps=${*:-build unit matrix torch torchcalls overhead c10d fsdp2 train bench matrix2 faults small mps overlap}  # relay, ucx: on request
export NCCL_NVLS_ENABLE=0  # never NVLink multicast
mkdir -p "$logs"
status=0
step() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  echo "=== $name"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-15}" "$logs/$name.log"
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  [ $rc -ne 0 ] && status=1
  return 0
}
for s in $steps; do
  case $s in
    build)
      gtest=()
      [ -n "${HETCCL_GTEST_SOURCE:-}" ] && gtest=(-DHETCCL_GTEST_SOURCE="$HETCCL_GTEST_SOURCE")
      [ -n "${UCX_PREFIX:-}" ] && gtest+=(-DUCX_INCLUDE_DIR="$UCX_PREFIX/include")
      step configure 120 cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${gtest[@]}"
      step build 400 cmake --build "$build" -j "$(nproc)" --target hetccl hetccl-perf gpu_matrix test_kernels \
        hetccl-gpu-passthrough hetccl-dropin-host-cost unit_device unit_backend unit_nccl hetccl-info nccl_dropin test_dropin hetccl-membw \
        mp_emu_tests hetccl-flight-cost unit_core pair_relay_rank
      ;;
    unit)
      step unit_device 60 "$build/tests/unit/unit_device"
      step unit_backend 60 "$build/tests/unit/unit_backend"
      # One process per test (as ctest runs them): some load libraries for good.
      step unit_nccl 120 bash -c "for t in \$('$build/tests/unit/unit_nccl' --gtest_list_tests | awk '/^[^ ]/{s=\$1} /^  /{print s \$1}'); do '$build/tests/unit/unit_nccl' --gtest_filter=\$t --gtest_brief=1 || exit 1; done"
      step test_dropin 120 bash -c "for t in \$('$build/tests/dropin/test_dropin' --gtest_list_tests | awk '/^[^ ]/{s=\$1} /^  /{print s \$1}'); do '$build/tests/dropin/test_dropin' --gtest_filter=\$t --gtest_brief=1 || exit 1; done"
      step kernels 120 "$build/tests/gpu/test_kernels"
      step smoke 120 "$build/tools/hetccl-perf" --np 4 -g 1 -o allreduce -b 8 -e 64M -f 8 -n 3 -w 1 -c 1
      ;;
    matrix)  # one CUDA rank + 3 host ranks
      step matrix_1cuda_3host_shm 300 "$build/tests/gpu/gpu_matrix" --np 4 --devices cuda,host,host,host \
        --transport shm --mid "${MID:-266240}"
      ;;
    matrix2)  # two processes on one GPU, one group each
      step matrix_2cuda_groups_shm 200 "$build/tests/gpu/gpu_matrix" --np 2 --devices cuda,cuda --groups g0,g1 \
        --transport shm --mid "${MID:-266240}" --max 256
      step matrix_2cuda_groups_tcp 200 "$build/tests/gpu/gpu_matrix" --np 2 --devices cuda,cuda --groups g0,g1 \
        --transport tcp --mid "${MID:-266240}" --max 64
      ;;
    faults)  # the emu suite's tests of one GPU per group (a,b) on the real GPU, two processes on it: a peer
             # that exits under a staged, a border and a send call, abort releasing a waiting stream, the pair
             # channels, in place / PreMulSum / group calls on the border, calls on two streams, stream capture, graphs
             # (a refused capture; the flight record of a call handed off after one),
             # calls returning while the stream is held (a host function), a rank killed mid-call (kill -9) seen
             # within 5 s and a stopped one waited for
      step faults_cuda 400 env HETCCL_TEST_GPU=cuda "$build/tests/mp/mp_emu_tests" --gtest_brief=1 \
        --gtest_filter='EmuFaults.PeerExitsUnderAStreamOrderedCall:EmuFaults.PeerExitsUnderADeviceBorder*:EmuFaults.AbortReleases*:EmuDeadPeer.*:EmuBorder.*:*EmuBorderCalls.*/ab:*EmuStreams.*/ab_border:EmuCapture.*:EmuFlight.*:EmuGraphsRefused.*:EmuGraphsFlight.*:*EmuNoWait.*/ab_*:*EmuOverlap.*/ab*:-EmuDeadPeer.KillNineOfAGroupOfTwo*'
      ;;
    small)  # small AllReduce calls: two contexts on the GPU, under MPS, one CUDA and one host rank
      TAIL=40 step small_calls 400 bash "$here/bench/gpu_small_calls.sh" "$build"
      ;;
    mps)  # two processes on the GPU under CUDA MPS (one shared context, as two GPUs of their own would be:
          # every call on the device border, small AllReduce rounds in one kernel): the two-group matrix and
          # the fault tests
      if command -v nvidia-cuda-mps-control > /dev/null; then
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/hetccl-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/hetccl-mps-log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d
        step matrix_2cuda_groups_shm_mps 300 env HETCCL_DEBUG=INFO HETCCL_DEBUG_SUBSYS=INIT \
          "$build/tests/gpu/gpu_matrix" --np 2 --devices cuda,cuda --groups g0,g1 --transport shm \
          --mid "${MID:-266240}" --max 64
        grep -h "device border with" "$logs/matrix_2cuda_groups_shm_mps.log" | sed 's/^.*INIT //' | sort | uniq -c
        step faults_cuda_mps 300 env HETCCL_TEST_GPU=cuda "$build/tests/mp/mp_emu_tests" --gtest_brief=1 \
          --gtest_filter='EmuFaults.PeerExitsUnderAStreamOrderedCall:EmuFaults.PeerExitsUnderADeviceBorder*:EmuFaults.AbortReleases*:EmuDeadPeer.*:EmuBorder.*:*EmuBorderCalls.*/ab:*EmuStreams.*/ab_border:EmuCapture.*:EmuFlight.*:EmuGraphsRefused.*:EmuGraphsFlight.*:*EmuNoWait.*/ab_*:*EmuOverlap.*/ab*:-EmuDeadPeer.KillNineOfAGroupOfTwo*'
        echo quit | nvidia-cuda-mps-control
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
      else
        echo "=== mps: no nvidia-cuda-mps-control here: skipped"
      fi
      ;;
    torch)
      step torch_dropin 200 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$here/tools/hetccl-torch-run" \
        python3 "$here/tests/gpu/torch_dropin.py"
      # an all_reduce across two groups in a torch.cuda.CUDAGraph, replayed against eager ones
      step torch_graph_capture 200 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$here/tools/hetccl-torch-run" \
        python3 "$here/tests/gpu/torch_graph_capture.py"
      ;;
    torchcalls)  # every c10d call of the nccl backend: one group of one rank (straight to NCCL: the same results
                 # as NCCL alone), then two groups
      step torch_calls_nccl_alone 300 env HETCCL_EXPECT_DROPIN=0 python3 "$here/tests/gpu/torch_dropin_calls.py" \
        --world 1 --record "$logs/torch_calls_nccl_alone.json"
      step torch_calls_1group 300 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$here/tools/hetccl-torch-run" \
        python3 "$here/tests/gpu/torch_dropin_calls.py" --world 1 --compare "$logs/torch_calls_nccl_alone.json"
      step torch_calls_2groups 300 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" \
        "$here/tools/hetccl-torch-run" python3 "$here/tests/gpu/torch_dropin_calls.py" --world 2 --groups g0,g1
      # torch's watchdog aborts a hung communicator from its thread: an exception, no crash
      step torch_watchdog_abort 260 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" \
        "$here/tools/hetccl-torch-run" python3 "$here/tests/gpu/torch_watchdog_abort.py"
      # torch's flight recorder: the calls across groups recorded, a stalled rank's dump names the call
      step torch_flight_recorder 300 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" \
        "$here/tools/hetccl-torch-run" python3 "$here/tests/gpu/torch_flight_recorder.py"
      ;;
    overhead)  # one-group overhead of the drop-in against NCCL alone: the C API against NCCL in one process (ratio
      # per size, target 1.05x), the host time against stand-ins on this CPU (runtime calls per call), torch
      step passthrough_overhead 120 "$build/tools/hetccl-gpu-passthrough" 200
      step dropin_host_cost 120 "$build/tools/hetccl-dropin-host-cost"
      TAIL=12 step torch_dropin_overhead 400 bash "$here/bench/torch_dropin_overhead.sh" "$build"
      ;;
    c10d)  # the native torch backend: pip-install python/, then a CUDA rank and a CPU rank
      rm -rf "$build/pysite"
      step pip_hetccl_torch 400 env HETCCL_HOME="$build" python3 -m pip install --no-build-isolation --no-deps \
        --no-cache-dir --target "$build/pysite" "$here/python"
      step c10d_cuda_host 200 env PYTHONPATH="$build/pysite" C10D_TEST_VERBOSE=1 C10D_TEST_DEADLINE_S=180 \
        python3 "$here/tests/torch/c10d_collectives.py" \
        --devices cuda,host
      ;;
    fsdp2)  # fully_shard of a small transformer over four processes, a group each on one GPU (--groups a,a,b,b where
            # each group's ranks have GPUs of their own): a 1-D mesh and a (dp, tp) mesh, losses against one process;
            # through the drop-in, then the native backend (its package from the c10d step, installed here if missing)
      step fsdp2_dropin 400 env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$here/tools/hetccl-torch-run" \
        python3 "$here/tests/gpu/torch_fsdp2_subgroups.py" --backend nccl
      [ -d "$build/pysite/hetccl_torch" ] || step pip_hetccl_torch 400 env HETCCL_HOME="$build" python3 -m pip install \
        --no-build-isolation --no-deps --no-cache-dir --target "$build/pysite" "$here/python"
      step fsdp2_native 400 env PYTHONPATH="$build/pysite" python3 "$here/tests/gpu/torch_fsdp2_subgroups.py" \
        --backend hetccl
      ;;
    train)  # the four training layouts of docs/training
      step train 900 bash "$here/tests/train/run_compare.sh" "$build" "$logs/train"
      ;;
    bench)
      step passthrough 120 "$build/tools/hetccl-gpu-passthrough"
      step border_vs_gloo 300 bash "$here/bench/gpu_border_vs_gloo.sh" "$build"
      step two_groups 300 bash "$here/bench/gpu_two_groups.sh" "$build"
      step torch_two_groups 400 python3 "$here/bench/torch_two_groups.py" --dropin "$build/dropin/libnccl.so.2"
      ;;
    relay)  # GPU ranks on two emulated hosts (network namespaces where root and iproute2 are there, else hosts
      # on one network over loopback): every collective through the device border's relay, checked, then the
      # relay against staged and host ranks (ratio lines), AllReduce and send/recv (the pair relay), the pair relay's
      # small-message ping-pong, and the abort under a waiting send against NCCL's own abort
      step relay_check 300 python3 "$here/tests/multihost/check_emu_border.py" "$build/tools/hetccl-perf" --kind cuda \
        --pairs "$build/tests/multihost/pair_relay_rank"
      step relay_bench 400 python3 "$here/bench/gpu_relay_hosts.py" "$build" --kind cuda --rounds "${ROUNDS:-2}"
      step relay_bench_sendrecv 400 python3 "$here/bench/gpu_relay_hosts.py" "$build" --kind cuda --op sendrecv \
        --rounds "${ROUNDS:-2}"
      step relay_pingpong 200 python3 "$here/bench/pair_relay_pingpong.py" "$build" --kind cuda --rounds "${ROUNDS:-2}"
      step abort_time 200 python3 "$here/bench/abort_time.py" "$build" --kind cuda --rounds 3
      ;;
    ucx)  # the GPU matrix with the border over UCX: 1 CUDA + 3 host ranks (UCX_TLS=sm and tcp, plus
          # cuda_copy/cuda_ipc where UCX has them), staged; then two processes on the one GPU in two groups,
          # through the device border (its pair channels and segments) and staged over UCX (HETCCL_GPU_BORDER=0).
          # The logs' "border data path" lines say which path ran.
      lib=$(ls -d "${UCX_PREFIX:-/usr}"/lib/x86_64-linux-gnu 2>/dev/null || echo "${UCX_PREFIX:-/usr}/lib")
      ucxenv=(env HETCCL_UCX_LIB="$lib/libucp.so.0" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        UCX_MODULE_DIR="$lib/ucx" HETCCL_DEBUG=INFO HETCCL_DEBUG_SUBSYS=INIT,TRANSPORT)
      gpu=""
      [ -e "$lib/ucx/libuct_cuda.so.0" ] && gpu=",cuda_copy,cuda_ipc"
      for tls in sm tcp; do
        step "matrix_1cuda_3host_ucx_$tls" 240 "${ucxenv[@]}" UCX_TLS="$tls$gpu" \
          "$build/tests/gpu/gpu_matrix" --np 4 --devices cuda,host,host,host --transport ucx --mid "${MID:-266240}" \
          --max "${MAX:-64}"
      done
      step matrix_2cuda_groups_ucx 240 "${ucxenv[@]}" "$build/tests/gpu/gpu_matrix" --np 2 \
        --devices cuda,cuda --groups g0,g1 --transport ucx --mid "${MID:-266240}" --max "${MAX:-64}"
      step matrix_2cuda_groups_ucx_staged 240 "${ucxenv[@]}" HETCCL_GPU_BORDER=0 "$build/tests/gpu/gpu_matrix" --np 2 \
        --devices cuda,cuda --groups g0,g1 --transport ucx --mid "${MID:-266240}" --max "${MAX:-64}"
      grep -h "border data path" "$logs"/matrix_*ucx*.log | sed 's/^.*\(rank [0-9]*: border.*\)$/\1/' | sort | uniq -c
      ;;
    overlap)  # a 128 MiB all_reduce across the two groups beside 16 ms of matmuls, against pinned copies of the
              # same bytes; a DDP step with and without its gradient exchange; time-sliced and under MPS (50% of
              # the SMs each); OVERLAP_ARGS pass on (e.g. --modes mps --variant NAME:VAR=VALUE)
      TAIL=40 step overlap 590 python3 "$here/bench/gpu_overlap.py" --dropin "$build/dropin/libnccl.so.2" \
        ${OVERLAP_ARGS:-}
      ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
exit $status
