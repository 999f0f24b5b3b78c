package testvm

import (
	"fmt"

	"github.com/staticlet/staticlet/internal/testutil/tier"

	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAccelArgs(t *testing.T) {
	tests := []struct {
		env     string
		want    []string
		wantErr bool
	}{
		{"", []string{"-accel", "tcg"}, false},
		{"tcg", []string{"-accel", "tcg"}, false},
		{"kvm", []string{"-accel", "kvm", "-cpu", "host"}, false},
		{"hvf", nil, true},
	}
	for _, tt := range tests {
		got, err := accelArgs(tt.env)
		if !slices.Equal(got, tt.want) || (err != nil) != tt.wantErr {
			t.Errorf("accelArgs(%q) = %q, %v; want %q, error %v", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"./gotest-0.test", "./gotest-0.test"},
		{"STATICLET_BIN=/mnt/vmtest/staticlet", "STATICLET_BIN=/mnt/vmtest/staticlet"},
		{"^(TestA|TestB)$", "'^(TestA|TestB)$'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestFailureReport(t *testing.T) {
	out := "=== RUN   TestA\n    a_test.go:3: boom\n--- FAIL: TestA (0.10s)\n=== RUN   TestB\n    --- FAIL: TestB/sub (0.00s)\n--- FAIL: TestB (0.00s)\n--- PASS: TestC (0.00s)\nFAIL\n"
	got := failureReport(out)
	summary, rest, _ := strings.Cut(got, "\n\n")
	want := "failed in the guest:\n--- FAIL: TestA (0.10s)\n    --- FAIL: TestB/sub (0.00s)\n--- FAIL: TestB (0.00s)"
	if summary != want {
		t.Errorf("failureReport(...) begins %q, want %q", summary, want)
	}
	if logged, _, _ := strings.Cut(rest, "\n\n"); logged != "logged by the tests:\n    a_test.go:3: boom" {
		t.Errorf("failureReport(...) then has %q, want the test's log line", logged)
	}
}

func TestWriteDataDirRejects(t *testing.T) {
	for _, name := range []string{"../x", "/etc/x", "run", "results/x", "exit-code", "gotest-0.test"} {
		spec := Spec{Files: map[string]string{name: "/dev/null"}, GoTests: []GoTest{{Package: "."}}}
		if err := writeDataDir(t.TempDir(), spec, []string{"/dev/null"}); err == nil {
			t.Errorf("writeDataDir with Files[%q]: no error, want one", name)
		}
	}
}

// TestRunScript runs the guest's run script on the host, with a stand-in
// for a test binary: the script's exit code is run's, and each Go test's
// output and exit code land in the results.
func TestRunScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "fake.test")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$WHO: $*\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Script:  "echo script ran\nexit 7\n",
		GoTests: []GoTest{{Package: ".", Tests: []string{"TestA", "TestB"}, Env: map[string]string{"WHO": "inner"}, Timeout: time.Minute}},
	}
	dir := filepath.Join(tmp, "data")
	if err := writeDataDir(dir, spec, []string{fake}); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, resultsDir)
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./" + runFile)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RESULTS="+results)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("run = %v, want exit code 7 (the script's)\n%s", err, out)
	}
	const wantOut = "inner: -test.run ^(TestA|TestB)$ -test.v -test.timeout 1m0s\n"
	if !strings.Contains(string(out), "script ran\n"+wantOut) {
		t.Errorf("run's output = %q, want the script's then the test's %q", out, wantOut)
	}
	for file, want := range map[string]string{"gotest-0.out": wantOut, "gotest-0.exit": "3\n"} {
		if b, err := os.ReadFile(filepath.Join(results, file)); string(b) != want {
			t.Errorf("results/%s = %q, %v; want %q", file, b, err, want)
		}
	}
}

// TestDataDisk writes a data disk as Run does and reads it back as Run
// does after the guest, without mounting it.
func TestDataDisk(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			tier.Missing(t, fmt.Sprintf("%s: %v", tool, err))
		}
	}
	src := t.TempDir()
	for name, content := range map[string]string{"exit-code": "0\n", "results/a": "A", "results/sub/b": "B"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	disk := filepath.Join(t.TempDir(), "data.img")
	if err := makeDataDisk(ctx, disk, src); err != nil {
		t.Fatal(err)
	}
	if got, err := readDiskFile(ctx, disk, "/exit-code"); got != "0\n" || err != nil {
		t.Errorf("readDiskFile(/exit-code) = %q, %v; want \"0\\n\"", got, err)
	}
	if _, err := readDiskFile(ctx, disk, "/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readDiskFile(/nothing) = %v, want fs.ErrNotExist", err)
	}
	dst := t.TempDir()
	if err := copyDiskDir(ctx, disk, "/results", dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"results/a": "A", "results/sub/b": "B"} {
		if b, err := os.ReadFile(filepath.Join(dst, name)); string(b) != want {
			t.Errorf("copied %s = %q, %v; want %q", name, b, err, want)
		}
	}
	if err := copyDiskDir(ctx, disk, "/nothing", dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("copyDiskDir(/nothing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLogged(t *testing.T) {
	out := "=== RUN   TestA\n    a_test.go:3: boom\n=== RUN   TestA/sub\n    a_test.go:9: sub boom\n" +
		"=== RUN   TestAB\n    ab_test.go:1: not A\n=== NAME  TestA\n    a_test.go:5: later\n--- FAIL: TestA (0.10s)\n"
	got := strings.Join(Logged(out, "TestA"), "|")
	want := "    a_test.go:3: boom|    a_test.go:9: sub boom|    a_test.go:5: later"
	if got != want {
		t.Errorf("Logged(out, TestA) = %q, want %q", got, want)
	}
}
