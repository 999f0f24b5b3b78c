package diskpressure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultInterval is how often a Monitor looks, the kubelet's housekeeping
// period.
const DefaultInterval = 10 * time.Second

// Config configures a Monitor.
type Config struct {
	// Paths are the directories whose filesystems are watched: --root-dir
	// and the pod logs directory. One that does not exist yet is looked
	// at through its nearest existing parent.
	Paths []string
	// Thresholds are checked on each filesystem; the zero Thresholds
	// check nothing (DefaultThresholds are the kubelet's).
	Thresholds Thresholds
	// Interval between looks; DefaultInterval when zero.
	Interval time.Duration
	// Changed receives the state at the first look and whenever the
	// pressure or its message changes. It is called from Run's goroutine.
	Changed func(State)
	// Logger hears of each change of pressure; nil discards.
	Logger *slog.Logger
}

// State is what a Monitor saw last.
type State struct {
	// Pressure is the DiskPressure condition: true while any signal
	// crosses its threshold.
	Pressure bool
	// Signals are the thresholds crossed; Message says them in one line.
	Signals []Signal
	Message string
	// Since is when Pressure last changed (or the first look).
	Since time.Time
	// Filesystems are the filesystems as last seen.
	Filesystems []Usage
}

// Monitor watches the filesystems of Config.Paths for disk pressure.
type Monitor struct {
	cfg Config
	log *slog.Logger
}

// New returns a Monitor for cfg. It starts nothing: call Run.
func New(cfg Config) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{cfg: cfg, log: log}
}

// Run looks at once, then every Interval, until ctx ends; it returns nil.
// A filesystem it cannot read is left out of that look and logged.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	var last State
	first := true
	for {
		fs, err := Read(m.cfg.Paths)
		if err != nil {
			m.log.Warn("reading the filesystems for disk pressure", "err", err)
		}
		now := time.Now()
		next := Next(last, fs, m.cfg.Thresholds, now)
		if first || next.Pressure != last.Pressure || next.Message != last.Message {
			m.report(first, last, next)
			if m.cfg.Changed != nil {
				m.cfg.Changed(next)
			}
		}
		last, first = next, false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// report logs a change of pressure.
func (m *Monitor) report(first bool, last, next State) {
	switch {
	case next.Pressure && next.Message != last.Message:
		m.log.Warn("disk pressure: pods keep running; free space under these directories", "signals", next.Message)
	case !next.Pressure && last.Pressure:
		m.log.Info("disk pressure cleared")
	case first:
		m.log.Debug("no disk pressure", "filesystems", len(next.Filesystems))
	}
}

// Next is the state after last given the filesystems fs seen at now.
func Next(last State, fs []Usage, th Thresholds, now time.Time) State {
	signals := Evaluate(fs, th)
	next := State{Pressure: len(signals) > 0, Signals: signals, Message: Message(signals), Since: last.Since, Filesystems: fs}
	if next.Since.IsZero() || next.Pressure != last.Pressure {
		next.Since = now
	}
	return next
}

// Read statfs's the filesystems of paths, one Usage per filesystem (paths
// on the same one share it). A path that does not exist is looked at
// through its nearest existing parent. Filesystems that cannot be read
// are left out, their errors joined.
func Read(paths []string) ([]Usage, error) {
	var out []Usage
	var devs []uint64
	var errs []error
	for _, p := range paths {
		dir := existing(p)
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			errs = append(errs, fmt.Errorf("stat %s: %w", dir, err))
			continue
		}
		if i := slices.Index(devs, st.Dev); i >= 0 {
			out[i].Paths = append(out[i].Paths, p)
			continue
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			errs = append(errs, fmt.Errorf("statfs %s: %w", dir, err))
			continue
		}
		bsize := uint64(fs.Bsize)
		devs = append(devs, st.Dev)
		out = append(out, Usage{
			Paths: []string{p}, Bytes: fs.Blocks * bsize, Available: fs.Bavail * bsize,
			Inodes: fs.Files, InodesFree: fs.Ffree,
		})
	}
	return out, errors.Join(errs...)
}

// existing is path, or its nearest parent that exists.
func existing(path string) string {
	for {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}
