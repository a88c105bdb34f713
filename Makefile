# Thin front door: the real build is CMake (CMakePresets.json). Every target bootstraps first.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
# ctest runs one test more than there are cores: a third of the tests' time is waiting (ranks of
# mpirun and torchrun, programs under `memscope run`, subprocesses), and the Release ctest step
# kept 1.4 of 2 cores busy with -j 2 (2026-12-07).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))

.PHONY: all bootstrap build build-tests build-asan demo test test-asan test-tsan bench fuzz format format-check tidy tidy-ci \
        lint-python lint clean

all: build

bootstrap:
	@scripts/bootstrap

# configure PRESET: cmake --preset, after clear_generator PRESET: a build folder that another
# generator made is cleared first (the presets use Ninja since 2026-12-07; older build folders
# were made with Unix Makefiles). Each preset's folder is build-PRESET, the default's build.
define clear_generator
	@dir=build$(if $(filter default,$(1)),,-$(1)); \
	  if [ -f $$dir/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$$' $$dir/CMakeCache.txt; then \
	    echo "$$dir was configured with another generator: configuring it afresh"; \
	    rm -rf $$dir/CMakeCache.txt $$dir/CMakeFiles; fi
endef
define configure
	$(call clear_generator,$(1))
	@cmake --preset $(1) >/dev/null
endef
# timed NAME COMMAND...: runs the command and prints its wall time (CI reads where time goes).
timed = start=$$(date +%s); $(2); rc=$$?; echo "== $(1) took $$(( $$(date +%s) - start )) s"; (exit $$rc)
# After a build in CI (CI=true): the slowest compile steps; after a ctest run: the slowest tests.
SLOWEST_STEPS = $(if $(filter true,$(CI)),scripts/time-report $(1) --what build;,)
SLOWEST_TESTS = scripts/time-report $(1) --what tests

# build: everything, the benchmarks included; build-tests: what the tests run (the library, the
# command, the Python package, the examples and the test programs), which `make test` waits for.
build: build-tests
	@$(call timed,build (benchmarks),cmake --build --preset default -j $(JOBS) --target memscope_benchmarks)

build-tests: bootstrap
	$(call configure,default)
	@$(call timed,build (Release),cmake --build --preset default -j $(JOBS))
	@$(call SLOWEST_STEPS,build)

# The library's tour, then the memscope command: "would it fit" on the trace the tour recorded
# of itself (build-demo/demo/demo_trace.pickle), and on a real PyTorch trace when the corpus of real
# traces is there (MEMSCOPE_TRACES, else ../shared/traces beside the checkout: never committed),
# and the Python demo watched by `memscope run` (its stages come from memscope.Tracker's marks).
# Its own build (build-demo: no tests, no benchmarks), so it installs only what it needs
# (scripts/bootstrap demo) and prints no build chatter: CMake's output goes to
# build-demo/{configure,build}.log, shown only when a step fails.
TRACES_DIR = $(or $(MEMSCOPE_TRACES),$(abspath $(CURDIR)/../shared/traces))
REAL_TRACE = $(TRACES_DIR)/torch_snapshot_cs336-small_ctx256_bs32_fwd_bwd.pickle
REPLAY_ARGS := --config "" --config expandable_segments:true --fit
DEMO := build-demo
demo:
	@scripts/bootstrap demo
	@mkdir -p $(DEMO)
	$(call clear_generator,demo)
	@cmake --preset demo > $(DEMO)/configure.log 2>&1 || \
	  { tail -50 $(DEMO)/configure.log; echo "make demo: configuring failed (log: $(DEMO)/configure.log)"; exit 1; }
	@echo "building memscope (minutes the first time, seconds after; log: $(DEMO)/build.log)"
	@cmake --build --preset demo -j $(JOBS) --target memscope_demo memscope_command memscope_python \
	  > $(DEMO)/build.log 2>&1 || \
	  { grep -E -B2 -A12 "error|Error" $(DEMO)/build.log | head -80; \
	    echo "make demo: the build failed (log: $(DEMO)/build.log)"; exit 1; }
	@./$(DEMO)/examples/memscope_demo $(DEMO)/demo
	@printf '\n== memscope replay $(DEMO)/demo/demo_trace.pickle %s --html $(DEMO)/demo/replay.html\n' '$(REPLAY_ARGS)'
	@./$(DEMO)/tools/memscope/memscope replay $(DEMO)/demo/demo_trace.pickle $(REPLAY_ARGS) --html $(DEMO)/demo/replay.html
	@if [ -f "$(REAL_TRACE)" ]; then \
	  printf '\n== memscope replay %s %s --html $(DEMO)/demo/replay-real.html\n' "$(REAL_TRACE)" '$(REPLAY_ARGS)'; \
	  ./$(DEMO)/tools/memscope/memscope replay "$(REAL_TRACE)" $(REPLAY_ARGS) --html $(DEMO)/demo/replay-real.html; \
	else printf '\n(no real trace at %s: set MEMSCOPE_TRACES to the corpus to replay one too)\n' "$(REAL_TRACE)"; fi
	@printf '\n== memscope run --html $(DEMO)/demo/run.html -- python3 examples/python/demo.py\n'
	@PYTHONPATH=$(DEMO)/python ./$(DEMO)/tools/memscope/memscope run --html $(DEMO)/demo/run.html \
	  --json $(DEMO)/demo/run.json -- python3 examples/python/demo.py $(DEMO)/demo/python
	@printf '\nHTML reports (open in a browser):\n  %s\n  %s\n' "$$PWD/$(DEMO)/demo/replay.html" \
	  "$$PWD/$(DEMO)/demo/run.html"
	@# Issue 26: a GPT-2-like decoder's AdamW step on a 24 GiB GPU, estimated on this machine
	@# without a GPU (PyTorch fake tensors): peaks, what is live at the peak, the largest batch.
	@# It needs PyTorch, which `scripts/bootstrap demo` does not install (`scripts/bootstrap` does).
	@if python3 -c 'import torch' 2>/dev/null; then \
	  printf '\n== memscope estimate examples/python/estimate_gpt.py:workload --batch 8 --capacity 24GiB --max-batch (4 layers, 256 wide, context 256; no GPU used)\n'; \
	  GPT_LAYERS=4 GPT_WIDTH=256 GPT_CONTEXT=256 PYTHONPATH=$(DEMO)/python \
	  ./$(DEMO)/tools/memscope/memscope estimate examples/python/estimate_gpt.py:workload --batch 8 \
	    --steps 2 --capacity 24GiB --max-batch --html $(DEMO)/demo/estimate.html && \
	  printf '  %s\n' "$$PWD/$(DEMO)/demo/estimate.html"; \
	else printf '\n(memscope estimate skipped: PyTorch is not installed; pip install torch)\n'; fi

test: build-tests
	@$(call timed,ctest (Release),ctest --preset default -j $(TEST_JOBS)); rc=$$?; \
	  $(call SLOWEST_TESTS,build); exit $$rc

# The sanitizer presets build at -O1 -g1 (line tables only): a third less compile time than
# RelWithDebInfo's -O2 -g, and the reports still name file and line.
build-asan: bootstrap
	$(call configure,asan)
	@$(call timed,build (ASan+UBSan),cmake --build --preset asan -j $(JOBS))
	@$(call SLOWEST_STEPS,build-asan)

test-asan: build-asan
	@$(call timed,ctest (ASan+UBSan),ctest --preset asan -j $(JOBS)); rc=$$?; \
	  $(call SLOWEST_TESTS,build-asan); exit $$rc

# Only the test binaries that start threads (label threads, target memscope_thread_tests): the
# races TSan finds need two threads, and the single-threaded replays of real traces took most of
# CI's time under it.
test-tsan: bootstrap
	$(call configure,tsan)
	@$(call timed,build (TSan),cmake --build --preset tsan -j $(JOBS) --target memscope_thread_tests)
	@$(call SLOWEST_STEPS,build-tsan)
	@$(call timed,ctest (TSan),ctest --preset tsan -j $(JOBS)); rc=$$?; \
	  $(call SLOWEST_TESTS,build-tsan); exit $$rc

bench: build
	@./build/bench/memscope_bench --benchmark_out=build/bench-results.json --benchmark_out_format=json
	@if [ -x build/bench/memscope_bench_jemalloc ]; then ./build/bench/memscope_bench_jemalloc \
	  --benchmark_out=build/bench-results-jemalloc.json --benchmark_out_format=json; fi
	@# Hot path (docs/benchmarks.md, "Hot path"): instructions per hit pair (perf_event
	@# where the kernel allows, else callgrind) and 1/2/8 threads on one allocator, merged into
	@# build/bench-results.json as "instructions_per_pair" and "thread_scaling".
	@python3 bench/instructions_per_pair.py --loop build/bench/memscope_hit_pair_loop \
	  --out build/hot-path-instructions.json
	@./build/bench/memscope_thread_scaling --raise-priority --json build/hot-path-threads.json
	@python3 bench/merge_results.py build/bench-results.json \
	  instructions_per_pair=build/hot-path-instructions.json thread_scaling=build/hot-path-threads.json
	@python3 bench/summarize.py build/bench-results*.json > build/bench-summary.md
	@# Traces (docs/benchmarks.md: Recording, Writing snapshots, Reading traces, Replay): each
	@# measures its Python peer in the same run.
	@./build/bench/memscope_bench_recording 200000 5
	@./build/bench/memscope_write_speed --seconds 1
	@./build/bench/memscope_read_speed --seconds 1
	@./build/bench/memscope_replay_speed --repeat 3
	@# Fragmentation on the corpus of real traces (MEMSCOPE_TRACES), 10 iterations each, default
	@# and expandable beside PyTorch's rules: the table in docs/benchmarks.md.
	@./build/bench/memscope_corpus_bench --iterations 10 --doc docs/benchmarks.md
	@# Every page-recycling policy of expandable segments on the corpus: the policy table.
	@./build/bench/memscope_corpus_bench --policies --iterations 10 --doc docs/benchmarks.md
	@# At capacity: the smallest device each trace fits, memscope against PyTorch's rules.
	@./build/bench/memscope_corpus_bench --capacity --iterations 10 --doc docs/benchmarks.md

# Every libFuzzer target for FUZZ_SECONDS each (new inputs it finds go to build-fuzz/corpus-*).
FUZZ_TARGETS := config size pickle rmm_log snapshot_json cli_json wire
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do mkdir -p build-fuzz/corpus-$$t; log=build-fuzz/fuzz_$$t.log; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s (log: $$log)"; \
	  if ! ./build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	       build-fuzz/corpus-$$t fuzz/corpus/$$t > $$log 2>&1; then tail -40 $$log; exit 1; fi; \
	  grep -E "^(Done|stat::number_of_executed_units)" $$log; done

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

# The checks CI runs besides the tests; each fails on the first finding.
format-check: bootstrap
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror

TIDY := xargs -P $(JOBS) -n 4 clang-tidy -p build-asan --quiet --warnings-as-errors='*'
TIDY_NOISE := ^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers
# clang-tidy reads the ASan build's compile_commands.json: the default preset's is a unity build,
# whose commands name its 16-source units, not the sources (CMakeLists.txt, MEMSCOPE_UNITY_BUILD).
tidy: build-asan
	@git ls-files 'src/*.cpp' 'tools/*.cpp' | $(TIDY) 2>&1 | grep -v -E "$(TIDY_NOISE)"; \
	  test $${PIPESTATUS[1]} -eq 0

# What CI runs: clang-tidy on the files a change touched (scripts/tidy-changed: changed since
# the merge base with origin/main, or within 12 hours before HEAD's commit on main as CI checks
# it out, plus every unit that includes a changed header), the static analyzer on src/allocator/
# and src/backends/ only. `make tidy` checks every file: 1146 s cold on 2 cores (2026-12-06); a change of a few
# files takes seconds to a minute or two. MEMSCOPE_TIDY_BASE=<rev> checks since another commit.
tidy-ci: build-asan
	@$(call timed,tidy-ci,JOBS=$(JOBS) scripts/tidy-changed build-asan)

lint-python: build
	@scripts/lint-python build/python

lint: format-check tidy lint-python

clean:
	@rm -rf build build-demo build-asan build-tsan build-fuzz
