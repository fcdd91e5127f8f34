# falcon: make build | test | lint | demo | bundle | generate
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test test-setup unit lint demo bundle generate vet fmt clean test-kernels fuzz

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/falcon ./cmd/falcon

# Integration tests need root (namespaces, BPF); they run one package at a
# time so their traffic and CPU load do not disturb each other.
test: test-setup build vet lint
	$(GO) test -count=1 -p 1 -timeout 40m ./...
	scripts/fuzz.sh $(CI_FUZZTIME)

# What the tests need beyond the demo's: the layouts' daemons (built once,
# about 3 minutes, then cached outside the checkout), every workload's
# tools, QEMU for the kernel guests. Nothing to do once it is all there;
# as a user, nothing at all (the tests that need root skip).
test-setup:
	@if [ "$$(id -u)" -eq 0 ]; then scripts/setup.sh --test; else echo "test-setup: not root: nothing installed"; fi

# The root integration tests of datapath, agent and cmd inside Debian's own
# kernel packages, booted under QEMU (scripts/kernels/run.sh); summaries in
# results/kernels-qemu/kernels-<series>.md. KERNELS="6.1 6.12" by default; the README's
# test command (and CI) runs `make test test-kernels KERNELS=6.1`.
KERNELS ?= 6.1 6.12
test-kernels: test-setup
	scripts/kernels/run.sh $(KERNELS)

# Native Go fuzzing of the parsers of everything falcon reads (procfs, CPU
# lists, mode specs and flags, results files): each FuzzXxx target for
# FUZZTIME, one after the other. Their seed corpora (testdata/fuzz and the
# recorded files) already run in every go test; an input that fails is left
# in testdata/fuzz/<target>/ as the regression seed of its fix. The BPF
# programs have their own drill: FALCON_FUZZ_PACKETS=1000000 go test -run
# TestFuzzDrill ./internal/datapath (root).
FUZZTIME ?= 30s
# make test fuzzes every target briefly too (CI runs it), as a smoke test of
# the targets themselves; make fuzz is the longer search.
CI_FUZZTIME ?= 2s

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

unit:
	$(GO) test -count=1 -short ./...

# Sizes: no hand-written Go or BPF C file over 500 lines, no Go function
# over 80 (scripts/sizes; today's offenders are listed in scripts/sizes/allow.txt,
# a list that may only shrink).
lint: vet
	$(GO) run ./scripts/sizes

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...

# The main job: host vs docker overlay (vs falcon), results under results/demo-HOST/.
demo: build
	mkdir -p results/demo-$$(hostname)
	./bin/falcon bench --preset demo --json results/demo-$$(hostname)/$$(date +%Y%m%d-%H%M%S).json

# The benchmark bundle: falcon, run.sh and iperf3/sockperf/ethtool/memcached/memcaslap/nginx/wrk from
# Debian's packages with their libraries, for machines with no registry or
# network (scripts/bundle/build.sh; the .debs are cached in .cache/).
bundle: build
	scripts/bundle/build.sh bin/falcon

# Rebuilds the committed BPF objects; needs clang and libbpf headers.
generate:
	$(GO) generate ./...

clean:
	rm -rf bin dist
