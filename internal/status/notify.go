package status

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// minStatusInterval limits STATUS updates to about ten a second: a burst of
// store changes is coalesced into one update at the end of the interval.
const minStatusInterval = 100 * time.Millisecond

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Store is the state to report.
	Store *Store
	// Alive is the reconcile loop's heartbeat: WATCHDOG=1 is sent only while
	// it returns true. Nil means always alive.
	Alive func() bool
	// Logger receives notification failures; nil discards them.
	Logger *slog.Logger
}

// Notifier reports to systemd through sd_notify when NOTIFY_SOCKET is set:
// READY=1 when the store becomes ready, STATUS= with the store's summary
// whenever it changes, WATCHDOG=1 at half of WATCHDOG_USEC while the loop is
// alive, and STOPPING=1 when it stops.
type Notifier struct {
	cfg NotifierConfig
	log *slog.Logger
}

// NewNotifier returns a notifier for cfg. It starts nothing: call Run.
func NewNotifier(cfg NotifierConfig) *Notifier {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, log: log}
}

// Run notifies systemd until ctx is cancelled, then sends STOPPING=1 and
// returns nil. Without NOTIFY_SOCKET it returns nil at once. A failure to
// notify is logged (once until a notification succeeds again) and does not
// stop it: systemd's watchdog is the judge of a notifier that cannot reach
// it.
func (n *Notifier) Run(ctx context.Context) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		n.log.Debug("NOTIFY_SOCKET is not set: not notifying systemd")
		return nil
	}
	r := &notifyRun{Notifier: n}

	var watchdog <-chan time.Time
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog disabled: invalid watchdog settings", "err", err)
	}
	if interval > 0 {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		watchdog = t.C
	}

	// throttle is non-nil while an update waits for minStatusInterval to
	// pass since the last one.
	var throttle <-chan time.Time
	var lastUpdate time.Time
	update := func() {
		r.update()
		lastUpdate = time.Now()
	}
	update()
	for {
		select {
		case <-ctx.Done():
			r.send("STOPPING=1\nSTATUS=stopping")
			return nil
		case <-n.cfg.Store.Changed():
			if throttle != nil {
				continue
			}
			if wait := minStatusInterval - time.Since(lastUpdate); wait > 0 {
				throttle = time.After(wait)
				continue
			}
			update()
		case <-throttle:
			throttle = nil
			update()
		case <-watchdog:
			r.watchdog()
		}
	}
}

// notifyRun is the state of one Run, owned by its goroutine.
type notifyRun struct {
	*Notifier
	readySent  bool
	lastStatus string
	failing    bool // a notification failed; log again only after a success
	stalled    bool // Alive returned false; warn again only after it recovers
}

// update sends READY=1 once the store is ready and STATUS= when the summary
// changed since the last one sent.
func (r *notifyRun) update() {
	summary := r.cfg.Store.Summary()
	if !r.readySent && r.cfg.Store.Ready() {
		if r.send("READY=1\nSTATUS=" + summary) {
			r.readySent = true
			r.lastStatus = summary
		}
		return
	}
	if summary != r.lastStatus && r.send("STATUS="+summary) {
		r.lastStatus = summary
	}
}

// watchdog pings systemd while the reconcile loop is alive.
func (r *notifyRun) watchdog() {
	if r.cfg.Alive != nil && !r.cfg.Alive() {
		if !r.stalled {
			r.log.Warn("reconcile loop is not alive: withholding the systemd watchdog ping")
			r.stalled = true
		}
		return
	}
	if r.stalled {
		r.log.Info("reconcile loop is alive again: resuming the systemd watchdog ping")
		r.stalled = false
	}
	r.send(daemon.SdNotifyWatchdog)
}

// send sends one notification and reports whether it was delivered.
func (r *notifyRun) send(state string) bool {
	sent, err := daemon.SdNotify(false, state)
	if err == nil && !sent {
		err = fmt.Errorf("NOTIFY_SOCKET is not set")
	}
	if err != nil {
		if !r.failing {
			r.log.Warn("notifying systemd", "state", state, "err", err)
			r.failing = true
		}
		return false
	}
	r.failing = false
	return true
}
