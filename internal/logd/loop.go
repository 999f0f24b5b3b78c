package logd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/logs"
)

// loop is the daemon's one goroutine and everything it owns: the
// listening socket, each forwarder's connection, each container's pipes
// and log, all waited on through one epoll set and read through one
// buffer. A container then costs the daemon its descriptors and its log's
// state, not goroutines and buffers of its own.
//
// Every descriptor is non-blocking and every handler tolerates being
// called with nothing to read: a descriptor closed while handling one
// batch of events can be reused by one accepted later in the same batch,
// and receive the closed one's stale event.
//
// Writing a log is a write(2) to a file in this goroutine: while one
// write waits on the disk no pipe is read, and the containers' output
// waits in their pipes (64 KiB each) meanwhile.
type loop struct {
	cfg  Config
	dir  string
	ep   int // the epoll set
	ln   int // the listening socket
	wake int // an eventfd: written when the daemon is to stop

	conns map[*conn]bool // every forwarder connected
	byFD  map[int]*conn  // each of a conn's descriptors in the epoll set
	last  time.Time      // when the last container's log ended
	buf   []byte         // what every read goes through
	oob   []byte         // a message's descriptors
}

// conn is one forwarder's connection: first waiting for its message, then
// its container's two streams until both ended.
type conn struct {
	fd       int          // the connection
	pipes    [2]int       // stdout's and stderr's read ends; -1 before the message and once ended
	w        *logs.Writer // nil until the message came
	path     string       // the log file
	deadline time.Time    // before the message: when to give up on it; once gone: when to stop reading
	gone     bool         // the forwarder went away: the pipes are read until Drain passes
}

// streams are the streams of a conn's pipes, in their order.
var streams = [2]string{logs.Stdout, logs.Stderr}

// messageWait bounds how long a forwarder that connected takes to send
// its message.
const messageWait = 10 * time.Second

// readBuffer is what each read takes at most: a pipe holds 64 KiB.
const readBuffer = 64 * 1024

// newLoop makes the epoll set and the wake eventfd, and adds ln to it.
func newLoop(cfg Config, dir string, ln int) (*loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("log daemon: epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("log daemon: eventfd: %w", err)
	}
	l := &loop{
		cfg: cfg, dir: dir, ep: ep, ln: ln, wake: wake,
		conns: map[*conn]bool{}, byFD: map[int]*conn{}, last: time.Now(),
		buf: make([]byte, readBuffer), oob: make([]byte, unix.CmsgSpace(4*4)),
	}
	for _, fd := range []int{ln, wake} {
		if err := l.watch(fd, unix.EPOLLIN); err != nil {
			l.close()
			return nil, fmt.Errorf("log daemon: epoll: %w", err)
		}
	}
	return l, nil
}

// stop makes run return; safe from any goroutine.
func (l *loop) stop() {
	var one = [8]byte{1}
	_, _ = unix.Write(l.wake, one[:])
}

// close releases the epoll set and the eventfd, once run returned.
func (l *loop) close() {
	unix.Close(l.wake)
	unix.Close(l.ep)
}

// run serves forwarders until stop is called or the daemon has been idle
// for cfg.Idle. It fails only when it cannot wait for events.
func (l *loop) run() error {
	events := make([]unix.EpollEvent, 64)
	idleCheck := time.Now().Add(l.idleInterval())
	for {
		now := time.Now()
		l.expire(now)
		if !now.Before(idleCheck) {
			if l.idle(now) {
				return nil
			}
			idleCheck = now.Add(l.idleInterval())
		}
		n, err := unix.EpollWait(l.ep, events, waitMillis(now, l.nextDeadline(idleCheck)))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("log daemon: waiting for events: %w", err)
		}
		stopping := false
		for _, ev := range events[:max(n, 0)] {
			fd := int(ev.Fd)
			switch {
			case fd == l.wake:
				stopping = true
			case fd == l.ln:
				l.accept()
			default:
				if c := l.byFD[fd]; c != nil {
					l.handle(c, fd)
				}
			}
		}
		if stopping {
			return nil
		}
	}
}

// finishAll ends every connection without a word, once run returned.
func (l *loop) finishAll() {
	for c := range l.conns {
		l.finish(c, false)
	}
}

// idleInterval is how often the loop checks whether it is idle.
func (l *loop) idleInterval() time.Duration { return min(l.cfg.Idle/4, 5*time.Second) }

// idle tells whether the daemon is to exit: no container has logged
// through it for cfg.Idle (since it started, or since the last one's
// log ended). A running staticlet does not keep it: staticlet starts it
// again for the next container (Ensure, Keep).
func (l *loop) idle(now time.Time) bool {
	return len(l.conns) == 0 && now.Sub(l.last) >= l.cfg.Idle
}

// nextDeadline is the earliest of idleCheck and the conns' deadlines.
func (l *loop) nextDeadline(idleCheck time.Time) time.Time {
	next := idleCheck
	for c := range l.conns {
		if !c.deadline.IsZero() && c.deadline.Before(next) {
			next = c.deadline
		}
	}
	return next
}

// waitMillis is epoll_wait's timeout for waking at t: rounded up, so
// that the loop does not wake just before it.
func waitMillis(now, t time.Time) int {
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// expire gives up on forwarders whose message is late, and stops reading
// the containers whose forwarder went away Drain ago.
func (l *loop) expire(now time.Time) {
	for c := range l.conns {
		if c.deadline.IsZero() || now.Before(c.deadline) {
			continue
		}
		if c.w == nil {
			l.cfg.Logger.Warn("a log forwarder sent no message", "within", messageWait)
		}
		l.finish(c, false)
	}
}

// accept takes the connections waiting on the socket.
func (l *loop) accept() {
	for range 64 { // then the other events get their turn
		fd, _, err := unix.Accept4(l.ln, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ECONNABORTED) {
				l.cfg.Logger.Warn("accepting a log forwarder", "err", err)
			}
			return
		}
		c := &conn{fd: fd, pipes: [2]int{-1, -1}, deadline: time.Now().Add(messageWait)}
		if err := l.watch(fd, unix.EPOLLIN|unix.EPOLLRDHUP); err != nil {
			l.cfg.Logger.Warn("watching a log forwarder", "err", err)
			unix.Close(fd)
			continue
		}
		l.conns[c] = true
		l.byFD[fd] = c
	}
}

// handle is an event on fd, one of c's descriptors.
func (l *loop) handle(c *conn, fd int) {
	switch {
	case fd == c.fd && c.w == nil:
		l.receive(c)
	case fd == c.fd:
		// The forwarder sends nothing more: its connection is readable
		// once it went, having stopped waiting (the task is gone, or a
		// process of the container keeps the pipes open). What is left
		// in the pipes is read for Drain more.
		var b [1]byte
		if _, err := unix.Read(c.fd, b[:]); errors.Is(err, unix.EAGAIN) {
			return
		}
		l.unwatch(c.fd)
		c.gone = true
		c.deadline = time.Now().Add(l.cfg.Drain)
	case fd == c.pipes[0]:
		l.read(c, 0)
	case fd == c.pipes[1]:
		l.read(c, 1)
	}
}

// receive reads c's message and starts writing its container's log.
func (l *loop) receive(c *conn) {
	n, oobn, _, _, err := unix.Recvmsg(c.fd, l.buf[:maxMessage], l.oob, unix.MSG_CMSG_CLOEXEC)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if err == nil && n == 0 {
		err = errors.New("connection closed before the message")
	}
	var cfg logs.DriverConfig
	var fds [2]int
	if err == nil {
		cfg, fds, err = parseMessage(l.buf[:n], l.oob[:oobn])
	}
	if err != nil {
		l.cfg.Logger.Warn("a log forwarder's message", "err", err)
		l.finish(c, false)
		return
	}
	c.deadline = time.Time{}
	c.path = cfg.Path
	w, openErr := logs.NewWriter(logs.WriterConfig{
		Path: cfg.Path, MaxSize: cfg.MaxSize, MaxFiles: cfg.MaxFiles,
		Dropped: func(g logs.Gap) { l.gap(cfg.Path, g) },
	})
	if w == nil {
		l.cfg.Logger.Warn("a container's log", "path", cfg.Path, "err", openErr)
		closeAll(fds[:])
		l.finish(c, false)
		return
	}
	if openErr != nil {
		l.cfg.Logger.Warn("a container's log; dropping output until it can be opened", "path", cfg.Path, "err", openErr)
	}
	c.w = w
	for i, fd := range fds {
		if err := l.watch(fd, unix.EPOLLIN); err != nil {
			l.cfg.Logger.Warn("watching a container's output", "path", cfg.Path, "err", err)
			unix.Close(fd)
			continue
		}
		c.pipes[i] = fd
		l.byFD[fd] = c
	}
	if c.pipes == [2]int{-1, -1} {
		l.finish(c, false)
	}
}

// gap tells, once when it starts and once when it ends, that a
// container's output is dropped rather than written, as on a full disk:
// the container is never blocked for its log, so what it writes meanwhile
// is lost, and this says how much.
func (l *loop) gap(path string, g logs.Gap) {
	if g.Until.IsZero() {
		l.cfg.Logger.Warn("dropping a container's output until its log can be written", "path", path, "err", g.Err)
		return
	}
	l.cfg.Logger.Warn("writing a container's log again; output was dropped meanwhile",
		"path", path, "lines", g.Lines, "bytes", g.Bytes, "for", g.Until.Sub(g.Since).Round(time.Millisecond), "err", g.Err)
}

// read reads c's stream i once, and ends it at EOF or on an error. One
// read per event: a stream with more waiting is reported again, after the
// other streams' turn.
func (l *loop) read(c *conn, i int) {
	n, err := unix.Read(c.pipes[i], l.buf)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
	case err == nil && n > 0:
		_ = c.w.Feed(streams[i], l.buf[:n])
	default:
		if err != nil {
			l.cfg.Logger.Warn("reading a container's output", "path", c.path, "stream", streams[i], "err", err)
		}
		l.endStream(c, i)
		if c.pipes == [2]int{-1, -1} {
			l.finish(c, !c.gone)
		}
	}
}

// endStream writes c's stream i's unterminated last line, then stops
// reading it. In that order: once the pipe is closed, the writer sees
// EPIPE and may look for that line in the log.
func (l *loop) endStream(c *conn, i int) {
	if c.pipes[i] < 0 {
		return
	}
	_ = c.w.EndStream(streams[i])
	l.unwatch(c.pipes[i])
	delete(l.byFD, c.pipes[i])
	unix.Close(c.pipes[i])
	c.pipes[i] = -1
}

// finish ends c: its streams, its log, and its connection. With told, the
// forwarder hears that its container's log is complete.
func (l *loop) finish(c *conn, told bool) {
	if c.w != nil {
		l.endStream(c, 0)
		l.endStream(c, 1)
		if err := c.w.Close(); err != nil {
			l.cfg.Logger.Warn("closing a container's log", "path", c.path, "err", err)
		}
		if n := c.w.Dropped(); n > 0 {
			l.cfg.Logger.Warn("output that could not be written", "path", c.path, "bytes", n)
		}
	}
	if told {
		var done = [1]byte{'d'}
		_, _ = unix.Write(c.fd, done[:])
	}
	l.unwatch(c.fd)
	delete(l.byFD, c.fd)
	unix.Close(c.fd)
	delete(l.conns, c)
	l.last = time.Now()
}

func (l *loop) watch(fd int, events uint32) error {
	return unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)})
}

func (l *loop) unwatch(fd int) {
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, fd, nil)
}

// maxMessage bounds a forwarder's message: its arguments.
const maxMessage = 8192

// parseMessage reads a forwarder's message: its arguments, NUL-terminated
// (the program, then the driver's key-value pairs), and oob holding the
// two descriptors, stdout's and stderr's, which it sets non-blocking. On
// an error it closes every descriptor the message carried.
func parseMessage(msg, oob []byte) (logs.DriverConfig, [2]int, error) {
	var fds [2]int
	var got []int
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				got = append(got, rights...)
			}
		}
	}
	if len(got) != 2 {
		closeAll(got)
		return logs.DriverConfig{}, fds, fmt.Errorf("%d descriptors, want stdout's and stderr's", len(got))
	}
	args := strings.Split(strings.TrimSuffix(string(msg), "\x00"), "\x00")
	cfg, err := logs.ParseDriverArgs(args[1:])
	if err != nil {
		closeAll(got)
		return cfg, fds, err
	}
	for i, fd := range got {
		if err := unix.SetNonblock(fd, true); err != nil {
			closeAll(got)
			return cfg, fds, err
		}
		fds[i] = fd
	}
	return cfg, fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
