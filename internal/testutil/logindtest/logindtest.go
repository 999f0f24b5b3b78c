// Package logindtest starts a private D-Bus daemon with a fake
// systemd-logind on it, for tests of graceful node shutdown that need
// neither systemd nor the machine's system bus.
//
// The fake owns the names org.freedesktop.login1 and
// org.freedesktop.systemd1 and implements the little of them staticlet
// uses: logind's Inhibit (a pipe's write end is the lock, released when
// every copy of it is closed, as with the real logind), its
// InhibitDelayMaxUSec property, its PrepareForShutdown signal (emitted on
// the test's request), and systemd's KillUnit, which, for SIGHUP to
// systemd-logind.service, re-reads InhibitDelayMaxSec from the drop-in
// file the test names, as logind reloads its configuration.
//
// It owns the dbus-daemon process, its temp directory, its bus connection
// and the locks' read ends; all go when the test ends. It is meant to be
// imported only from _test.go files. A Logind is safe for concurrent use.
package logindtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// The names, paths and interfaces of the services faked.
const (
	logindName    = "org.freedesktop.login1"
	logindPath    = "/org/freedesktop/login1"
	logindIface   = "org.freedesktop.login1.Manager"
	systemdName   = "org.freedesktop.systemd1"
	systemdPath   = "/org/freedesktop/systemd1"
	systemdIface  = "org.freedesktop.systemd1.Manager"
	logindService = "systemd-logind.service"
)

// startTimeout bounds dbus-daemon's start; not waited out when it works.
const startTimeout = 30 * time.Second

// busConfig is dbus-daemon's configuration: one unix socket, EXTERNAL
// authentication, and everything allowed to everyone.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="method_return"/>
    <allow send_type="signal"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="signal"/>
    <allow receive_type="error"/>
  </policy>
</busconfig>
`

// Config configures the fake.
type Config struct {
	// InhibitDelayMax is logind's InhibitDelayMaxUSec to begin with.
	InhibitDelayMax time.Duration
	// DropIn is the logind.conf.d file whose InhibitDelayMaxSec a reload
	// applies; a reload changes nothing when it is empty or missing.
	DropIn string
}

// Logind is a running bus with the fake logind on it.
type Logind struct {
	// Address is the bus's address, for DBUS_SYSTEM_BUS_ADDRESS.
	Address string

	cfg    Config
	daemon *exec.Cmd
	conn   *dbus.Conn
	props  *prop.Properties
	stop   chan struct{} // closed when the test ends

	// mu guards the fields below.
	mu      sync.Mutex
	locks   []*Lock
	reloads int
}

// Lock is an inhibitor lock the fake handed out.
type Lock struct {
	What, Who, Why, Mode string

	taken    chan struct{} // closed once another process or descriptor holds the lock
	released chan struct{} // closed once every copy of it is closed
}

// Taken tells whether the lock has reached its taker.
func (l *Lock) Taken() bool { return closed(l.taken) }

// Released tells whether the taker has closed the lock.
func (l *Lock) Released() bool { return closed(l.released) }

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Start starts dbus-daemon and the fake logind on it, both stopped when the
// test ends. Without dbus-daemon the test is skipped, or fails when CI=true.
func Start(t testing.TB, cfg Config) *Logind {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		tier.Missing(t, fmt.Sprintf("dbus-daemon is required (Debian package dbus): %v", err))
	}
	// A short directory: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "logindtest")
	if err != nil {
		t.Fatalf("making the bus directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, busConfig, filepath.Join(dir, "bus")), 0o644); err != nil {
		t.Fatalf("writing the bus configuration: %v", err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("starting dbus-daemon: %v", err)
	}
	var stderr strings.Builder // written by cmd until Wait returns
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dbus-daemon's output:\n%s", stderr.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	l := &Logind{cfg: cfg, daemon: cmd, stop: make(chan struct{})}
	select {
	case l.Address = <-addr:
	case <-time.After(startTimeout):
		t.Fatalf("dbus-daemon printed no address within %v", startTimeout)
	}
	if l.Address == "" {
		t.Fatalf("dbus-daemon exited without printing its address")
	}
	t.Cleanup(func() { close(l.stop) })
	if err := l.serve(); err != nil {
		t.Fatalf("serving the fake logind: %v", err)
	}
	t.Cleanup(func() { l.conn.Close() })
	return l
}

// serve connects to the bus and exports the fake services.
func (l *Logind) serve() error {
	conn, err := dbus.Connect(l.Address, dbus.WithAuth(dbus.AuthExternal(strconv.Itoa(os.Getuid()))))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", l.Address, err)
	}
	l.conn = conn
	if err := conn.Export(manager{l}, logindPath, logindIface); err != nil {
		return fmt.Errorf("exporting logind's manager: %w", err)
	}
	if err := conn.Export(systemd{l}, systemdPath, systemdIface); err != nil {
		return fmt.Errorf("exporting systemd's manager: %w", err)
	}
	l.props, err = prop.Export(conn, logindPath, prop.Map{logindIface: {
		"InhibitDelayMaxUSec": {Value: uint64(l.cfg.InhibitDelayMax.Microseconds()), Emit: prop.EmitFalse},
	}})
	if err != nil {
		return fmt.Errorf("exporting logind's properties: %w", err)
	}
	for _, name := range []string{logindName, systemdName} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			return fmt.Errorf("owning %s: reply %v, %w", name, reply, err)
		}
	}
	return nil
}

// PrepareForShutdown emits logind's signal: active true announces a
// shutdown, false its cancellation.
func (l *Logind) PrepareForShutdown(t testing.TB, active bool) {
	t.Helper()
	if err := l.conn.Emit(logindPath, logindIface+".PrepareForShutdown", active); err != nil {
		t.Fatalf("emitting PrepareForShutdown(%v): %v", active, err)
	}
}

// StopBus kills dbus-daemon, as a machine's shutdown stops the system
// bus, which closes every connection to it.
func (l *Logind) StopBus(t testing.TB) {
	t.Helper()
	if err := l.daemon.Process.Kill(); err != nil {
		t.Fatalf("killing dbus-daemon: %v", err)
	}
}

// Locks returns the locks handed out, oldest first.
func (l *Logind) Locks() []*Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Lock(nil), l.locks...)
}

// Reloads counts the SIGHUPs systemd was asked to send logind.
func (l *Logind) Reloads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reloads
}

// InhibitDelayMax is logind's InhibitDelayMaxUSec now.
func (l *Logind) InhibitDelayMax() time.Duration {
	return time.Duration(l.props.GetMust(logindIface, "InhibitDelayMaxUSec").(uint64)) * time.Microsecond
}

// manager is logind's org.freedesktop.login1.Manager.
type manager struct{ l *Logind }

// Inhibit hands out the write end of a new pipe as the lock, as logind
// hands out a FIFO's.
func (m manager) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	if mode != "block" && mode != "delay" {
		return -1, dbus.MakeFailedError(fmt.Errorf("invalid mode %q", mode))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, dbus.MakeFailedError(err)
	}
	lock := &Lock{What: what, Who: who, Why: why, Mode: mode, taken: make(chan struct{}), released: make(chan struct{})}
	m.l.mu.Lock()
	m.l.locks = append(m.l.locks, lock)
	m.l.mu.Unlock()
	rfd, wfd := rawFD(r), rawFD(w)
	go m.l.watch(lock, r, w, rfd, wfd)
	return dbus.UnixFD(wfd), nil
}

// watch closes the fake's copy of the write end w once the reply carrying
// it has been sent, then waits for every other copy to be closed. godbus
// sends a reply only after the method returns, and the fake cannot tell
// when; so it waits until a descriptor other than its own two refers to
// the pipe (in dbus-daemon, or in the taker), after which closing its own
// copy can no longer release the lock.
func (l *Logind) watch(lock *Lock, r, w *os.File, rfd, wfd int) {
	defer r.Close()
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", wfd))
	if err != nil {
		w.Close()
		return
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !heldElsewhere(link, rfd, wfd) {
		select {
		case <-l.stop:
			w.Close()
			return
		case <-tick.C:
		}
	}
	w.Close()
	close(lock.taken)
	go func() {
		<-l.stop
		r.Close() // ends the read below when the test ends first
	}()
	io.Copy(io.Discard, r) // until every write end is closed
	select {
	case <-l.stop:
	default:
		close(lock.released)
	}
}

// heldElsewhere tells whether a descriptor of any process other than this
// process's rfd and wfd refers to link, a "pipe:[inode]".
func heldElsewhere(link string, rfd, wfd int) bool {
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if p.Name() == self && (fd.Name() == strconv.Itoa(rfd) || fd.Name() == strconv.Itoa(wfd)) {
				continue
			}
			if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == link {
				return true
			}
		}
	}
	return false
}

// rawFD is f's descriptor, without os.File.Fd's switch to blocking mode,
// which would keep a Close from ending a Read under way.
func rawFD(f *os.File) int {
	fd := -1
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}

// systemd is systemd's org.freedesktop.systemd1.Manager.
type systemd struct{ l *Logind }

// KillUnit with SIGHUP to systemd-logind.service reloads logind's
// InhibitDelayMaxSec from the drop-in; anything else is refused.
func (s systemd) KillUnit(name, whom string, signal int32) *dbus.Error {
	if name != logindService || syscall.Signal(signal) != syscall.SIGHUP {
		return dbus.MakeFailedError(fmt.Errorf("the fake systemd only reloads %s, not signal %d to %s", logindService, signal, name))
	}
	s.l.mu.Lock()
	s.l.reloads++
	s.l.mu.Unlock()
	if d, err := readDropIn(s.l.cfg.DropIn); err == nil {
		s.l.props.SetMust(logindIface, "InhibitDelayMaxUSec", uint64(d.Microseconds()))
	}
	return nil
}

// readDropIn reads InhibitDelayMaxSec (whole seconds) from the [Login]
// section of a logind.conf.d file.
func readDropIn(path string) (time.Duration, error) {
	if path == "" {
		return 0, errors.New("no drop-in")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	section := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if v, ok := strings.CutPrefix(line, "InhibitDelayMaxSec="); ok && section == "[Login]" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("%s: InhibitDelayMaxSec=%q: %w", path, v, err)
			}
			return time.Duration(n) * time.Second, nil
		}
	}
	return 0, fmt.Errorf("%s: no InhibitDelayMaxSec in [Login]", path)
}
