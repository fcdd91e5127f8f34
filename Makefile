# falcon: make build | image | test | lint | demo | bundle | generate
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build image test test-setup unit lint demo bundle generate vet fmt clean test-kernels test-guest test-netpol fuzz

# bin/falcon, the node product (what the image and the systemd unit run),
# and bin/falcon-lab, the lab's testbeds, benches, traces, reports and
# model, which falcon does not carry.
BINARIES := falcon falcon-lab
build:
	for b in $(BINARIES); do CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/$$b ./cmd/$$b || exit 1; done

# The node agent's image (deploy/kubernetes), built with no container daemon
# and no registry (scripts/image): build/falcon-image.tar, tagged
# $(IMAGE):$(VERSION) and $(IMAGE):latest, for ctr images import, docker load
# or podman load; docs/operations.md says how to push it. nft and its
# libraries come from Debian's packages (cached in .cache/image-debs). The
# commit's time stamps it, so the same commit gives the same digest; and
# build/kubernetes/ is deploy/kubernetes with the DaemonSet pinned to it.
IMAGE ?= localhost/falcon
image: build
	@case "$(VERSION)" in dev|"") echo "image: no commit to tag it with (VERSION=$(VERSION))"; exit 1;; esac
	$(GO) run ./scripts/image -falcon bin/falcon -repo $(IMAGE) -out build/falcon-image.tar \
		-epoch $$(git log -1 --format=%ct) -deploy deploy/kubernetes -deploy-out build/kubernetes

# make test and make test-guest run every step whatever the others did, and
# the last of them given prints what failed and fails (scripts/steps.sh): one
# run of make test test-guest reports every failure, the guest's too.
STEP_GOALS := $(filter test test-guest,$(MAKECMDGOALS))
STEPS := STEPS_DIR=$(CURDIR)/.cache/steps/$(shell echo $$PPID) scripts/steps.sh

# Integration tests need root (namespaces, BPF); they run one package at a
# time so their traffic and CPU load do not disturb each other.
test: test-setup
	@$(STEPS) begin "$(firstword $(STEP_GOALS))" $@
	@$(STEPS) run build $(MAKE) --no-print-directory build
	@$(STEPS) run lint $(MAKE) --no-print-directory lint
	@$(STEPS) tests go-test $(GO) test -count=1 -p 1 -timeout 40m ./...
	@$(STEPS) run fuzz scripts/fuzz.sh $(CI_FUZZTIME)
	@$(STEPS) end "$(lastword $(STEP_GOALS))" $@

# What the tests need beyond the demo's: the layouts' daemons and Kubernetes
# (built once, about 10 minutes, then cached outside the checkout), every workload's
# tools, QEMU for the kernel guests. Nothing to do once it is all there;
# as a user, nothing at all (the tests that need root skip).
test-setup:
	@if [ "$$(id -u)" -eq 0 ]; then scripts/setup.sh --test; else echo "test-setup: not root: nothing installed"; fi

# The root integration tests of datapath, agent and cmd inside Debian's own
# kernel packages, booted under QEMU (scripts/kernels/run.sh); summaries in
# results/kernels-qemu/kernels-<series>.md. KERNELS="6.1 6.12" by default.
KERNELS ?= 6.1 6.12
test-kernels: test-setup
	scripts/kernels/run.sh $(KERNELS)

# The README's test command (and CI) runs one guest: Debian's 6.1, the oldest
# kernel falcon supports, with the tests that reach what differs there (tc
# through clsact, cpumap without GRO, the fast path's helpers, the guard's
# tracepoint, pins across a kill, doctor's probes). Each such test says so
# in its doc comment, '// guest: why', and scripts/guesttests collects them
# (docs/testing.md). The rest would repeat on 6.1 what the host's run shows.
# make test-kernels runs them all on 6.1 and 6.12. The guest takes 8-11
# minutes and no test in it is silent for one: 5 minutes without a line in
# its logs counts as a wedged kernel (booted once more), 30 as too long.
# Run once, when test-guest's recipe needs it (an empty list would run every test).
GUEST_TESTS = $(eval GUEST_TESTS := $$(shell $(GO) run ./scripts/guesttests))$(GUEST_TESTS)
test-guest: test-setup
	@$(STEPS) begin "$(firstword $(STEP_GOALS))" $@
	@$(if $(GUEST_TESTS),,$(error scripts/guesttests found no guest tests))
	@KERNEL_TESTS='$(GUEST_TESTS)' KERNEL_STALL=$${KERNEL_STALL:-5} KERNEL_TIMEOUT=$${KERNEL_TIMEOUT:-30} \
		$(STEPS) tests guest scripts/kernels/run.sh 6.1
	@$(STEPS) end "$(lastword $(STEP_GOALS))" $@

# The NetworkPolicy test (kube-network-policies' verdicts with and without
# the fast path) needs nft's queue, which the host's kernel lacks
# (CONFIG_NFT_QUEUE unset, no modules; there it skips): it runs alone in
# Debian's 6.12 guest, about 12 minutes under TCG, summary in
# results/kernels-qemu/netpol-6.12.md. Not in CI's guest: beside the other
# guest tests it took 995 s and the emulated agents, late, left the fast
# path idle (docs/testing.md).
test-netpol: test-setup
	KERNEL_TESTS='internal/agent:^TestFastPathNetworkPolicy$$' KERNEL_SKIP= KERNEL_SUMMARY=netpol \
		scripts/kernels/run.sh 6.12

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
# a list that may only shrink); no package importing more than 8 of the
# module's own packages (scripts/sizes/fanout.go).
lint: vet
	$(GO) run ./scripts/sizes

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...

# The main job: host vs docker overlay (vanilla, fastpath, falcon), results under results/demo-HOST/.
demo: build
	mkdir -p results/demo-$$(hostname)
	./bin/falcon-lab bench --preset demo --json results/demo-$$(hostname)/$$(date +%Y%m%d-%H%M%S).json

# The benchmark bundle: falcon-lab, falcon, run.sh and iperf3/sockperf/ethtool/memcached/memcaslap/nginx/wrk from
# Debian's packages with their libraries, for machines with no registry or
# network (scripts/bundle/build.sh; the .debs are cached in .cache/).
bundle: build
	scripts/bundle/build.sh bin

# Rebuilds the committed BPF objects; needs clang and libbpf headers.
generate:
	$(GO) generate ./...

clean:
	rm -rf bin dist build
