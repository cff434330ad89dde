# gpt2bench — the two commands:
#   make ladder   set up what is missing, build, run the ladder on the detected device, write the report
#   make test     set up what is missing, build, run every test: the CPU build's GoogleTest + pytest suites, the
#                 CUDA compile-and-link check, the unit tests under ASan/UBSan, and a bounded fuzzing run
# TORCH=cpu|cuda picks the libtorch build (default: cuda when nvidia-smi finds a GPU, else cpu).

SHELL := /bin/bash
TORCH ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
JOBS ?= $(shell nproc)

ifeq ($(TORCH),cuda)
  VENV := .venv-cuda
  BUILD := build-cuda
  PROFILE ?= profiles/gpu-124m.yaml
else
  VENV := .venv
  BUILD := build
  PROFILE ?= profiles/cpu-scaled.yaml
endif
OUT ?= runs/$(shell date +%Y%m%d-%H%M%S)-$(notdir $(basename $(PROFILE)))

.PHONY: setup build build-all ladder test test-cpu cuda-check fuzz asan clean help
help:
	@sed -n '2,5p' Makefile

setup:
	@scripts/setup.sh $(TORCH)

build: setup
	@cmake --build $(BUILD) -j $(JOBS) --target gpt2bench

build-all: setup
	@cmake --build $(BUILD) -j $(JOBS)

# After the ladder, our kernels op by op into its run directory (the report's kernel table); a case that fails
# there is said in kernels.json and the report, and the report is still written.
ladder: build
	$(BUILD)/gpt2bench ladder --profile $(PROFILE) --out $(OUT)
	$(BUILD)/gpt2bench kernels --profile $(PROFILE) --out $(OUT)/kernels.json \
	  || echo "make ladder: a kernel case failed (its error: $(OUT)/kernels.json); the report still follows"
	$(BUILD)/gpt2bench report $(OUT) --out $(OUT)/report

test-cpu:
	@$(MAKE) --no-print-directory build-all TORCH=cpu
	cd build && ctest --output-on-failure -j $(JOBS)
	.venv/bin/python -m pytest -q -n $(JOBS) reports/tests

# The GPU path never rots: the CUDA build (against the CUDA libtorch) compiles and links every
# target; its doctor runs here without a GPU, and its _CUDA tests report themselves skipped.
cuda-check:
	@$(MAKE) --no-print-directory build-all TORCH=cuda
	build-cuda/gpt2bench doctor
	build-cuda/gpt2bench_tests --gtest_filter='*_CUDA'
	@# the CUDA build's own code on CPU tensors (its references, its refusals); the end-to-end suites are make test-cpu's
	build-cuda/gpt2bench_tests --gtest_brief=1 --gtest_filter='-*_CUDA:Cli.*:Reliability.*:Ddp.*:Ownership.*:PairedLadder.*:RunAlone.*'
	@for f in bench/runtime/cuda/cuda_backend.cpp bench/measure/cuda/cupti_collector.cpp $(wildcard kernels/cuda/*.cu) \
	  kernels/cuda/gelu_epilogues.cpp kernels/cuda/gemm_survey.cpp kernels/cuda/cudnn_attention.cpp; do \
	  grep -qs "$$f" build-cuda/compile_commands.json build-cuda/CMakeFiles/*/Unity/*.cxx \
	    || { echo "cuda-check: $$f was not compiled"; exit 1; }; done
	@grep -q '^CUBLASLT_LIBRARY:FILEPATH=/' build-cuda/CMakeCache.txt || { echo "cuda-check: no cuBLASLt library found (gelu_epilogues)"; exit 1; }
	@grep -q 'GPT2_HAVE_CUDNN_FE=1' build-cuda/compile_commands.json || { echo "cuda-check: no cuDNN frontend or cuDNN found (cudnn_attention)"; exit 1; }
	@scripts/kernel_resources.sh build-cuda
	@scripts/fp8_cast_check.sh
	@echo "cuda-check: CUDA-only sources compiled: bench/runtime/cuda/cuda_backend.cpp (CUDA-event timer, caching-allocator stats, \
	device info, pinned prefetch, side stream, CUDA graph, NCCL), bench/measure/cuda/cupti_collector.cpp (CUPTI activities), \
our kernels $(wildcard kernels/cuda/*.cu) (sm80/sm90), kernels/cuda/gelu_epilogues.cpp (cuBLASLt epilogues), \
kernels/cuda/gemm_survey.cpp (cuBLASLt heuristics, the step's chosen algorithms), \
kernels/cuda/cudnn_attention.cpp (cuDNN frontend attention graphs)"

# Every test again, built with AddressSanitizer and UndefinedBehaviorSanitizer (gcc): our code is
# instrumented, libtorch is not; the end-to-end tests run the sanitized gpt2bench. Leak checking is off
# (libtorch keeps process-lifetime singletons); PairedLadder and RunAlone, which need a quiet machine, are
# make test-cpu's.
# A shard a core, each one process of one ATen thread: two threads a shard on two cores made the suite 1.8x
# slower (595 s against 322 s on a 2-core Zen 3).
asan:
	@scripts/setup.sh asan
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ../scripts/gtest_shards.sh $(JOBS) ./gpt2bench_tests --gtest_brief=1 --gtest_filter=-PairedLadder.*:RunAlone.*

# Each stage in turn, with its wall time: CI's limit is the whole's.
test:
	@for t in test-cpu cuda-check asan fuzz; do s=$$SECONDS; $(MAKE) --no-print-directory $$t || exit 1; \
	  echo "make test: $$t took $$(( (SECONDS - s) / 60 )) min $$(( (SECONDS - s) % 60 )) s"; done

clean:
	rm -rf build build-cuda build-asan build-fuzz runs

# Fuzzing (libFuzzer, clang): the YAML profile parser, the token-shard reader, the pre-tokenizer.
# `make fuzz` runs each target FUZZ_SECONDS (default 30) from fuzz/corpus/, after replaying every
# crash ever found (fuzz/regressions/<target>/, each a regression test). Longer: FUZZ_SECONDS=3600.
FUZZ_SECONDS ?= 30
fuzz:
	@scripts/setup.sh fuzz
	@cmake --build build-fuzz -j $(JOBS)
	@for t in profile shard pretokenize; do \
	  corpus=fuzz/corpus/$$t; [ $$t = pretokenize ] && corpus=fuzz/corpus/text; \
	  work=build-fuzz/corpus-$$t; mkdir -p $$work; \
	  echo "fuzz: $$t: replaying fuzz/regressions/$$t, then $(FUZZ_SECONDS) s from $$corpus"; \
	  inputs=$$(find fuzz/regressions/$$t -type f 2>/dev/null); \
	  if [ -n "$$inputs" ]; then build-fuzz/$${t}_fuzz $$inputs >/dev/null 2>&1 \
	    || { echo "fuzz: $$t: a regression input fails again"; exit 1; }; fi; \
	  build-fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/$$t- $$work $$corpus 2>&1 | grep -E "^(stat::number_of_executed_units|==|SUMMARY)" \
	    ; test $${PIPESTATUS[0]} -eq 0 || { echo "fuzz: $$t: crash, input saved under build-fuzz/"; exit 1; }; \
	done
