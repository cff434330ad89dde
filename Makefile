# gpt2bench — the two commands:
#   make ladder   set up what is missing, build, run the ladder on the detected device, write the report
#   make test     set up what is missing, build, run every test (then the CUDA compile-and-link check)
# TORCH=cpu|cuda picks the libtorch build (default: cuda when nvidia-smi finds a GPU, else cpu).

TORCH ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
JOBS ?= $(shell nproc)

ifeq ($(TORCH),cuda)
  VENV := .venv-cuda
  BUILD := build-cuda
  PROFILE ?= profiles/gpu-124m.yaml
else
  VENV := .venv
  BUILD := build
  PROFILE ?= profiles/cpu-mini.yaml
endif
OUT ?= runs/$(shell date +%Y%m%d-%H%M%S)-$(notdir $(basename $(PROFILE)))

.PHONY: setup build ladder test test-cpu cuda-check clean help
help:
	@sed -n '2,5p' Makefile

setup:
	@scripts/setup.sh $(TORCH)

build: setup
	@cmake --build $(BUILD) -j $(JOBS)

ladder: build
	$(BUILD)/gpt2bench ladder --profile $(PROFILE) --out $(OUT)
	$(BUILD)/gpt2bench report $(OUT) --out $(OUT)/report

test-cpu:
	@$(MAKE) --no-print-directory build TORCH=cpu
	cd build && ctest --output-on-failure -j $(JOBS)
	.venv/bin/python -m pytest -q reports/tests

# The GPU path never rots: the CUDA build (against the CUDA libtorch) compiles and links every
# target; its doctor runs here without a GPU, and its _CUDA tests report themselves skipped.
cuda-check:
	@$(MAKE) --no-print-directory build TORCH=cuda
	build-cuda/gpt2bench doctor
	build-cuda/gpt2bench_tests --gtest_filter='*_CUDA'
	@for f in bench/cuda/cuda_backend.cpp bench/cuda/cupti_collector.cpp; do \
	  grep -q "$$f" build-cuda/compile_commands.json || { echo "cuda-check: $$f was not compiled"; exit 1; }; done
	@echo "cuda-check: CUDA-only sources compiled: bench/cuda/cuda_backend.cpp (CUDA-event timer, caching-allocator stats, \
	device info, pinned prefetch, CUDA graph, NCCL), bench/cuda/cupti_collector.cpp (CUPTI activities)"

test: test-cpu cuda-check

clean:
	rm -rf build build-cuda runs
