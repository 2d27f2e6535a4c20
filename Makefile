# PersistentKV: the two commands a newcomer needs are `make demo` and `make test`.
BUILD ?= build
export BUILD

.PHONY: demo serve test asan-test setup setup-demo build build-demo model clean

demo: model           ## build what it runs, start router + 2 workers, stream a generation, stop
	@scripts/cluster.sh demo

serve: model          ## same cluster, left running until Ctrl-C
	@scripts/cluster.sh serve

test: build           ## the whole CPU suite (unit + integration); GPU tests: ctest -L device
	@scripts/test.sh

asan-test: setup      ## unit + integration suites under ASan/LSan/UBSan (CPU only, build-asan/)
	@scripts/asan_test.sh

setup:                ## install missing Debian packages (build, tests, tools)
	@scripts/setup.sh

setup-demo:           ## only the packages `make demo` needs
	@scripts/setup.sh demo

build: setup          ## configure and compile everything into $(BUILD)/ (CUDA when nvcc exists)
	@scripts/build.sh

build-demo: setup-demo  ## only the demo's binaries; CUDA only with a GPU present
	@scripts/build.sh demo

model: build-demo     ## the bundled tiny random model (models/tiny, ChatML template), made once
	@test -f models/tiny/chat_template.jinja || \
	  $(BUILD)/bin/pkv-make-model --out models/tiny --shape tiny --chat_template chatml

clean:
	rm -rf $(BUILD)
