# staticlet: make demo runs the example pods for real; make test runs every test.
GO      ?= go
BIN     := bin/staticlet
# The log daemon's own program, which staticlet runs from beside itself
# (internal/logd.DaemonProgram).
LOGD    := bin/staticlet-logd
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOARCH  ?= $(shell $(GO) env GOARCH)
# The Debian package: binary, systemd unit, example config (packaging/).
DEB     := bin/staticlet_$(GOARCH).deb
# A static binary: it is also the pause program of every pod sandbox, run
# from an otherwise empty root (a dynamic one works too, its libraries
# copied into that root, but static keeps the root to one file).
export CGO_ENABLED := 0
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build generate deb deps test unit apidiff integration e2e vm fuzz test-containerd test-stress bench soak demo demo-stop lint clean

all: build

build:
	$(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN) ./cmd/staticlet
	$(GO) build -trimpath -ldflags "-s -w" -o $(LOGD) ./cmd/staticlet-logd

# nfpm builds it from its own module (packaging/go.mod), so staticlet's
# go.mod does not carry nfpm's dependencies.
deb: build
	cd packaging && $(GO) run ./mkdeb -version "$(VERSION)" -arch "$(GOARCH)" -binary ../$(BIN) -logd ../$(LOGD) -o ../$(DEB)

# The packages the tests and the demo run against, from Debian's archive.
# QEMU without its recommends (no GUI, no firmware beyond the BIOS): the VM
# tests boot a serial-console guest; e2fsprogs makes and reads its disks.
# gcc: the tests build staticlet with cgo too, dynamically linked, as a
# plain `go build` does. tmux: k9s runs in it, for its screen to be read.
deps:
	@if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v ctr >/dev/null || ! test -x /bin/busybox \
		|| ! command -v dbus-daemon >/dev/null || ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null \
		|| ! command -v qemu-system-x86_64 >/dev/null || ! command -v mkfs.ext4 >/dev/null || ! command -v debugfs >/dev/null \
		|| ! command -v gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null \
		|| ! command -v aarch64-linux-gnu-as >/dev/null || ! command -v tmux >/dev/null; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y containerd runc busybox-static dbus debootstrap systemd-container gcc binutils-aarch64-linux-gnu tmux \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-x86 qemu-user e2fsprogs; \
	fi

# The tiers of the suite, fastest first; make test runs them all.
#
# unit: no root, no containerd, nothing installed: the pure code, the
# architecture rules (internal/testutil/archrules) and the tests that need
# only temp dirs and loopback, under the race detector. go test -short is
# the unit tier: every test that needs more skips there (internal/testutil/
# tier). The binary-driven suites are not in it. The race detector needs
# cgo, which the Makefile turns off for the static binary.
UNIT_PKGS := ./internal/... ./cmd/...
unit:
	CGO_ENABLED=1 $(GO) test -short -race -count=1 -timeout 10m $(UNIT_PKGS)

# integration: the packages' tests against a private containerd (started
# by internal/testutil/ctrdtest), real runc, busybox, dbus-daemon and
# debootstrap, as root; everything but the suites under test/.
integration: deps
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	$(GO) test -count=1 -timeout 30m ./internal/... ./cmd/...

# e2e: the built staticlet binary end to end, against a private
# containerd (test/e2e); vm: staticlet under real systemd, in
# systemd-nspawn machines (test/systemd) and in the QEMU guest (test/vm: up
# to 20 minutes in the guest, and building its image the first time).
# Both share internal/testutil/harness. The vm packages run one at a time:
# the emulated guest is slow enough on an idle machine.
e2e: deps build deb
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	STATICLET_BIN=$(CURDIR)/$(BIN) STATICLET_DEB=$(CURDIR)/$(DEB) $(GO) test -count=1 -timeout 40m ./test/e2e/...
vm: deps build deb
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	STATICLET_BIN=$(CURDIR)/$(BIN) STATICLET_DEB=$(CURDIR)/$(DEB) $(GO) test -count=1 -timeout 40m -p 1 ./test/systemd/... ./test/vm/...

# Every test: lint and unit first, so that they fail fast; then the tiers
# that need root and containerd (against Debian's), the packaging module's
# tests, the fuzz targets, and the containerd-backed tests against each
# other release (test-containerd). prebuild first builds what the tests
# build from the module proxy (the containerd releases, etcd, kubectl and
# k9s) if it is not cached yet, minutes on a fresh machine, so that no
# test's timeout pays for it.
test: lint unit apidiff integration e2e vm
	cd packaging && $(GO) test -count=1 ./...
	$(MAKE) fuzz
	$(MAKE) test-containerd

# apidiff: staticlet's manifest validation against the apiserver's own
# (test/apidiff, a module of its own that links k8s.io/kubernetes at the
# release of k8s.io/api in go.mod): single-field mutants of real static
# pods, ConfigMaps and Secrets, judged both ways. It fails on a manifest
# staticlet accepts and the apiserver rejects, and on a refusal of what
# the apiserver accepts that its allow-list does not explain; -v prints
# the agreement per kind of mutation. Seconds once built; the first build
# of the apiserver's packages takes a few minutes.
apidiff:
	cd test/apidiff && $(GO) test -count=1 -timeout 10m ./...

# Each fuzz target for its budget of runs (about 20 s each on a busy
# 2-core machine), one after the other (go test -fuzz takes one target at
# a time) and on one core, as other work shares the machine; FUZZTIME
# (a duration or a count such as 50000x) sets every target's budget. A
# count, not a duration: go1.26's fuzz coordinator can fail a target with
# "context deadline exceeded" when a duration runs out (golang/go#75804),
# most often on a loaded machine. Their seed corpora already ran in test.
# An input that fails is written to its package's testdata/fuzz, where
# every go test runs it from then on: commit it with the fix. Minimizing a
# new input is cut short, so that the time goes to fuzzing. The first run
# builds the instrumented packages, which takes minutes; later runs find
# them in the build cache.
FUZZTIME ?=
FUZZ_TARGETS := ./internal/pod:FuzzDecode:40000x ./internal/watch:FuzzURLBody:2000x ./internal/kubeletconfig:FuzzKubeletConfig:140000x
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget="$(FUZZTIME)"; \
		[ -n "$$budget" ] || budget=$${rest#*:}; \
		echo "=== fuzz $$name in $$pkg for $$budget"; \
		$(GO) test -run '^$$' -fuzz '^'"$$name"'$$' -fuzztime $$budget -fuzzminimizetime 5s -parallel 1 $$pkg || exit 1; \
	done

# The packages whose tests talk to a private containerd, run once for each
# containerd release in internal/testutil/ctrdtest's Releases (built from the Go
# module proxy on first use, cached in /var/cache/staticlet-test/containerd).
# The tests that boot systemd-nspawn machines (TestSystemd*) or the test VM
# (TestVM, whose guest has Debian's containerd) run only in test, against
# the default daemon: each boots a whole Debian, and what they test is
# staticlet under systemd, not containerd. Every release runs even
# when one fails; the target fails at the end.
CONTAINERD_PKGS := ./internal/testutil/ctrdtest/... ./internal/sandbox/... ./internal/images/... ./cmd/staticlet ./test/e2e
test-containerd: deps build
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	@daemons=$$($(GO) run ./internal/testutil/ctrdtest/prebuild -list) || exit 1; \
	failed=; for v in $$(echo "$$daemons" | grep -vx system); do \
		echo "=== containerd $$v: $(CONTAINERD_PKGS)"; start=$$(date +%s); \
		STATICLET_BIN=$(CURDIR)/$(BIN) STATICLET_TEST_CONTAINERD=$$v $(GO) test -count=1 -timeout 25m \
			-skip '^(TestSystemd|TestVM)' $(CONTAINERD_PKGS) || failed="$$failed $$v"; \
		echo "=== containerd $$v: $$(( $$(date +%s) - start ))s"; \
	done; \
	if [ -n "$$failed" ]; then echo "containerd-backed tests failed against containerd$$failed"; exit 1; fi

# The tests of test (without the containerd matrix and TestVM) with every
# core kept busy by a CPU hog (stress-ng), STRESS_RUNS times in a row,
# stopping at the first failure. A test that passes only on an idle machine
# has a race, in the product or in the test: this is where it shows. Each
# run's time is printed. TestVM is left out: the host's load only slows its
# emulated guest (three times over, past its 20 minutes), whose own tests
# run on an idle guest whatever the host does.
STRESS_RUNS ?= 3
test-stress: deps build deb
	@command -v stress-ng >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y stress-ng; }
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	@for i in $$(seq $(STRESS_RUNS)); do \
		echo "=== stress run $$i of $(STRESS_RUNS)"; start=$$(date +%s); \
		stress-ng --cpu $$(nproc) --timeout 3h --quiet & hog=$$!; \
		trap 'kill $$hog 2>/dev/null' EXIT INT TERM; \
		STATICLET_BIN=$(CURDIR)/$(BIN) STATICLET_DEB=$(CURDIR)/$(DEB) $(GO) test -count=1 -timeout 80m -skip '^TestVM$$' ./...; rc=$$?; \
		kill $$hog; wait $$hog 2>/dev/null; \
		echo "=== stress run $$i of $(STRESS_RUNS): exit $$rc after $$(( $$(date +%s) - start ))s"; \
		[ $$rc -eq 0 ] || exit $$rc; \
	done

bench: deps build
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	STATICLET_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -run '^$$' -bench . -benchtime 10x -timeout 30m ./test/bench/

# The soak test (test/soak): 100 pods with churn for SOAK_DURATION (a Go
# duration, at least 2m), sampling what could leak; it fails on growth
# beyond noise and prints every series' slope; SOAK_CSV=FILE keeps the
# samples. Not part of test. The
# test's own waits are bounded, so go test's timeout only needs to be
# longer than any run: none.
SOAK_DURATION ?= 1h
soak: deps build
	$(GO) run ./internal/testutil/ctrdtest/prebuild
	STATICLET_BIN=$(CURDIR)/$(BIN) SOAK_DURATION=$(SOAK_DURATION) SOAK_CSV=$(SOAK_CSV) $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 0 ./test/soak/

demo: deps build
	packaging/demo.sh start

demo-stop:
	packaging/demo.sh stop

# The generated code: the OpenAPI definitions of the Kubernetes types the
# API serves (internal/kubeapi/openapi, by openapi-gen, a tool in go.mod).
# Its test fails while the committed file is stale.
generate:
	$(GO) generate ./internal/kubeapi/openapi

# gofmt, go vet and staticcheck (pinned: the same findings on every
# machine; built from the Go module proxy on first use) over the modules.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	cd packaging && $(GO) vet ./...
	cd test/apidiff && $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd packaging && $(GO) run $(STATICCHECK) ./...
	cd test/apidiff && $(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin
