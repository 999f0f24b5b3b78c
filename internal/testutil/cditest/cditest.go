// Package cditest is a test vendor of CDI devices: char device nodes
// made where a test says, with the numbers of /dev/null (MknodNull: a
// write to one succeeds) or of no driver (MknodNoDriver: opening one
// fails, but past the device cgroup's check), and CDI specs naming such
// nodes (WriteVendor, WriteSpec), for the tests of devices, sandbox and
// the end-to-end suite. What it makes goes when the test ends.
package cditest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// MknodNull makes a char device with the numbers of /dev/null at path,
// removed when t ends. Without the right to (not root), t is missing a
// dependency (tier.Missing).
func MknodNull(t testing.TB, path string) {
	t.Helper()
	mknod(t, path, 1, 3)
}

// MknodNoDriver makes a char device at path whose major number no driver
// of this host has taken, among those for local use (240-254), removed
// when t ends. Opening it fails with ENXIO where the device cgroup lets
// the opener have it, and with EPERM where it does not.
func MknodNoDriver(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	chars, _, _ := strings.Cut(string(b), "Block devices:")
	taken := map[string]bool{}
	for _, line := range strings.Split(chars, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			taken[f[0]] = true
		}
	}
	for major := uint32(240); major <= 254; major++ {
		if !taken[fmt.Sprint(major)] {
			mknod(t, path, major, 0)
			return
		}
	}
	t.Fatal("every char device major number for local use (240-254) is taken")
}

func mknod(t testing.TB, path string, major, minor uint32) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))); err != nil {
		if errors.Is(err, unix.EPERM) {
			tier.Missing(t, "making device nodes needs root: "+err.Error())
		}
		t.Fatalf("mknod %s: %v", path, err)
	}
	t.Cleanup(func() { os.Remove(path) })
}

// WriteVendor writes, as file <prefix>.yaml of specDir (WriteSpec), a
// CDI spec of n devices of kind, each a node that MknodNull makes in a
// new temporary directory. It returns the spec's path.
func WriteVendor(t testing.TB, specDir, kind, prefix string, n int) string {
	t.Helper()
	devDir := t.TempDir()
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = filepath.Join(devDir, fmt.Sprintf("node%d", i))
		MknodNull(t, nodes[i])
	}
	return WriteSpec(t, specDir, kind, prefix, nodes)
}

// WriteSpec writes, as file <prefix>.yaml of specDir (atomically), a CDI
// spec of kind naming a device for each of the host's device nodes, d0,
// d1, ...: seen in a container as /dev/<prefix>0, ..., with
// <PREFIX>0=yes, ... in its environment. It returns the spec's path.
func WriteSpec(t testing.TB, specDir, kind, prefix string, nodes []string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cdiVersion: 0.6.0\nkind: %s\ndevices:\n", kind)
	for i, host := range nodes {
		fmt.Fprintf(&b, "- name: d%[1]d\n  containerEdits:\n    env: [%[2]s%[1]d=yes]\n    deviceNodes:\n    - path: /dev/%[3]s%[1]d\n      hostPath: %[4]s\n",
			i, strings.ToUpper(prefix), prefix, host)
	}
	path := filepath.Join(specDir, prefix+".yaml")
	tmp := filepath.Join(specDir, "."+prefix+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}
