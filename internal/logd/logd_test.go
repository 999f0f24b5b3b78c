package logd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TestForwarderBuild: the embedded forwarders are what forwarder/build.sh
// makes of the sources.
func TestForwarderBuild(t *testing.T) {
	for _, tool := range []string{"as", "ld", "aarch64-linux-gnu-as", "aarch64-linux-gnu-ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("no %s to assemble the forwarder (make deps installs binutils-aarch64-linux-gnu)", tool)
			tier.Missing(t, msg)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "forwarder/build.sh")
	cmd.Env = append(os.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v: %s", err, b)
	}
	for arch, embedded := range map[string][]byte{"amd64": forwarderAMD64, "arm64": forwarderARM64} {
		built, err := os.ReadFile(filepath.Join(out, arch+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, embedded) {
			t.Errorf("forwarder/%s.bin differs from what build.sh makes of forwarder/%s.S: run forwarder/build.sh", arch, arch)
		}
	}
}

func TestForwarderSocketPath(t *testing.T) {
	prog, ok, err := Forwarder("amd64", "/run/x/sock")
	if err != nil || !ok {
		t.Fatalf("Forwarder = %v, %v", ok, err)
	}
	if bytes.Contains(prog, []byte(socketMarker)) || !bytes.Contains(prog, []byte("/run/x/sock\x00")) {
		t.Error("the socket path is not in place of the marker")
	}
	if len(prog) != len(forwarderAMD64) {
		t.Errorf("%d bytes, want %d", len(prog), len(forwarderAMD64))
	}
	if _, _, err := Forwarder("arm64", "/"+strings.Repeat("x", 107)); err == nil {
		t.Error("a 108-byte socket path accepted")
	}
	if _, ok, _ := Forwarder("riscv64", "/s"); ok {
		t.Error("a forwarder for riscv64")
	}
}

// harness is a daemon directory, and a way to run daemons and forwarders
// in it.
type harness struct {
	t       *testing.T
	dir     string
	logPath string
	prog    string
	wrap    []string
}

func newHarness(t *testing.T, arch string) *harness {
	t.Helper()
	// A short directory: a socket path holds 107 bytes.
	dir, err := os.MkdirTemp("", "logd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &harness{t: t, dir: filepath.Join(dir, "d"), logPath: filepath.Join(dir, "logs", "0.log")}
	prog, _, err := Forwarder(arch, SocketPath(h.dir))
	if err != nil {
		t.Fatal(err)
	}
	h.prog = filepath.Join(dir, "forwarder")
	if err := os.WriteFile(h.prog, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(h.logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if arch != runtime.GOARCH {
		q, err := exec.LookPath("qemu-aarch64")
		if err != nil {
			tier.Missing(t, "no qemu-aarch64 (make deps installs qemu-user)")
		}
		h.wrap = []string{q}
	}
	return h
}

// daemon runs a daemon in the test until the returned function is called,
// which waits for it to end.
func (h *harness) daemon(cfg Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, h.dir, cfg) }()
	waitFor(h.t, "the daemon to listen", func() (bool, string) {
		_, err := os.Stat(SocketPath(h.dir))
		return err == nil, fmt.Sprint(err)
	})
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Serve: %v", err)
		}
	}
	h.t.Cleanup(stop)
	return stop
}

// container is a forwarder as the shim runs it, with the write ends of
// the pipes it was handed.
type container struct {
	cmd      *exec.Cmd
	out, err *os.File
}

func (h *harness) forwarder() *container {
	h.t.Helper()
	return h.forwarderTo(h.logPath)
}

// forwarderTo is a forwarder of a container that logs to logPath.
func (h *harness) forwarderTo(logPath string) *container {
	h.t.Helper()
	outR, outW := pipe(h.t)
	errR, errW := pipe(h.t)
	readyR, readyW := pipe(h.t)
	args := append(append([]string{}, h.wrap...), h.prog)
	for k, v := range (logs.DriverConfig{Path: logPath, MaxSize: 1 << 20, MaxFiles: 2}).Args() {
		args = append(args, k, v)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.ExtraFiles = []*os.File{outR, errR, readyW}
	cmd.Env = []string{"CONTAINER_ID=c1", "CONTAINER_NAMESPACE=test"}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	outR.Close()
	errR.Close()
	readyW.Close()
	b := make([]byte, 1)
	if n, err := readyR.Read(b); n != 1 || err != nil {
		h.t.Fatalf("the ready byte: %d, %v", n, err)
	}
	readyR.Close()
	return &container{cmd: cmd, out: outW, err: errW}
}

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// lines returns the contents of the log's records, stream:line.
func (h *harness) lines() []string { return h.linesOf(h.logPath) }

// linesOf returns the contents of the records of the log at path.
func (h *harness) linesOf(path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		rec, err := logs.ParseRecord([]byte(l))
		if err != nil {
			h.t.Fatalf("not a CRI record: %q: %v", l, err)
		}
		out = append(out, rec.Stream+":"+string(rec.Content))
	}
	return out
}

func (h *harness) waitLines(want ...string) {
	h.t.Helper()
	waitFor(h.t, "the log to hold "+strings.Join(want, ", "), func() (bool, string) {
		got := h.lines()
		return strings.Join(got, "|") == strings.Join(want, "|"), strings.Join(got, "|")
	})
}

// TestForward: for each architecture, a container's two streams reach its
// log through the forwarder and the daemon; when the streams end, the
// forwarder exits 0 once its log is written, unterminated last line
// included, and so it does when the shim asks it to stop right after it
// closed the pipes.
func TestForward(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			h := newHarness(t, arch)
			h.daemon(Config{})
			c := h.forwarder()
			fmt.Fprintln(c.out, "one")
			fmt.Fprintln(c.err, "two")
			h.waitLines("stdout:one", "stderr:two")
			fmt.Fprint(c.out, "three, no newline")
			c.out.Close()
			c.err.Close()
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("forwarder at the end of its streams: %v, want exit 0", err)
			}
			got := h.lines()
			if want := "stdout:one|stderr:two|stdout:three, no newline"; strings.Join(got, "|") != want {
				t.Errorf("log once the forwarder exited: %q, want %q", got, want)
			}

			// The shim's way: the pipes closed, then SIGTERM at once.
			c = h.forwarder()
			fmt.Fprint(c.out, "four")
			c.out.Close()
			c.err.Close()
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("forwarder after SIGTERM: %v, want exit 0", err)
			}
			if got := h.lines(); len(got) != 4 || got[3] != "stdout:four" {
				t.Errorf("log once the second forwarder exited: %q, want stdout:four last", got)
			}
		})
	}
}

// TestDaemonReplaced: output written while no daemon runs waits in the
// pipes, and the next daemon gets the pipes from the forwarder and writes
// it, in order, to the same file.
func TestDaemonReplaced(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	stop := h.daemon(Config{})
	c := h.forwarder()
	fmt.Fprintln(c.out, "before")
	h.waitLines("stdout:before")
	stop()
	fmt.Fprintln(c.out, "between")
	fmt.Fprintln(c.err, "between too")
	h.daemon(Config{})
	fmt.Fprintln(c.out, "after")
	waitFor(t, "the lines written without a daemon", func() (bool, string) {
		got := strings.Join(h.lines(), "|")
		return strings.Contains(got, "stdout:between") && strings.Contains(got, "stderr:between too") &&
			strings.Contains(got, "stdout:after"), got
	})
	got := h.lines()
	if got[0] != "stdout:before" || strings.Index(strings.Join(got, "|"), "between|") > strings.Index(strings.Join(got, "|"), "after") {
		t.Errorf("log %q: want before, between, after in order", got)
	}
}

// TestForwarderWithoutDaemon: a forwarder is ready, and stops at once,
// when no daemon ever ran.
func TestForwarderWithoutDaemon(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	c := h.forwarder()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("forwarder after SIGTERM: %v, want exit 0", err)
	}
}

// TestOneDaemon: a second daemon for a directory returns at once, leaving
// the first.
func TestOneDaemon(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	h.daemon(Config{})
	if pid := DaemonPID(h.dir); pid != os.Getpid() {
		t.Errorf("DaemonPID = %d, want this process %d", pid, os.Getpid())
	}
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), h.dir, Config{}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("second Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second daemon for the same directory kept running")
	}
}

// TestIdleExit: a daemon with nothing to log exits once idle, whether or
// not a staticlet runs, but not while a container logs through it.
func TestIdleExit(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), h.dir, Config{Idle: 100 * time.Millisecond}) }()
	waitFor(t, "the daemon to listen", func() (bool, string) {
		_, err := os.Stat(SocketPath(h.dir))
		return err == nil, fmt.Sprint(err)
	})
	c := h.forwarder()
	fmt.Fprintln(c.out, "x")
	h.waitLines("stdout:x")
	// Nothing tells "did not exit": the daemon is given ten idle periods.
	select {
	case <-done:
		t.Fatal("daemon exited while a container logs through it")
	case <-time.After(time.Second):
	}
	c.out.Close()
	c.err.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("idle daemon did not exit")
	}
	if _, err := os.Stat(SocketPath(h.dir)); err == nil {
		t.Error("socket left behind")
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIdleExitDirectoryGone: a daemon whose directory was removed exits
// once idle.
func TestIdleExitDirectoryGone(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), h.dir, Config{Idle: 100 * time.Millisecond}) }()
	waitFor(t, "the daemon to listen", func() (bool, string) {
		_, err := os.Stat(SocketPath(h.dir))
		return err == nil, fmt.Sprint(err)
	})
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a daemon whose directory is gone did not exit")
	}
}

// TestSetupDaemonProgram: the daemon runs the daemon's own program where
// it is an executable file beside staticlet's binary, and staticlet's
// binary otherwise.
func TestSetupDaemonProgram(t *testing.T) {
	tests := []struct {
		name   string
		beside os.FileMode // the mode of DaemonProgram beside exe; 0: none
		want   string      // "own" or "exe"
	}{
		{"beside staticlet", 0o755, "own"},
		{"missing", 0, "exe"},
		{"not executable", 0o644, "exe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			exe := filepath.Join(bin, "staticlet")
			own := filepath.Join(bin, DaemonProgram)
			if tt.beside != 0 {
				if err := os.WriteFile(own, []byte("#!/bin/sh\n"), tt.beside); err != nil {
					t.Fatal(err)
				}
			}
			in, err := Setup(t.TempDir(), exe)
			if err != nil {
				t.Fatal(err)
			}
			if in.Daemon == "" {
				t.Skipf("no forwarder for %s: no daemon", runtime.GOARCH)
			}
			want := map[string]string{"own": own, "exe": exe}[tt.want]
			if in.Daemon != want {
				t.Errorf("Setup: Daemon = %s, want %s", in.Daemon, want)
			}
		})
	}
}

// TestManyContainers: one daemon writes the logs of many containers at
// once, each line to its own container's log, each stream's lines in the
// order written, and tells each forwarder when its streams ended.
func TestManyContainers(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	h.daemon(Config{})
	const n, lines = 20, 50
	cs := make([]*container, n)
	paths := make([]string, n)
	for i := range cs {
		paths[i] = filepath.Join(filepath.Dir(h.logPath), fmt.Sprintf("c%d.log", i))
		cs[i] = h.forwarderTo(paths[i])
	}
	var want [n]map[string][]string // by stream
	for j := range lines {
		for i, c := range cs {
			out, stream := c.out, "stdout"
			if j%3 == 0 {
				out, stream = c.err, "stderr"
			}
			if want[i] == nil {
				want[i] = map[string][]string{}
			}
			line := fmt.Sprintf("c%d line %d", i, j)
			fmt.Fprintln(out, line)
			want[i][stream] = append(want[i][stream], line)
		}
	}
	for i, c := range cs {
		c.out.Close()
		c.err.Close()
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("forwarder %d at the end of its streams: %v, want exit 0", i, err)
		}
		// Across two pipes, the order of lines is not known.
		got := map[string][]string{}
		for _, l := range h.linesOf(paths[i]) {
			stream, line, _ := strings.Cut(l, ":")
			got[stream] = append(got[stream], line)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("log %d = %q, want %q", i, got, want[i])
		}
	}
}

// TestDrainAfterForwarderGone: when a forwarder goes away while the
// container's pipes stay open, the daemon reads them for Drain more, then
// lets go of them (the writer sees EPIPE once nobody reads), and serves
// the next container meanwhile. The drain is long enough that the write
// after the kill lands within it on a busy machine.
func TestDrainAfterForwarderGone(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	h.daemon(Config{Drain: 3 * time.Second})
	c := h.forwarder()
	fmt.Fprintln(c.out, "before")
	h.waitLines("stdout:before")
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	fmt.Fprint(c.out, "unterminated")
	waitFor(t, "the daemon to stop reading the pipe", func() (bool, string) {
		_, err := c.out.Write([]byte("x"))
		return errors.Is(err, syscall.EPIPE), fmt.Sprint(err)
	})
	if got := h.lines(); len(got) < 2 || got[0] != "stdout:before" || !strings.HasPrefix(got[1], "stdout:unterminated") {
		t.Errorf("log %q, want the line before and the unterminated one read during the drain", got)
	}
	next := h.forwarderTo(filepath.Join(filepath.Dir(h.logPath), "next.log"))
	fmt.Fprintln(next.out, "next")
	waitFor(t, "the next container's line", func() (bool, string) {
		got := h.linesOf(filepath.Join(filepath.Dir(h.logPath), "next.log"))
		return strings.Join(got, "|") == "stdout:next", strings.Join(got, "|")
	})
}

// TestBadForwarders: a connection that closes before its message, and a
// message without the two descriptors, are dropped, and the daemon goes
// on serving.
func TestBadForwarders(t *testing.T) {
	h := newHarness(t, runtime.GOARCH)
	h.daemon(Config{})
	addr := &unix.SockaddrUnix{Name: SocketPath(h.dir)}
	for _, name := range []string{"closed at once", "no descriptors"} {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Connect(fd, addr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "no descriptors" {
			if _, err := unix.Write(fd, []byte("forwarder\x00log-driver\x00/x.log\x00")); err != nil {
				t.Fatal(err)
			}
			// The daemon hangs up on it.
			var b [1]byte
			if n, err := unix.Read(fd, b[:]); n != 0 || err != nil {
				t.Errorf("%s: read %d, %v; want the daemon to hang up", name, n, err)
			}
		}
		unix.Close(fd)
	}
	c := h.forwarder()
	fmt.Fprintln(c.out, "served")
	h.waitLines("stdout:served")
}

// TestImageSegments: the daemon drops the pages of its program's
// read-only mappings, code and constants apart (the constants are evicted
// from the page cache, the code is not), and never touches a writable
// mapping or another file's.
func TestImageSegments(t *testing.T) {
	const exe = "/usr/bin/staticlet-logd"
	maps := `00400000-004fe000 r-xp 00000000 fe:00 10069235                           /usr/bin/staticlet-logd
004fe000-00631000 r--p 000fe000 fe:00 10069235                           /usr/bin/staticlet-logd
00631000-00642000 rw-p 00231000 fe:00 10069235                           /usr/bin/staticlet-logd
00642000-00678000 rw-p 00000000 00:00 0
7f3b48807000-7f3b48889000 r--p 00000000 fe:00 42                         /usr/bin/staticlet-logd.old
7f3b48989000-7f3b489e9000 r-xp 00001000 fe:00 43                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffc8a9fb000-7ffc8aa1c000 rw-p 00000000 00:00 0                          [stack]
`
	want := []imageSegment{
		{start: 0x400000, end: 0x4fe000, offset: 0, exec: true},
		{start: 0x4fe000, end: 0x631000, offset: 0xfe000, exec: false},
	}
	got := imageSegments(maps, exe)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("imageSegments = %+v, want %+v", got, want)
	}
	if got := imageSegments(maps, "/usr/bin/other"); len(got) != 0 {
		t.Errorf("imageSegments of a file not mapped = %+v, want none", got)
	}
}

// TestDropImagePages: a process that dropped its program's pages runs on,
// its code and constants faulted back in as it goes.
func TestDropImagePages(t *testing.T) {
	dropImagePages()
	if got := fmt.Sprintf("%s %d", strings.ToUpper("after"), len(streams)); got != "AFTER 2" {
		t.Errorf("after dropping the pages: %q", got)
	}
}

// TestTextLogger: the daemon's own log lines are in log/slog's text
// format, values quoted as slog quotes them, a value without its key
// under !BADKEY, and one line per record.
func TestTextLogger(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 11, 24, 15, 38, 2, 5e6, time.UTC)
	l := textLogger{w: &b, now: func() time.Time { return at }}
	l.Warn("reading a container's output", "path", "/var/log/pods/a b/0.log", "err", errors.New("EIO"), "bytes", 12)
	l.Info("plain", "within", 10*time.Second, "empty", "", "eq", "a=b")
	l.Error("odd", "lonely")
	want := `time=2026-11-24T15:38:02.005Z level=WARN msg="reading a container's output" path="/var/log/pods/a b/0.log" err=EIO bytes=12
time=2026-11-24T15:38:02.005Z level=INFO msg=plain within=10s empty="" eq="a=b"
time=2026-11-24T15:38:02.005Z level=ERROR msg=odd !BADKEY=lonely
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDaemonProgramImports: the daemon's program links neither log/slog
// nor encoding/json, whose code the long-lived daemon would map for
// nothing; package logd reports through its Logger.
func TestDaemonProgramImports(t *testing.T) {
	// go test puts its own go first in PATH.
	out, err := exec.Command("go", "list", "-deps", "github.com/staticlet/staticlet/cmd/staticlet-logd").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "log/slog" || pkg == "encoding/json" {
			t.Errorf("staticlet-logd depends on %s", pkg)
		}
	}
}
