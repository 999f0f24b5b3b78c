package bench

import (
	binenc "encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// procWatch tells the benchmarks when processes start and end, from the
// kernel's process events (the netlink process connector): each exec and
// exit comes with the moment it happened, and nothing is polled. Polling
// /proc every millisecond, as the benchmarks did, took a whole core of
// the two while many pods started (each poll read the command line of
// every new process not yet matched: shims, runc, log forwarders) and
// slowed down what it measured. Where the connector is not there, or
// the kernel dropped events, /proc is scanned instead.
//
// A watch is opened before what it watches for is set off, so that no
// event falls in between, and closed by the wait that uses it.
type procWatch struct {
	fd  int // -1: no connector; scan /proc
	old map[int]bool
	buf []byte
}

// Process connector constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventExec     = 0x00000002
	procEventExit     = 0x80000000
	nlmsgHdrLen       = 16
	cnMsgLen          = 20
)

// watchProcs opens a watch of process execs and exits.
func watchProcs(tb testing.TB) *procWatch {
	tb.Helper()
	w := &procWatch{fd: -1, old: listPIDs(), buf: make([]byte, 1<<16)}
	fd, err := openProcConnector()
	if err != nil {
		tb.Logf("process events unavailable (%v): polling /proc", err)
		return w
	}
	w.fd = fd
	return w
}

// openProcConnector subscribes a netlink socket to every process event.
func openProcConnector() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return -1, err
	}
	// Room for every event of many pods starting at once: runc, shims,
	// forwarders and the containers' processes each exec and exit.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	// A wait wakes at least this often, to check its deadline.
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	ne := binenc.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.NLMSG_DONE)
	ne.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[nlmsgHdrLen:]
	ne.PutUint32(cn[0:], cnIdxProc)
	ne.PutUint32(cn[4:], cnValProc)
	ne.PutUint16(cn[16:], 4)
	ne.PutUint32(cn[cnMsgLen:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// procEvent is an exec or an exit of a process (not of a thread).
type procEvent struct {
	exit bool
	pid  int
	at   time.Time
}

// next returns the events the kernel has sent since the last call,
// waiting up to 200 ms for one. lost tells that the kernel dropped
// some (its buffer was full): the caller must look at /proc itself.
func (w *procWatch) next() (events []procEvent, lost bool, err error) {
	n, _, err := unix.Recvfrom(w.fd, w.buf, 0)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return nil, false, nil
	case errors.Is(err, unix.ENOBUFS):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return nil, false, err
	}
	now := time.Now()
	ne := binenc.NativeEndian
	for b := w.buf[:n]; len(b) >= nlmsgHdrLen; {
		l := int(ne.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			break
		}
		// cn_msg, then proc_event: what, cpu, timestamp_ns, then for exec
		// and exit the process's pid and tgid.
		if ev := b[nlmsgHdrLen:l]; len(ev) >= cnMsgLen+24 {
			ev = ev[cnMsgLen:]
			what, ts := ne.Uint32(ev), int64(ne.Uint64(ev[8:]))
			pid, tgid := int(int32(ne.Uint32(ev[16:]))), int(int32(ne.Uint32(ev[20:])))
			if (what == procEventExec || what == procEventExit) && pid == tgid {
				at := now.Add(-time.Duration(mono.Nano() - ts)) // ts is CLOCK_MONOTONIC
				events = append(events, procEvent{exit: what == procEventExit, pid: pid, at: at})
			}
		}
		b = b[(l+3)&^3:]
	}
	return events, false, nil
}

// close ends the watch.
func (w *procWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// waitMarker is waitMarkers for one marker.
func (w *procWatch) waitMarker(tb testing.TB, marker string) (int, time.Time) {
	tb.Helper()
	pids, at := w.waitMarkers(tb, []string{marker})
	return pids[0], at
}

// waitMarkers waits until, for each marker, a process that started after
// the watch was opened has it among its arguments; it returns them, and
// when the last of them was exec'd. It closes the watch.
func (w *procWatch) waitMarkers(tb testing.TB, markers []string) ([]int, time.Time) {
	tb.Helper()
	defer w.close()
	limit := waitFor(len(markers))
	deadline := time.Now().Add(limit)
	found := map[string]int{}
	var last time.Time
	match := func(pid int, at time.Time) {
		args := harness.Cmdline(pid)
		for _, m := range markers {
			if _, ok := found[m]; !ok && slices.Contains(args, m) {
				found[m] = pid
				if at.After(last) {
					last = at
				}
			}
		}
	}
	for len(found) < len(markers) {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d processes with their marker running after %s", len(found), len(markers), limit)
		}
		if w.fd < 0 {
			w.scan(match)
			time.Sleep(time.Millisecond)
			continue
		}
		events, lost, err := w.next()
		if err != nil {
			tb.Fatalf("reading process events: %v", err)
		}
		for _, e := range events {
			if !e.exit {
				match(e.pid, e.at)
			}
		}
		if lost {
			w.scan(match)
		}
	}
	pids := make([]int, 0, len(found))
	for _, m := range markers {
		pids = append(pids, found[m])
	}
	return pids, last
}

// scan matches every process in /proc that was not there when the watch
// was opened, with now as its start: the way without events.
func (w *procWatch) scan(match func(pid int, at time.Time)) {
	now := time.Now()
	for pid := range listPIDs() {
		if !w.old[pid] {
			match(pid, now)
		}
	}
}

// waitGone waits until every process of pids has exited, and returns
// when the last did. It closes the watch.
func (w *procWatch) waitGone(tb testing.TB, pids []int) time.Time {
	tb.Helper()
	defer w.close()
	limit := waitFor(len(pids))
	deadline := time.Now().Add(limit)
	left := map[int]bool{}
	for _, pid := range pids {
		left[pid] = true
	}
	var last time.Time
	check := func() {
		for pid := range left {
			if !harness.ProcessRunning(pid) {
				delete(left, pid)
				last = time.Now()
			}
		}
	}
	if w.fd < 0 {
		for _, pid := range pids {
			last = waitGone(tb, pid)
		}
		return last
	}
	check() // those gone before the watch began
	for len(left) > 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d processes still run after %s", len(left), len(pids), limit)
		}
		events, lost, err := w.next()
		if err != nil {
			tb.Fatalf("reading process events: %v", err)
		}
		for _, e := range events {
			if e.exit && left[e.pid] {
				delete(left, e.pid)
				if e.at.After(last) {
					last = e.at
				}
			}
		}
		if lost || len(events) == 0 {
			check()
		}
	}
	return last
}
