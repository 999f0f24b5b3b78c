package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/staticlet/staticlet/internal/logd"
)

// DebPackage returns staticlet's .deb: the one make built (STATICLET_DEB),
// or one built here, for this test, from the test's binary.
func DebPackage(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("STATICLET_DEB"); d != "" {
		return d
	}
	bin := Binary(t)
	deb := filepath.Join(t.TempDir(), "staticlet.deb")
	cmd := exec.Command("go", "run", "./mkdeb", "-version", "dev", "-arch", runtime.GOARCH, "-binary", bin, "-logd", logdProgram(t, bin), "-o", deb)
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = filepath.Join(root, "packaging")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the .deb: %v\n%s", err, out)
	}
	return deb
}

// logdProgram returns the log daemon's program that goes with staticlet
// binary bin: the one beside it (make builds both), or one built here.
func logdProgram(t *testing.T, bin string) string {
	t.Helper()
	beside := filepath.Join(filepath.Dir(bin), logd.DaemonProgram)
	if _, err := os.Stat(beside); err == nil {
		return beside
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), logd.DaemonProgram)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/staticlet-logd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", logd.DaemonProgram, err, b)
	}
	return out
}
