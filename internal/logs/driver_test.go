package logs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be the log driver, as the staticlet binary
// is for the shim.
func TestMain(m *testing.M) {
	if os.Getenv("STATICLET_LOGS_TEST_DRIVER") == "1" && IsDriver(os.Args[1:]) {
		os.Exit(RunDriver(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// shimArgs flattens args as the shim does: key-value pairs in map order.
func shimArgs(args map[string]string) []string {
	var out []string
	for k, v := range args {
		out = append(out, k, v)
	}
	return out
}

func TestDriverArgs(t *testing.T) {
	cfg := DriverConfig{Path: "/var/log/pods/ns_n_u/c/0.log", MaxSize: 10 << 20, MaxFiles: 5}
	for range 5 {
		args := shimArgs(cfg.Args())
		// Shuffle the pairs: their order is not defined.
		pairs := [][]string{args[0:2], args[2:4], args[4:6]}
		rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		args = slices.Concat(pairs...)
		if !IsDriver(args) {
			t.Fatalf("IsDriver(%q) = false", args)
		}
		got, err := ParseDriverArgs(args)
		if err != nil || got != cfg {
			t.Errorf("ParseDriverArgs(%q) = %+v, %v; want %+v", args, got, err, cfg)
		}
	}
	for _, args := range [][]string{nil, {"run"}, {"logs", "web"}, {"log-driver"}, {"pause"}} {
		if IsDriver(args) {
			t.Errorf("IsDriver(%q) = true", args)
		}
	}
	for _, args := range [][]string{{"log-driver", "/x", "max-size", "ten"}, {"max-files", "2"}, {"log-driver", "/x", "colour", "red"}} {
		if _, err := ParseDriverArgs(args); err == nil {
			t.Errorf("ParseDriverArgs(%q) succeeded", args)
		}
	}
}

// pipes are the descriptors the shim creates for the driver.
type pipes struct {
	outR, outW, errR, errW, readyR, readyW *os.File
}

func newPipes(t *testing.T) *pipes {
	t.Helper()
	var p pipes
	var err error
	for _, pair := range [][2]**os.File{{&p.outR, &p.outW}, {&p.errR, &p.errW}, {&p.readyR, &p.readyW}} {
		if *pair[0], *pair[1], err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{p.outR, p.outW, p.errR, p.errW, p.readyR, p.readyW} {
			f.Close()
		}
	})
	return &p
}

// waitReady reads the ready pipe as the shim does: one byte, then EOF.
func (p *pipes) waitReady(t *testing.T) {
	t.Helper()
	b, err := io.ReadAll(p.readyR)
	if err != nil || len(b) != 1 {
		t.Fatalf("ready pipe gave %q, %v; want one byte then EOF", b, err)
	}
}

func TestDrive(t *testing.T) {
	p := newPipes(t)
	path := filepath.Join(t.TempDir(), "0.log")
	done := make(chan error, 1)
	go func() {
		done <- Drive(DriverConfig{Path: path}, DriverIO{Stdout: p.outR, Stderr: p.errR, Ready: p.readyW})
	}()
	p.waitReady(t)
	fmt.Fprint(p.outW, "out\n")
	fmt.Fprint(p.errW, "unterminated")
	p.outW.Close()
	p.errW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drive did not return within 5s of its streams' end")
	}
	got := readRecords(t, path)
	// The two streams' order is not defined: compare sorted by stream.
	slices.SortFunc(got, func(a, b rec) int { return strings.Compare(a.stream, b.stream) })
	if want := []rec{{Stderr, false, "unterminated"}, {Stdout, false, "out"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", got, want)
	}
}

// TestDriveStops checks that after Stop the driver writes what is still
// in the pipes, and gives up on streams that stay open after Drain.
func TestDriveStops(t *testing.T) {
	p := newPipes(t)
	path := filepath.Join(t.TempDir(), "0.log")
	stop := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- Drive(DriverConfig{Path: path}, DriverIO{Stdout: p.outR, Stderr: p.errR, Ready: p.readyW,
			Stop: stop, Drain: 200 * time.Millisecond})
	}()
	p.waitReady(t)
	fmt.Fprint(p.outW, "a line\nhalf a line")
	waitFor(t, 5*time.Second, "the first line written", func() (bool, string) {
		b, _ := os.ReadFile(path)
		return len(b) > 0, ""
	})
	stop <- syscall.SIGTERM
	select {
	case err := <-done:
		if err == nil {
			t.Error("Drive() = nil with streams left open, want an error saying so")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drive did not return within 5s of Stop")
	}
	if got, want := readRecords(t, path), []rec{{Stdout, false, "a line"}, {Stdout, false, "half a line"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", got, want)
	}
}

// TestRunDriver runs the driver as the shim does: a process given the
// pipes as descriptors 3, 4 and 5 and its arguments as pairs, then
// SIGTERM once the pipes are closed.
func TestRunDriver(t *testing.T) {
	p := newPipes(t)
	path := filepath.Join(t.TempDir(), "7.log")
	cmd := exec.Command(os.Args[0], shimArgs(DriverConfig{Path: path, MaxSize: 1 << 20, MaxFiles: 2}.Args())...)
	cmd.Env = []string{"STATICLET_LOGS_TEST_DRIVER=1", "CONTAINER_ID=c1", "CONTAINER_NAMESPACE=staticlet"}
	cmd.ExtraFiles = []*os.File{p.outR, p.errR, p.readyW}
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The driver holds the only read ends now, as with the shim.
	p.outR.Close()
	p.errR.Close()
	p.readyW.Close()
	p.waitReady(t)

	for i := range 1000 {
		fmt.Fprintf(p.outW, "out %d\n", i)
		fmt.Fprintf(p.errW, "err %d\n", i)
	}
	fmt.Fprint(p.outW, "no newline")
	p.outW.Close()
	p.errW.Close()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("driver exited with %v: %s", err, out.String())
	}
	got := readRecords(t, path)
	var outs, errs []string
	for _, r := range got {
		if r.partial {
			t.Fatalf("partial record %v", r)
		}
		if r.stream == Stdout {
			outs = append(outs, r.content)
		} else {
			errs = append(errs, r.content)
		}
	}
	if len(outs) != 1001 || len(errs) != 1000 || outs[1000] != "no newline" {
		t.Fatalf("%d stdout and %d stderr records, want 1001 and 1000 ending with the unterminated line", len(outs), len(errs))
	}
	for i := range 1000 {
		if outs[i] != fmt.Sprintf("out %d", i) || errs[i] != fmt.Sprintf("err %d", i) {
			t.Fatalf("record %d: %q, %q: out of order", i, outs[i], errs[i])
		}
	}
}

// syncBuf collects a process's output.
type syncBuf struct {
	b []byte
}

func (s *syncBuf) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *syncBuf) String() string              { return string(s.b) }
