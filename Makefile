# staticlet: make demo runs the example pods for real; make test runs every test.
GO      ?= go
BIN     := bin/staticlet
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOARCH  ?= $(shell $(GO) env GOARCH)
# The Debian package: binary, systemd unit, example config (packaging/).
DEB     := bin/staticlet_$(GOARCH).deb
# A static binary: it is also the pause program of every pod sandbox, run
# from an otherwise empty root.
export CGO_ENABLED := 0
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all build deb deps test bench demo demo-stop lint clean

all: build

build:
	$(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN) ./cmd/staticlet

# nfpm builds it from its own module (packaging/go.mod), so staticlet's
# go.mod does not carry nfpm's dependencies.
deb: build
	cd packaging && $(GO) run ./mkdeb -version "$(VERSION)" -arch "$(GOARCH)" -binary ../$(BIN) -o ../$(DEB)

# The packages the tests and the demo run against, from Debian's archive.
# QEMU without its recommends (no GUI, no firmware beyond the BIOS): the VM
# tests boot a serial-console guest; e2fsprogs makes and reads its disks.
deps:
	@if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v ctr >/dev/null || ! test -x /bin/busybox \
		|| ! command -v dbus-daemon >/dev/null || ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null \
		|| ! command -v qemu-system-x86_64 >/dev/null || ! command -v mkfs.ext4 >/dev/null || ! command -v debugfs >/dev/null; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y containerd runc busybox-static dbus debootstrap systemd-container \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-x86 e2fsprogs; \
	fi

# The timeout leaves room for TestVM: up to 9 minutes in the guest, and
# building the guest image the first time.
test: deps build deb
	STATICLET_BIN=$(CURDIR)/$(BIN) STATICLET_DEB=$(CURDIR)/$(DEB) $(GO) test -count=1 -timeout 40m ./...
	cd packaging && $(GO) test -count=1 ./...

bench: deps build
	STATICLET_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -run '^$$' -bench . -benchtime 10x -timeout 30m ./cmd/staticlet/

demo: deps build
	packaging/demo.sh start

demo-stop:
	packaging/demo.sh stop

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	cd packaging && $(GO) vet ./...

clean:
	rm -rf bin
