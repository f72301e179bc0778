# The commands of the README:
#   make demo   install what is missing, build libhetccl and hetccl-perf, run a 4-rank
#               AllReduce across two emulated vendor groups on this machine, print the table
#   make check  install what is missing, build, run the unit suite and a sample of the
#               multi-process suite (CHECK_SAMPLE below)
#   make test   install what is missing, build, run every CPU test (what CI runs: .ci/run)
# Others: make build, make test-full (make test with the emulated-GPU matrices on every data type, not a
# sample), make bench (hetccl vs Open MPI and Gloo), make perf-doc (docs/performance*.md from the benchmark
# records), make asan, make tsan, make fuzz, make clean.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo check test test-full asan tsan tsan-core fuzz bench perf-doc clean

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo's ranks are host ranks: hetccl-perf loads libhetccl and nothing else
# (no device runtime, kernels plugin, emulated GPU or vendor library), so the
# demo builds hetccl-perf and what it links, not the tests or the plugins.
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target hetccl-perf
	$(BUILD)/tools/hetccl-perf --np 4 --groups a,a,b,b -o allreduce -d float -b 8 -e 64M -f 8 -n 20 -w 10 -c 1

# make check's sample of the multi-process suites (labels mp, emu-mp, emu), chosen
# to touch each transport and the emulated GPU border once: the AllReduce matrix
# on every layout and transport (shm, tcp, ucx over sm and tcp, the RMA path, plan
# folds); every collective on 2+2 over shm; a dead peer and mismatched calls on
# every transport; encrypted cross-site links; the mpirun and torchrun launches;
# on emulated GPUs the device border of one GPU per group (matrix_ab_border,
# EmuBorder.*), groups of different sizes, send/recv pairs, a peer exiting under
# a border call, calls returning while the stream is held, and group calls on
# device buffers (border and staged).
CHECK_SAMPLE = Matrix[.]EveryTypeOpSize/[a-z_]+_AllReduce$$|Matrix[.]EveryTypeOpSize/aabb_shm_|Failures[.](PeerExits|MismatchedCalls)/|Encrypt[.]CrossSiteLinksOnly|mp[.]mpirun|Torchrun[.]InitFromEnv|emu[.]matrix_ab_border$$|EmuBorder[.]|EmuBorderUnequal|EmuPairs[.]EveryPair|EmuFaults[.]PeerExitsUnderADeviceBorderCall|EmuNoWait|Emu[.]GroupCallsOnDeviceBuffers

check: build
	ctest --test-dir $(BUILD) --output-on-failure -j 1 -L unit
	ctest --test-dir $(BUILD) --output-on-failure -j 1 -LE 'unit|gpu' -R '$(CHECK_SAMPLE)'

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j 1 -LE gpu
	$(MAKE) asan
	$(MAKE) tsan-core
	$(MAKE) fuzz

test-full: export HETCCL_TEST_FULL = 1
test-full: test

# AddressSanitizer + UndefinedBehaviorSanitizer over the unit suite and the multi-process
# suite on three layouts (2+2 shm, interleaved tcp, 3+2+3 shm) plus its API-level tests
# (not the ucx ones, here and under TSan: UCX itself is not instrumented, so its
# allocations and threads are outside what the sanitizers can judge).
asan: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DHETCCL_SANITIZE=address
	cmake --build $(BUILD)-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-asan --output-on-failure -j 1 -L unit -E '[uU]cx'
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-asan --output-on-failure -j 1 -L mp \
	  -R 'aabb_shm|abab_tcp|aaabbccc_shm|BadComm|Calls|Transports|Split|EmuBorderUnequal|EmuPairs' -E '[uU]cx|[oO]fi'

tsan: deps
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=Debug -DHETCCL_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS)
	ctest --test-dir $(BUILD)-tsan --output-on-failure -j 1 -L unit

# ThreadSanitizer over the threaded parts (proxy, transports, device state,
# ranks-as-threads): what `make test` runs; `make tsan` runs the whole unit suite.
tsan-core: deps
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=Debug -DHETCCL_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS) --target hetccl_tsan_ranks unit_transport unit_core unit_device unit_emu
	ctest --test-dir $(BUILD)-tsan --output-on-failure -j 1 -R '^(tsan|transport|core|device)[.]|^emu[.]Emu[.]' -E '[uU]cx'

# libFuzzer targets (clang; ASan+UBSan) for every decoder of bytes from the wire,
# FUZZ_SECONDS (default 15) each; fails on any crash, leak or sanitizer report.
fuzz: deps
	FUZZ_BUILD=$(BUILD)-fuzz JOBS=$(JOBS) bash tests/fuzz/run.sh

bench: build
	bash scripts/install-deps.sh
	HETCCL_PERF=$(BUILD)/tools/hetccl-perf bash bench/allreduce_vs_peers.sh -n 100 -w 10

# docs/performance.md, docs/performance-cpu.md and their plots from the records in docs/perf/data.
perf-doc:
	bash scripts/install-deps.sh python3-matplotlib
	/usr/bin/python3 docs/perf/make_performance.py build

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
