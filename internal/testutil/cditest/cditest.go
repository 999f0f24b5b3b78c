// Package cditest is a test vendor of CDI devices: char device nodes
// with the numbers of /dev/null (a write to one succeeds), made where a
// test says (MknodNull), and CDI specs naming such nodes (WriteVendor),
// for the tests of devices, sandbox and the end-to-end suite. What it
// makes goes when the test ends.
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
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		if errors.Is(err, unix.EPERM) {
			tier.Missing(t, "making device nodes needs root: "+err.Error())
		}
		t.Fatalf("mknod %s: %v", path, err)
	}
	t.Cleanup(func() { os.Remove(path) })
}

// WriteVendor writes, as file <prefix>.yaml of specDir (atomically), a
// CDI spec of n devices of kind, named d0, d1, ...: each is a node that
// MknodNull makes in a new temporary directory, seen in a container as
// /dev/<prefix>0, ..., with <PREFIX>0=yes, ... in its environment. It
// returns the spec's path.
func WriteVendor(t testing.TB, specDir, kind, prefix string, n int) string {
	t.Helper()
	devDir, err := os.MkdirTemp("", "cdi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(devDir) })
	var b strings.Builder
	fmt.Fprintf(&b, "cdiVersion: 0.6.0\nkind: %s\ndevices:\n", kind)
	for i := range n {
		host := filepath.Join(devDir, fmt.Sprintf("node%d", i))
		MknodNull(t, host)
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
