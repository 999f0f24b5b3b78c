package testvm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
)

// DefaultGoTestTimeout is a GoTest's -test.timeout when it sets none.
const DefaultGoTestTimeout = 5 * time.Minute

// GoTest runs chosen tests of a Go package's test binary in the guest, in
// GuestDir, as root, with CI=true (a missing dependency fails rather than
// skips) and InGuestEnv=1 in the environment.
type GoTest struct {
	// Package is the package whose tests run, as go test takes it,
	// relative to the current directory: "." for the calling test's own.
	// Run compiles its test binary static (CGO_ENABLED=0), as the guest
	// has only its own libraries.
	Package string
	// Tests are the names of top-level tests to run, matched exactly.
	Tests []string
	// Env is added to the tests' environment.
	Env map[string]string
	// Timeout is the binary's -test.timeout; DefaultGoTestTimeout if zero.
	// Keep it below the Spec's, so that a hung test ends with the binary's
	// panic and goroutine dump rather than with QEMU killed.
	Timeout time.Duration
}

// GoTestResult is how a GoTest ended.
type GoTestResult struct {
	// ExitCode is the test binary's; -1 if it did not finish.
	ExitCode int
	// Output is its stdout and stderr (-test.v).
	Output string
}

// buildTests compiles the test binary of pkg into dir and returns its path.
func buildTests(ctx context.Context, pkg, dir string) (string, error) {
	bin := filepath.Join(dir, "tests.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go test -c %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// name is the binary's name on the data disk: one per GoTest, as two may
// be different binaries with the same name.
func (gt GoTest) name(i int) string { return fmt.Sprintf("gotest-%d.test", i) }

// command is the shell that runs GoTest i and leaves its output and exit
// code in the results directory; the output goes to stdout as well.
func (gt GoTest) command(i int) string {
	timeout := gt.Timeout
	if timeout == 0 {
		timeout = DefaultGoTestTimeout
	}
	names := make([]string, len(gt.Tests))
	for j, n := range gt.Tests {
		names[j] = regexp.QuoteMeta(n)
	}
	args := []string{"env", "CI=true", InGuestEnv + "=1"}
	for _, k := range slices.Sorted(maps.Keys(gt.Env)) {
		args = append(args, k+"="+gt.Env[k])
	}
	args = append(args, "./"+gt.name(i), "-test.run", "^("+strings.Join(names, "|")+")$", "-test.v",
		"-test.timeout", timeout.String())
	for j, a := range args {
		args[j] = shellQuote(a)
	}
	out := fmt.Sprintf(`"$RESULTS"/gotest-%d`, i)
	return fmt.Sprintf("%s 2>&1 | tee %s.out\necho \"${PIPESTATUS[0]}\" >%s.exit\n", strings.Join(args, " "), out, out)
}

// checkGoTests reads the GoTests' results from dir and fails the test with
// each failure.
func checkGoTests(t testing.TB, tests []GoTest, dir string) []GoTestResult {
	t.Helper()
	results := make([]GoTestResult, len(tests))
	for i, gt := range tests {
		r := &results[i]
		r.ExitCode = -1
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("gotest-%d.out", i)))
		r.Output = string(out)
		code, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("gotest-%d.exit", i)))
		if err == nil {
			r.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(code)))
		}
		switch {
		case err != nil:
			t.Errorf("testvm: %s in the guest did not finish (%v); its output:\n%s", strings.Join(gt.Tests, ", "), err, debroot.LastLines(r.Output, 60))
		case r.ExitCode != 0:
			t.Errorf("testvm: %s in the guest: exit code %d\n%s", strings.Join(gt.Tests, ", "), r.ExitCode, failureReport(r.Output))
		default:
			t.Logf("testvm: in the guest:\n%s", strings.Join(verdicts(r.Output), "\n"))
		}
	}
	return results
}

// failureReport sums up a failed go test run: its --- FAIL lines, then
// what the tests logged (t.Log and t.Error lines, "file_test.go:12: ...",
// without the process logs a test dumps after them), then the end of its
// output.
func failureReport(output string) string {
	var fails, logs []string
	for _, line := range verdicts(output) {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "--- FAIL:") || strings.HasPrefix(line, "panic:") {
			fails = append(fails, line)
		}
	}
	if len(fails) == 0 {
		fails = []string{"(no --- FAIL line: the binary failed to run or timed out)"}
	}
	for _, line := range strings.Split(output, "\n") {
		if testLogLine.MatchString(line) {
			logs = append(logs, line)
		}
	}
	return "failed in the guest:\n" + strings.Join(fails, "\n") +
		"\n\nlogged by the tests:\n" + debroot.LastLines(strings.Join(logs, "\n"), 60) +
		"\n\noutput (last lines):\n" + debroot.LastLines(output, 40)
}

// Logged returns what top-level test name logged in a go test -v output
// (its t.Log and t.Error lines, those of its subtests included), so a
// caller can put why a guest test failed beside its own verdict.
func Logged(output, name string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(output, "\n") {
		// "=== RUN", "=== CONT" and "=== NAME" say whose lines follow.
		if f := strings.Fields(line); len(f) == 3 && f[0] == "===" {
			in = f[2] == name || strings.HasPrefix(f[2], name+"/")
			continue
		}
		if in && testLogLine.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// testLogLine matches a line testing writes for t.Log or t.Error.
var testLogLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// verdicts are the lines of go test's output that say how tests ended:
// --- PASS, FAIL and SKIP of tests and subtests, and a panic.
func verdicts(output string) []string {
	var lines []string
	for _, line := range strings.Split(output, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "--- ") || strings.HasPrefix(line, "panic:") {
			lines = append(lines, line)
		}
	}
	return lines
}

// shellQuote quotes s as one word for bash.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
