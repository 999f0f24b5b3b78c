// Package nodeshutdown makes the machine's shutdown wait for the pods to
// stop, through systemd-logind, as the kubelet's graceful node shutdown
// does (pkg/kubelet/nodeshutdown). It holds a delay inhibitor lock; when
// logind announces a shutdown (PrepareForShutdown true) it has its Node
// stop the pods, regular ones within the grace period less the critical
// pods' share, critical ones last within theirs, then releases the lock so
// that the shutdown goes on. If the shutdown is cancelled (false), it lets
// the pods run again and takes a new lock.
//
// If logind's InhibitDelayMaxSec is shorter than the grace period, logind
// would not wait that long: a drop-in raising it is written and logind
// reloaded, as the kubelet does.
//
// It owns its system bus connection, the lock and the drop-in; it imports
// no other staticlet package. Without a system bus or logind it logs a
// warning and does nothing, so staticlet runs on machines without systemd.
package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// DefaultDropIn is the logind.conf.d file that raises InhibitDelayMaxSec.
const DefaultDropIn = "/etc/systemd/logind.conf.d/99-staticlet-shutdown.conf"

// The D-Bus names of logind and systemd.
const (
	logindName    = "org.freedesktop.login1"
	logindPath    = "/org/freedesktop/login1"
	logindIface   = "org.freedesktop.login1.Manager"
	systemdName   = "org.freedesktop.systemd1"
	systemdPath   = "/org/freedesktop/systemd1"
	systemdIface  = "org.freedesktop.systemd1.Manager"
	logindService = "systemd-logind.service"
)

// The lock as `systemd-inhibit --list` shows it.
const (
	lockWhat = "shutdown"
	lockWho  = "staticlet"
	lockWhy  = "staticlet stops pods gracefully before shutdown"
)

// callTimeout bounds each D-Bus call.
const callTimeout = 10 * time.Second

// reloadWait is how long logind gets to apply the drop-in after SIGHUP,
// which it handles asynchronously.
const reloadWait = 2 * time.Second

// Node is what the manager needs of the pods' owner.
type Node interface {
	// ShutdownNode stops every pod: the regular ones, each within
	// regular, then the critical ones, each within critical; and starts
	// none until ResumeNode. It returns once they are stopped or ctx ends.
	ShutdownNode(ctx context.Context, regular, critical time.Duration) error
	// ResumeNode lets the pods run again.
	ResumeNode()
}

// Config configures a Manager.
type Config struct {
	// GracePeriod is how long the shutdown waits for the pods, all
	// included; the manager does nothing when it is zero.
	GracePeriod time.Duration
	// CriticalGracePeriod is the part of GracePeriod kept for the
	// critical pods, stopped last.
	CriticalGracePeriod time.Duration
	// Node stops and resumes the pods.
	Node Node
	// DropIn is where a too short InhibitDelayMaxSec is raised;
	// DefaultDropIn when empty.
	DropIn string
	// Logger receives what the manager does; nil discards it.
	Logger *slog.Logger
}

// Manager holds logind's delay inhibitor lock and stops the pods when the
// machine shuts down. The system bus is the one godbus finds, through
// DBUS_SYSTEM_BUS_ADDRESS or at its standard address.
type Manager struct {
	cfg Config
	log *slog.Logger
}

// New returns a Manager for cfg. It starts nothing: call Run.
func New(cfg Config) *Manager {
	if cfg.DropIn == "" {
		cfg.DropIn = DefaultDropIn
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log}
}

// Run holds the lock and handles logind's announcements until ctx ends,
// then releases the lock. A shutdown under way when ctx ends is seen
// through first, for at most the grace period. It returns nil at once when
// the grace period is zero, and after a warning when there is no system
// bus or no logind; an error only for an invalid Config.
func (m *Manager) Run(ctx context.Context) error {
	grace, critical := m.cfg.GracePeriod, m.cfg.CriticalGracePeriod
	if grace <= 0 {
		return nil
	}
	if critical < 0 || critical > grace {
		return fmt.Errorf("the critical pods' shutdown grace period (%v) must be between 0 and the shutdown grace period (%v)", critical, grace)
	}
	conn, err := dbus.ConnectSystemBus(dbus.WithAuth(dbus.AuthExternal(strconv.Itoa(os.Getuid()))))
	if err != nil {
		m.log.Warn("graceful node shutdown disabled: no system bus", "err", err)
		return nil
	}
	defer conn.Close()
	signals := make(chan *dbus.Signal, 8)
	conn.Signal(signals)
	if err := m.call(ctx, func(ctx context.Context) error {
		return conn.AddMatchSignalContext(ctx, dbus.WithMatchSender(logindName), dbus.WithMatchObjectPath(logindPath),
			dbus.WithMatchInterface(logindIface), dbus.WithMatchMember("PrepareForShutdown"))
	}); err != nil {
		m.log.Warn("graceful node shutdown disabled: subscribing to logind's signals", "err", err)
		return nil
	}
	if err := m.ensureInhibitDelay(ctx, conn); err != nil {
		m.log.Warn("graceful node shutdown disabled: no logind on the system bus", "err", err)
		return nil
	}
	lock, err := m.inhibit(ctx, conn)
	if err != nil {
		m.log.Warn("graceful node shutdown disabled: taking logind's inhibitor lock", "err", err)
		return nil
	}
	defer func() {
		if lock != nil {
			lock.Close()
		}
	}()
	m.log.Info("holding logind's delay inhibitor lock for graceful node shutdown", "grace", grace, "critical grace", critical)
	down := false // the pods have been stopped for a shutdown not cancelled since
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig, ok := <-signals:
			if !ok {
				if down {
					// Expected: the shutdown the lock held back stops
					// the bus too.
					m.log.Info("the system bus closed during the node shutdown")
				} else {
					m.log.Warn("graceful node shutdown stopped: the system bus connection closed")
				}
				return nil
			}
			active, ok := prepareForShutdown(sig)
			switch {
			case !ok:
			case active && !down:
				// Even without a lock (taking it again failed), the pods
				// get what time the shutdown leaves them.
				down = true
				m.shutdown(ctx)
				if lock != nil {
					if err := lock.Close(); err != nil {
						m.log.Warn("releasing logind's inhibitor lock", "err", err)
					}
					lock = nil
					m.log.Info("released logind's inhibitor lock: the shutdown goes on")
				}
			case !active && down:
				down = false
				m.log.Info("node shutdown cancelled: pods may run again")
				m.cfg.Node.ResumeNode()
				if lock, err = m.inhibit(ctx, conn); err != nil {
					m.log.Warn("taking logind's inhibitor lock again after a cancelled shutdown", "err", err)
				}
			}
		}
	}
}

// shutdown has the node's pods stopped, within the grace period even if
// ctx ends meanwhile: staticlet told to stop during a shutdown finishes it.
func (m *Manager) shutdown(ctx context.Context) {
	grace, critical := m.cfg.GracePeriod, m.cfg.CriticalGracePeriod
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	start := time.Now()
	if err := m.cfg.Node.ShutdownNode(sctx, grace-critical, critical); err != nil {
		m.log.Warn("stopping pods for the node shutdown", "err", err, "took", time.Since(start))
		return
	}
	m.log.Info("pods stopped for the node shutdown", "took", time.Since(start))
}

// prepareForShutdown reads logind's PrepareForShutdown signal; false when
// sig is another.
func prepareForShutdown(sig *dbus.Signal) (active, ok bool) {
	if sig.Name != logindIface+".PrepareForShutdown" || len(sig.Body) != 1 {
		return false, false
	}
	active, ok = sig.Body[0].(bool)
	return active, ok
}

// inhibit takes a delay inhibitor lock for shutdowns; closing the file
// releases it.
func (m *Manager) inhibit(ctx context.Context, conn *dbus.Conn) (*os.File, error) {
	var fd dbus.UnixFD
	err := m.call(ctx, func(ctx context.Context) error {
		return conn.Object(logindName, logindPath).CallWithContext(ctx, logindIface+".Inhibit", 0,
			lockWhat, lockWho, lockWhy, "delay").Store(&fd)
	})
	if err != nil {
		return nil, fmt.Errorf("taking a delay inhibitor lock from logind: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind inhibitor lock"), nil
}

// ensureInhibitDelay makes logind's InhibitDelayMaxSec at least the grace
// period, with a drop-in and a reload, and warns if that does not work. It
// fails only when logind cannot be asked.
func (m *Manager) ensureInhibitDelay(ctx context.Context, conn *dbus.Conn) error {
	grace := m.cfg.GracePeriod
	cur, err := m.inhibitDelayMax(ctx, conn)
	if err != nil || cur >= grace {
		return err
	}
	if err := m.raiseInhibitDelay(ctx, conn); err != nil {
		m.log.Warn("logind's InhibitDelayMaxSec is shorter than the shutdown grace period and could not be raised: pods get less",
			"InhibitDelayMaxSec", cur, "grace", grace, "err", err)
		return nil
	}
	// logind applies the drop-in in its own time after SIGHUP.
	tick := time.NewTicker(reloadWait / 20)
	defer tick.Stop()
	deadline := time.Now().Add(reloadWait)
	for cur < grace && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if cur, err = m.inhibitDelayMax(ctx, conn); err != nil {
			return err
		}
	}
	if cur < grace {
		m.log.Warn("logind's InhibitDelayMaxSec is still shorter than the shutdown grace period after raising it: pods get less",
			"InhibitDelayMaxSec", cur, "grace", grace, "drop-in", m.cfg.DropIn)
		return nil
	}
	m.log.Info("raised logind's InhibitDelayMaxSec to the shutdown grace period", "InhibitDelayMaxSec", cur, "drop-in", m.cfg.DropIn)
	return nil
}

// inhibitDelayMax reads logind's InhibitDelayMaxUSec.
func (m *Manager) inhibitDelayMax(ctx context.Context, conn *dbus.Conn) (time.Duration, error) {
	var v dbus.Variant
	err := m.call(ctx, func(ctx context.Context) error {
		return conn.Object(logindName, logindPath).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0,
			logindIface, "InhibitDelayMaxUSec").Store(&v)
	})
	if err != nil {
		return 0, fmt.Errorf("reading logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("reading logind's InhibitDelayMaxUSec: a %s, not a uint64", v.Signature())
	}
	if usec > math.MaxInt64/1000 {
		return time.Duration(math.MaxInt64), nil // "infinity"
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// raiseInhibitDelay writes the drop-in setting InhibitDelayMaxSec to the
// grace period and has systemd send logind SIGHUP, which reloads it.
func (m *Manager) raiseInhibitDelay(ctx context.Context, conn *dbus.Conn) error {
	secs := int64(math.Ceil(m.cfg.GracePeriod.Seconds()))
	content := fmt.Sprintf("# Written by staticlet: logind lets its delay inhibitor lock hold a shutdown\n"+
		"# for the shutdown grace period.\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
	if err := writeFile(m.cfg.DropIn, []byte(content)); err != nil {
		return err
	}
	return m.call(ctx, func(ctx context.Context) error {
		err := conn.Object(systemdName, systemdPath).CallWithContext(ctx, systemdIface+".KillUnit", 0,
			logindService, "main", int32(syscall.SIGHUP)).Err
		if err != nil {
			return fmt.Errorf("reloading logind through systemd: %w", err)
		}
		return nil
	})
}

// writeFile writes path whole or not at all.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// call runs f with a deadline of callTimeout.
func (m *Manager) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := f(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", callTimeout, err)
	}
	return err
}
