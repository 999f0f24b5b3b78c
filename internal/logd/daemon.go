package logd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/logs"
)

// The files of a daemon's directory.
const (
	socketName    = "sock"       // where forwarders connect
	lockName      = "lock"       // held by the running daemon, holds its PID
	agentLockName = "agent.lock" // held (shared) by each running staticlet
	logName       = "daemon.log" // the daemon's own output
)

// SocketPath is the socket of the daemon of dir.
func SocketPath(dir string) string { return filepath.Join(dir, socketName) }

// Config tunes a daemon; the zero value is what RunDaemon uses.
type Config struct {
	// Idle is how long the daemon runs with nothing to log and no
	// staticlet running before it exits; default 30 s.
	Idle time.Duration
	// Drain bounds how long a container's streams are read after its
	// forwarder went away; default 2 s (the forwarder itself waited).
	Drain time.Duration
	// Logger receives what goes wrong with one container's log.
	Logger *slog.Logger
}

// readBuffer is what each stream is read through: a record is at most
// logs.MaxLineSize, and many streams are read at once.
const readBuffer = 8 * 1024

// RunDaemon is the log daemon program, `log-daemon DIR`. It returns the
// exit code: 0 also when another daemon holds DIR already.
func RunDaemon(dir string) int {
	// The binary's package initialisation left garbage the daemon never
	// needs again; a long-lived process that mostly waits gives it back,
	// and keeps its heap small (streams allocate little, records briefly).
	debug.SetGCPercent(25)
	debug.FreeOSMemory()
	dropImagePages()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Serve(ctx, dir, Config{Logger: logger}); err != nil {
		logger.Error("log daemon", "err", err)
		return 1
	}
	return 0
}

// Serve runs the daemon of dir until ctx ends or it has been idle for
// cfg.Idle. It returns nil at once when another daemon holds dir.
func Serve(ctx context.Context, dir string, cfg Config) error {
	if cfg.Idle == 0 {
		cfg.Idle = 30 * time.Second
	}
	if cfg.Drain == 0 {
		cfg.Drain = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	lock, ok, err := tryLock(filepath.Join(dir, lockName), unix.LOCK_EX)
	if err != nil || !ok {
		return err
	}
	defer lock.Close()
	if err := lock.Truncate(0); err == nil {
		_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	sock := SocketPath(dir)
	_ = os.Remove(sock) // a dead daemon's; this one holds the lock
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	d := &daemon{cfg: cfg, dir: dir, streams: map[*stream]bool{}, last: time.Now()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.idleWatch(ctx, cancel)
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			break
		}
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.handle(c) }()
	}
	// Going away: stop reading, write what was read, and let the
	// forwarders hand their pipes to the next daemon.
	_ = os.Remove(sock)
	d.stopAll()
	d.wg.Wait()
	return nil
}

// daemon is one running log daemon.
type daemon struct {
	cfg Config
	dir string
	wg  sync.WaitGroup

	// mu guards the fields below.
	mu      sync.Mutex
	streams map[*stream]bool
	last    time.Time // when the last stream ended
	stopped bool
}

// stream is one container's output, handed over by its forwarder.
type stream struct {
	conn     *net.UnixConn
	out, err *os.File
	once     sync.Once
}

// stop ends the reads of s: they return, and what they read is written.
func (s *stream) stop() {
	s.once.Do(func() {
		s.out.Close()
		s.err.Close()
	})
}

// idleWatch cancels the daemon once it has had no stream for cfg.Idle and
// no staticlet holds the agent lock.
func (d *daemon) idleWatch(ctx context.Context, cancel func()) {
	tick := time.NewTicker(min(d.cfg.Idle/4, 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.mu.Lock()
		idle := len(d.streams) == 0 && time.Since(d.last) >= d.cfg.Idle
		d.mu.Unlock()
		if !idle {
			continue
		}
		// A directory removed since is no staticlet's any more.
		f, free, err := tryLock(filepath.Join(d.dir, agentLockName), unix.LOCK_EX)
		if err == nil && free || errors.Is(err, os.ErrNotExist) {
			if f != nil {
				f.Close()
			}
			cancel()
			return
		}
	}
}

func (d *daemon) stopAll() {
	d.mu.Lock()
	d.stopped = true
	ss := make([]*stream, 0, len(d.streams))
	for s := range d.streams {
		ss = append(ss, s)
	}
	d.mu.Unlock()
	for _, s := range ss {
		s.stop()
	}
}

// handle takes one forwarder's message and writes its container's log
// until both streams end; then it tells the forwarder so.
func (d *daemon) handle(c *net.UnixConn) {
	defer c.Close()
	cfg, fds, err := receive(c)
	if err != nil {
		d.cfg.Logger.Warn("a log forwarder's message", "err", err)
		return
	}
	s := &stream{conn: c, out: os.NewFile(uintptr(fds[0]), "stdout"), err: os.NewFile(uintptr(fds[1]), "stderr")}
	defer s.stop()
	if !d.add(s) {
		return
	}
	defer d.remove(s)
	w, openErr := logs.NewWriter(logs.WriterConfig{Path: cfg.Path, MaxSize: cfg.MaxSize, MaxFiles: cfg.MaxFiles})
	if w == nil {
		d.cfg.Logger.Warn("a container's log", "path", cfg.Path, "err", openErr)
		return
	}
	if openErr != nil {
		d.cfg.Logger.Warn("a container's log; dropping output until it can be opened", "path", cfg.Path, "err", openErr)
	}
	// Each stream is copied by a goroutine of its own; stdout's is this
	// one, which then waits for stderr's, or for the forwarder to go.
	errDone := make(chan struct{})
	copyStream := func(name string, f *os.File) {
		if err := w.CopyBuffer(name, f, make([]byte, readBuffer)); err != nil && !errors.Is(err, os.ErrClosed) {
			d.cfg.Logger.Warn("reading a container's output", "path", cfg.Path, "err", err)
		}
	}
	go func() { copyStream(logs.Stderr, s.err); close(errDone) }()
	gone := make(chan struct{})
	go func() {
		// The forwarder sends nothing more: a read ends when it went,
		// having stopped waiting (the task is gone, or a process of the
		// container keeps the pipes open). What is left is read for
		// Drain more.
		var b [1]byte
		_, _ = c.Read(b[:])
		close(gone)
		select {
		case <-errDone:
		case <-time.After(d.cfg.Drain):
		}
		s.stop()
	}()
	copyStream(logs.Stdout, s.out)
	<-errDone
	finished := true
	select {
	case <-gone:
		finished = false
	default:
	}
	if err := w.Close(); err != nil {
		d.cfg.Logger.Warn("closing a container's log", "path", cfg.Path, "err", err)
	}
	if n := w.Dropped(); n > 0 {
		d.cfg.Logger.Warn("output that could not be written", "path", cfg.Path, "bytes", n)
	}
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if finished && !stopped {
		_, _ = c.Write([]byte{'d'})
	}
}

// add registers s, unless the daemon is going away.
func (d *daemon) add(s *stream) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return false
	}
	d.streams[s] = true
	return true
}

func (d *daemon) remove(s *stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.streams, s)
	d.last = time.Now()
}

// maxMessage bounds a forwarder's message: its arguments.
const maxMessage = 8192

// receive reads a forwarder's message: its arguments, NUL-terminated
// (the program, then the driver's key-value pairs), and the two
// descriptors, stdout's and stderr's, set non-blocking so that closing
// them ends their reads.
func receive(c *net.UnixConn) (logs.DriverConfig, [2]int, error) {
	var fds [2]int
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return logs.DriverConfig{}, fds, err
	}
	var got []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				got = append(got, rights...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range got {
			unix.Close(fd)
		}
	}
	if len(got) != 2 {
		closeAll()
		return logs.DriverConfig{}, fds, fmt.Errorf("%d descriptors, want stdout's and stderr's", len(got))
	}
	args := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
	if len(args) < 1 {
		closeAll()
		return logs.DriverConfig{}, fds, errors.New("no arguments")
	}
	cfg, err := logs.ParseDriverArgs(args[1:])
	if err != nil {
		closeAll()
		return cfg, fds, err
	}
	for i, fd := range got {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			closeAll()
			return cfg, fds, err
		}
		fds[i] = fd
	}
	return cfg, fds, nil
}

// tryLock opens path and takes flock how (LOCK_EX or LOCK_SH) on it
// without waiting: ok is false when another holds it.
func tryLock(path string, how int) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, true, nil
}

// dropImagePages unmaps from this process the pages of its own program's
// read-only segments (code, constants), which staticlet's initialisation
// touched and the kernel mapped in 64 KiB around each touch, and asks the
// kernel not to read around from then on: the daemon's steady state then
// maps only the pages it uses. The pages stay in the page cache, shared
// with staticlet; nothing of the daemon's data is touched (writable
// mappings are left alone).
func dropImagePages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != exe || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		// Raw calls: the range is not memory this program's Go code owns.
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
			_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), advice)
		}
	}
}
