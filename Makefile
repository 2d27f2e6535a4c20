# PersistentKV: the two commands a newcomer needs are `make demo` and `make test`.
BUILD ?= build
export BUILD

.PHONY: demo serve test asan-test setup build model clean

demo: model           ## build, start router + 2 workers, stream a generation, stop
	@scripts/cluster.sh demo

serve: model          ## same cluster, left running until Ctrl-C
	@scripts/cluster.sh serve

test: build           ## the whole CPU suite (unit + integration); GPU tests: ctest -L device
	@scripts/test.sh

asan-test: setup      ## unit + integration suites under ASan/LSan/UBSan (CPU only, build-asan/)
	@scripts/asan_test.sh

setup:                ## install missing Debian packages
	@scripts/setup.sh

build: setup          ## configure and compile into $(BUILD)/
	@scripts/build.sh

model: build          ## the bundled tiny random model (models/tiny), made once
	@test -f models/tiny/config.json || $(BUILD)/bin/pkv-make-model --out models/tiny --shape tiny

clean:
	rm -rf $(BUILD)
