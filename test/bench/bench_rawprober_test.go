package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The raw prober is the floor the probe CPU figure is compared with: the
// cheapest prober of the bench's pods this machine allows, doing what
// staticlet's httpGet probes do on their schedule. It runs in a process
// of its own, as staticlet's figure is its whole process's CPU: the test
// binary run again, TestRawProber its only test.

// rawProberEnv holds the raw prober's targets, ports on 127.0.0.1 joined
// by commas; the test binary run with it set is the raw prober.
const rawProberEnv = "STATICLET_RAW_PROBER_PORTS"

// rawProberSlots is how many slots a second is cut into: the probes of a
// slot run together, one wake-up for them all, as staticlet's probe grid
// (internal/health, 250ms) has them.
const rawProberSlots = 4

// rawProberCPU runs the raw prober against ports every second for
// window, and returns its process's CPU over the window and the window's
// length. It fails b if an exchange failed.
func rawProberCPU(b *testing.B, ports []int, window time.Duration) (time.Duration, time.Duration) {
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRawProber$", "-test.v")
	cmd.Env = append(os.Environ(), rawProberEnv+"="+strings.Join(ps, ","))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	out := bufio.NewScanner(stdout)
	var lines []string
	// It says "ready" once every target had its first exchange started.
	for out.Scan() && !strings.Contains(out.Text(), "ready") {
		lines = append(lines, out.Text())
	}
	cpu, elapsed, err := cpuOver(cmd.Process.Pid, window)
	if err != nil {
		b.Fatalf("raw prober: %v; output:\n%s", err, strings.Join(lines, "\n"))
	}
	stdin.Close() // its end
	for out.Scan() {
		lines = append(lines, out.Text())
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("raw prober: %v; output:\n%s", err, strings.Join(lines, "\n"))
	}
	return cpu, elapsed
}

// rawProbeRequest is the request staticlet sends for a probe of
// /healthz on port (internal/health: fixedHeaders, header names sorted).
func rawProbeRequest(port int) []byte {
	return []byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + strconv.Itoa(port) +
		"\r\nAccept: */*\r\nConnection: close\r\nUser-Agent: kube-probe/1.37\r\n\r\n")
}

// TestRawProber is the raw prober, run by rawProberCPU; it is skipped
// otherwise. On one locked thread, every second, at each slot's instant it
// opens a non-blocking connection to each of the slot's targets, sends
// the request and reads the response to its end, all through one epoll
// set, with no allocation per exchange; it stops when its standard input
// ends, and fails if an exchange did not get a 200 within a second.
func TestRawProber(t *testing.T) {
	spec := os.Getenv(rawProberEnv)
	if spec == "" {
		t.Skip("the raw prober of the ProbeCPU bench; runs only in it")
	}
	runtime.LockOSThread()
	type exchange struct {
		i     int32 // its index, its fd's tag in the epoll set
		port  int
		req   []byte
		buf   []byte
		fd    int // -1 when none is under way
		n     int // bytes of buf read
		sent  bool
		began time.Time
	}
	var xs []*exchange
	for _, f := range strings.Split(spec, ",") {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, &exchange{i: int32(len(xs)), port: p, req: rawProbeRequest(p), buf: make([]byte, 1024), fd: -1})
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	const stdinTag = -1
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, 0, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: stdinTag}); err != nil {
		t.Fatal(err)
	}
	failures, exchanges := 0, 0
	fail := func(x *exchange, format string, args ...any) {
		failures++
		if failures <= 10 {
			fmt.Printf("port %d: %s\n", x.port, fmt.Sprintf(format, args...))
		}
	}
	finish := func(x *exchange) {
		unix.Close(x.fd)
		x.fd = -1
		exchanges++
	}
	start := func(x *exchange) {
		if x.fd >= 0 {
			fail(x, "exchange of %s ago still under way", time.Since(x.began))
			finish(x)
		}
		x.began, x.n, x.sent = time.Now(), 0, false
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fail(x, "socket: %v", err)
			return
		}
		x.fd = fd
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: x.port, Addr: [4]byte{127, 0, 0, 1}})
		if err != nil && err != unix.EINPROGRESS {
			fail(x, "connect: %v", err)
			finish(x)
			return
		}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: x.i}); err != nil {
			fail(x, "epoll: %v", err)
			finish(x)
		}
	}
	// step advances x on an event: sends once connected, reads until the
	// end, then checks the status.
	step := func(x *exchange, ev uint32) {
		if x.fd < 0 {
			return // ended by an earlier event of the same wait
		}
		if !x.sent {
			if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
				return
			}
			if e, err := unix.GetsockoptInt(x.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || e != 0 {
				fail(x, "connect: %v", unix.Errno(e))
				finish(x)
				return
			}
			if _, err := unix.Write(x.fd, x.req); err != nil {
				fail(x, "write: %v", err)
				finish(x)
				return
			}
			x.sent = true
			// Now wait for input only.
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, x.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: x.i}); err != nil {
				fail(x, "epoll: %v", err)
				finish(x)
			}
			return
		}
		for {
			if x.n == len(x.buf) {
				x.n = 0 // only the status line is checked, and it is read
			}
			n, err := unix.Read(x.fd, x.buf[x.n:])
			switch {
			case err == unix.EAGAIN:
				return
			case err != nil:
				fail(x, "read: %v", err)
				finish(x)
				return
			case n == 0:
				if !bytes.HasPrefix(x.buf, []byte("HTTP/1.0 200")) && !bytes.HasPrefix(x.buf, []byte("HTTP/1.1 200")) {
					fail(x, "response %q", x.buf[:min(x.n, 40)])
				}
				finish(x)
				return
			}
			x.n += n
		}
	}
	events := make([]unix.EpollEvent, 64)
	slot := time.Second / rawProberSlots
	origin := time.Now().Truncate(slot).Add(slot)
	next, round, ready := origin, 0, false
	for {
		wait := max(time.Until(next), 0)
		// Rounded up: an early wake-up would be one more.
		n, err := unix.EpollWait(ep, events, int((wait+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events[:n] {
			if e.Fd == stdinTag {
				var b [64]byte
				if k, _ := unix.Read(0, b[:]); k > 0 {
					continue
				}
				fmt.Printf("%d exchanges, %d failed\n", exchanges, failures)
				if failures > 0 {
					t.Fail()
				}
				return
			}
			step(xs[e.Fd], e.Events)
		}
		if time.Now().Before(next) {
			continue
		}
		for i := round % rawProberSlots; i < len(xs); i += rawProberSlots {
			start(xs[i])
		}
		round++
		if round == rawProberSlots+1 && !ready {
			ready = true
			fmt.Println("ready")
		}
		next = origin.Add(time.Duration(round) * slot)
	}
}
