package harness

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// sleeper is SleeperPod's manifest.
const sleeper = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: HOSTNET
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done", "ARG"]
`

// SleeperPod is the manifest of pod name, whose container main sleeps
// until SIGTERM with arg as its last argument (a marker a test can find
// in /proc), on the host's network if hostNetwork.
func SleeperPod(name, arg string, hostNetwork bool) string {
	r := strings.NewReplacer("NAME", name, "ARG", arg, "HOSTNET", map[bool]string{true: "true", false: "false"}[hostNetwork])
	return r.Replace(sleeper)
}

// BenchScript runs until SIGTERM, which it obeys at once: the shell, PID 1 of
// its container, waits on a background sleep, and wait returns on a trapped
// signal. The marker is the script's $0, so it shows in /proc/<pid>/cmdline.
const BenchScript = "trap 'exit 0' TERM; sleep 100000 & wait"

// benchManifest is BenchPod's manifest.
const benchManifest = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "SCRIPT", "MARKER"]
`

// BenchPod is the manifest of pod name, whose container runs BenchScript
// with marker as its $0.
func BenchPod(name, marker string) string {
	return strings.NewReplacer("NAME", name, "SCRIPT", BenchScript, "MARKER", marker).Replace(benchManifest)
}

// Markers returns the lines of file in dir, once it has at least n.
func Markers(t *testing.T, dir, file string, n int) []string {
	t.Helper()
	var lines []string
	WaitFor(t, 30*time.Second, fmt.Sprintf("%d lines in %s", n, file), func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		lines = strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
		return len(lines) >= n, strings.Join(lines, " | ")
	})
	return lines
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ImageArchive builds the test image named ref as a docker save or OCI
// archive, compressed by compress ("", "gzip" or "zstd").
func ImageArchive(t *testing.T, ref string, docker bool, compress string) []byte {
	t.Helper()
	var oci bytes.Buffer
	if err := testimage.Build(&oci, testimage.Options{Ref: ref}); err != nil {
		t.Fatalf("building test image: %v", err)
	}
	b := oci.Bytes()
	if docker {
		var ds bytes.Buffer
		if err := testimage.DockerSave(&ds, b); err != nil {
			t.Fatal(err)
		}
		b = ds.Bytes()
	}
	var out bytes.Buffer
	switch compress {
	case "":
		return b
	case "gzip":
		zw := gzip.NewWriter(&out)
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	case "zstd":
		zw, err := zstd.NewWriter(&out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}
