package logd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The files of a daemon's directory.
const (
	socketName = "sock"       // where forwarders connect
	lockName   = "lock"       // held by the running daemon, holds its PID
	logName    = "daemon.log" // the daemon's own output
)

// SocketPath is the socket of the daemon of dir.
func SocketPath(dir string) string { return filepath.Join(dir, socketName) }

// Config tunes a daemon; the zero value is what RunDaemon uses.
type Config struct {
	// Idle is how long the daemon runs with nothing to log before it
	// exits, whether or not a staticlet runs; default 30 s.
	Idle time.Duration
	// Drain bounds how long a container's streams are read after its
	// forwarder went away; default 2 s (the forwarder itself waited).
	Drain time.Duration
	// Logger receives what goes wrong with one container's log.
	Logger Logger
}

// IdleEnv, a testing hook, sets the daemon's Config.Idle (a duration) in
// RunDaemon; staticlet's environment reaches the daemons it starts.
const IdleEnv = "STATICLET_TEST_LOG_DAEMON_IDLE"

// RunDaemon is the log daemon program, `log-daemon DIR`. It returns the
// exit code: 0 also when another daemon holds DIR already.
func RunDaemon(dir string) int {
	// The binary's package initialisation left garbage the daemon never
	// needs again; a long-lived process that mostly waits gives it back,
	// and keeps its heap small (streams allocate little, records briefly).
	debug.SetGCPercent(25)
	// One goroutine does the work (Serve's loop): one P is enough, and
	// saves the garbage collector's state for a second (~150 KiB).
	runtime.GOMAXPROCS(1)
	debug.FreeOSMemory()
	dropImagePages()
	logger := textLogger{w: os.Stderr, now: time.Now}
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg := Config{Logger: logger}
	if v := os.Getenv(IdleEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			logger.Error("log daemon", "err", fmt.Errorf("%s=%q: want a positive duration", IdleEnv, v))
			return 2
		}
		cfg.Idle = d
	}
	if err := Serve(ctx, dir, cfg); err != nil {
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
		cfg.Logger = discard{}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	lock, ok, err := tryLock(filepath.Join(dir, lockName), unix.LOCK_EX)
	if err != nil || !ok {
		return err
	}
	defer lock.Close()
	// Written over the old PID, then cut to length: on a full disk the
	// page the file has is rewritten in place, where emptying it first
	// would give that page up and need another.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := lock.WriteAt(pid, 0); err == nil {
		_ = lock.Truncate(int64(len(pid)))
	}
	sock := SocketPath(dir)
	_ = os.Remove(sock) // a dead daemon's; this one holds the lock
	ln, err := listen(sock)
	if err != nil {
		return fmt.Errorf("log daemon: %w", err)
	}
	l, err := newLoop(cfg, dir, ln)
	if err != nil {
		unix.Close(ln)
		return err
	}
	defer l.close()
	stopCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); <-stopCtx.Done(); l.stop() }()
	err = l.run()
	cancel()
	wg.Wait()
	// Going away: no more forwarders, then stop reading, write what was
	// read, and let the forwarders hand their pipes to the next daemon.
	unix.Close(ln)
	_ = os.Remove(sock)
	l.finishAll()
	return err
}

// listen makes the daemon's socket, non-blocking: the loop accepts.
func listen(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("binding %s: %w", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listening on %s: %w", path, err)
	}
	return fd, nil
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
// read-only segments (code, constants), which the program's initialisation
// touched, and asks the kernel not to read ahead in them from then on;
// then it evicts the constants' pages from the page cache, where no other
// process maps them. The daemon's steady state then maps few pages of the
// program. Nothing of the daemon's data is touched (writable mappings are
// left alone).
//
// The eviction is what makes the constants cheap: on a fault the kernel
// maps, besides the page faulted on, every page of the 64 KiB around it
// that is in the page cache (fault-around, which MADV_RANDOM does not turn
// off), so with the whole file cached the type data and function tables
// the runtime reads here and there mapped nearly all of them (1.2 MiB).
// Evicted, each page is read back alone when first touched. The code is
// not evicted: a fault in an executable mapping reads around it however it
// is advised (the whole program, here), so its pages are better left
// cached and mapped 64 KiB around what runs.
func dropImagePages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	f, err := os.Open(exe)
	if err != nil {
		return
	}
	defer f.Close()
	segs := imageSegments(string(b), exe)
	// A program just written (installed, built) has dirty pages, which
	// are not evicted until written out.
	_ = unix.Fdatasync(int(f.Fd()))
	// Twice: pages the runtime faults in between the unmapping and the
	// eviction are mapped, so not evicted, the first time.
	for range 2 {
		for _, s := range segs {
			// Raw calls: the ranges are not memory this program's Go code owns.
			for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
				_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(s.start), uintptr(s.end-s.start), advice)
			}
			if !s.exec {
				_ = unix.Fadvise(int(f.Fd()), int64(s.offset), int64(s.end-s.start), unix.FADV_DONTNEED)
			}
		}
	}
}

// imageSegment is a read-only mapping of the program's file.
type imageSegment struct {
	start, end uint64 // its addresses
	offset     uint64 // where it starts in the file
	exec       bool   // code
}

// imageSegments are the read-only mappings of file exe in maps, the text
// of /proc/<pid>/maps.
func imageSegments(maps, exe string) []imageSegment {
	var out []imageSegment
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != exe || len(f[1]) < 3 || f[1][1] == 'w' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		offset, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil || end <= start {
			continue
		}
		out = append(out, imageSegment{start: start, end: end, offset: offset, exec: f[1][2] == 'x'})
	}
	return out
}
