// Package etcdtest gives end-to-end tests a real etcd, run the way a
// control-plane node runs it: the etcd server of the release kubeadm pins
// (Version), built from its Go module on first use into a cache shared by
// every test process on the machine (Build), packed into an image under
// the name kubeadm's manifest gives it (Archive, ImageRef) with the binary
// where that image has it, the certificates kubeadm writes for it
// (WritePKI), and a client for its HTTP API (Client, Healthy).
//
// It does not run etcd nor talk to containerd: tests import the archive
// into their own containerd (package ctrdtest) and run etcd through
// staticlet or directly. Its functions are safe for concurrent use; Build
// builds once however many processes call it at the same time.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/modbuild"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// Version is the etcd release built: the one kubeadm 1.30 pins.
const Version = "v3.5.15"

// gitSHA is Version's commit (the module proxy's origin for the tag),
// shortened as etcd's release builds set it, so that etcd --version says
// what it is.
const gitSHA = "9a55333"

// ImageRef is the image the archive holds, named as kubeadm's manifest
// names Version's image. It is only a name: the tests import the archive,
// nothing is pulled.
const ImageRef = "registry.k8s.io/etcd:3.5.15-0"

// BinaryPath is where etcd is in the image, as in the release image, so
// that a manifest's command "etcd" finds it through the image's PATH.
const BinaryPath = "/usr/local/bin/etcd"

// CacheDir holds the built binaries, one directory per etcd version and Go
// version (VERSION-GOVERSION/etcd), kept between test runs and shared by
// every checkout on the machine.
const CacheDir = "/var/cache/staticlet-test/etcd"

// BuildTimeout bounds a cold build: about 100 s on an idle two-core
// machine, several times that on a busy one.
const BuildTimeout = 20 * time.Minute

// recipe builds the server's main package, the module's root. etcd 3.5.15
// requires reflect2 v1.0.1 (through json-iterator v1.1.11), which crashes
// when built with Go 1.18 or later; the versions pinned here are the first
// that do not.
var recipe = modbuild.Recipe{
	Require: []string{
		"go.etcd.io/etcd/server/v3@" + Version,
		"github.com/modern-go/reflect2@v1.0.2",
		"github.com/json-iterator/go@v1.1.12",
	},
	Commands: []modbuild.Command{{Name: "etcd", Package: "go.etcd.io/etcd/server/v3"}},
	LDFlags:  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=" + gitSHA,
}

// Build returns the path of a static etcd binary of Version, building it
// from the module proxy first if CacheDir does not hold one built by the
// installed Go. Give ctx BuildTimeout.
func Build(ctx context.Context) (string, error) {
	goVersion, err := modbuild.GoVersion(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir, Version+"-"+goVersion)
	if err := modbuild.Build(ctx, dir, recipe); err != nil {
		return "", fmt.Errorf("building etcd %s: %w", Version, err)
	}
	return filepath.Join(dir, "etcd"), nil
}

// Archive returns an image archive (an OCI layout tar, for containerd's
// import) of ImageRef holding the etcd binary bin at BinaryPath, and
// the test image's busybox, whose shell helps when a test goes wrong.
func Archive(bin string) ([]byte, error) {
	etcd, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading etcd: %w", err)
	}
	var buf bytes.Buffer
	err = testimage.Build(&buf, testimage.Options{
		Ref:   ImageRef,
		Cmd:   []string{BinaryPath},
		Files: map[string][]byte{BinaryPath: etcd},
	})
	if err != nil {
		return nil, fmt.Errorf("building image %s: %w", ImageRef, err)
	}
	return buf.Bytes(), nil
}
