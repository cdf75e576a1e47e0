# llm.c — build, test, benchmark.
#   make               the CPU build: ./llm
#   make test          build and run the test suite (SAN=1: under AddressSanitizer + UBSan)
#   make VULKAN=1 ...  the same with the Vulkan backend built in (outputs in build/vulkan)
#   make bench         CPU speed against llama.cpp on the same files (bench/bench.sh: one sequence;
#                      bench/serve.sh: continuous batching and prefix caching)
CC      ?= cc
CFLAGS  ?= -O2 -g
STD     := -std=c11 -Wall -Wextra -Werror
LDLIBS  := -lm -lpthread
BUILD   := build

ifeq ($(SAN),1)
CFLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
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

# make VULKAN=1: the Vulkan backend (backends/vulkan.c, shaders/*.comp compiled to SPIR-V with
# glslangValidator and embedded); needs libvulkan-dev and glslang-tools.
ifeq ($(VULKAN),1)
override BUILD := $(BUILD)/vulkan
GLSL     ?= glslangValidator
VK_INC   := $(BUILD)/shaders/llm_shaders.inc
VK_DEFS  := -DLLM_VULKAN -I$(BUILD)/shaders
LDLIBS   += -lvulkan
endif

SRC     := llm.c llm.h $(wildcard backends/*.c) $(VK_INC)
TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))

.PHONY: all test bench clean models demo portability

all: llm

llm: $(SRC)
	$(CC) $(STD) $(CFLAGS) -DLLM_MAIN $(CLI_DEFS) $(VK_DEFS) -o $@ llm.c $(LDLIBS) $(CLI_LIBS)

$(BUILD)/llm: $(SRC)
	@mkdir -p $(BUILD)
	$(CC) $(STD) $(CFLAGS) -DLLM_MAIN $(CLI_DEFS) $(VK_DEFS) -o $@ llm.c $(LDLIBS) $(CLI_LIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(SRC)
	@mkdir -p $(BUILD)/tests
	$(CC) $(STD) $(CFLAGS) $(VK_DEFS) -o $@ $< $(LDLIBS)

# Shaders that test USE_SUBGROUP / USE_16BIT are also compiled with them (NAME_sg, NAME_f16,
# NAME_sg_f16); the backend picks the variant the device supports.
$(BUILD)/shaders/llm_shaders.inc: $(wildcard shaders/*.comp shaders/*.glsl) tools/spv2c.sh
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
build/gen_model: tests/gen_model.c $(SRC)
	@mkdir -p build
	$(CC) $(STD) -O2 -o $@ $< $(LDLIBS)

# Random-weight test models (deterministic; see tests/models.txt).
models: build/gen_model
	@sh tests/make_models.sh build/gen_model build/models

test: $(TESTS) $(BUILD)/llm models $(BUILD)/portability.ok
	@LLM_TEST_MODELS=build/models sh tests/run.sh $(BUILD)

# The engine compiled as POSIX.1-2008 C11 alone: no GNU extensions, and then with __linux__
# undefined too, so that only the paths macOS and the BSDs take remain (their own headers are
# not here: those paths are compile-checked against glibc's POSIX declarations).
portability: $(BUILD)/portability.ok
$(BUILD)/portability.ok: llm.c llm.h
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -c llm.c -o $(BUILD)/portability.o
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -U__linux__ -Wall -Wextra -Werror -O2 -c llm.c -o $(BUILD)/portability.o
	@rm -f $(BUILD)/portability.o && touch $@

bench: llm build/gen_model
	@sh bench/bench.sh
	@sh bench/serve.sh

clean:
	rm -rf build llm

# The README's first command: a random-weight model of TinyLlama-1.1B's shape (Q4_0, a made-up
# 32000-token vocabulary, no download), then a generation from it on the CPU.
DEMO := build/models/demo-tinyllama-1.1b-q4_0.gguf
$(DEMO): build/gen_model
	@mkdir -p build/models
	build/gen_model --shape tinyllama-1.1b --type q4_0 --vocab synthetic:32000 --seed 1 -o $@

demo: llm $(DEMO)
	./llm run -m $(DEMO) -p "Once upon a time" -n 64
