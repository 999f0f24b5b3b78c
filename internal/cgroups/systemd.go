package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The systemd cgroup driver, as the kubelet's: a pod's cgroup is a slice
// unit that systemd makes, its containers' are scopes runc makes in it
// (runc's systemd driver, asked for through the runtime's SystemdCgroup
// option), so systemctl and systemd-cgls show the pods where systemd users
// look. The layout is the kubelet's under a root slice of staticlet's own:
//
//	staticlet.slice
//	├─ staticlet-pod<uid>.slice                  Guaranteed
//	│  └─ staticlet-<container id>.scope
//	├─ staticlet-burstable.slice
//	│  └─ staticlet-burstable-pod<uid>.slice
//	└─ staticlet-besteffort.slice
//	   └─ staticlet-besteffort-pod<uid>.slice
//
// Slices are started as transient units without default dependencies, so
// that systemd does not stop them, and the pods with them, at shutdown:
// staticlet's node shutdown decides when pods stop, as the kubelet's does.

// Systemd unit properties and D-Bus error names the driver relies on.
const (
	unitExistsError = "org.freedesktop.systemd1.UnitExists"
	noSuchUnitError = "org.freedesktop.systemd1.NoSuchUnit"
	// cpuQuotaStep is systemd's granularity of CPUQuotaPerSecUSec: it
	// keeps the quota as a percentage of a CPU, so it is rounded up to the
	// next 10ms per second, as runc does, lest a container's own quota be
	// above its pod's.
	cpuQuotaStep = 10000
)

// systemdSlices makes and removes slice units through systemd's D-Bus API.
// It connects on first use and again after the connection broke (systemd
// re-executed, say). Safe for concurrent use.
type systemdSlices struct {
	// v2 tells whether the node runs cgroup v2, where the CPU weight and
	// memory limit have their v2 names.
	v2 bool

	mu   sync.Mutex // guards the fields below
	conn *sddbus.Conn
	// made holds the slices this staticlet has started or found, that
	// have fixed limits: the root and QoS-class slices.
	made map[string]bool
}

// ensureOnce is ensure for a slice whose limits never change: after the
// first success it is not asked for again. A slice stopped behind
// staticlet's back is made again, with default dependencies, by systemd
// as the parent of the next pod slice.
func (s *systemdSlices) ensureOnce(ctx context.Context, name, description string, r *specs.LinuxResources) error {
	s.mu.Lock()
	made := s.made[name]
	s.mu.Unlock()
	if made {
		return nil
	}
	if err := s.ensure(ctx, name, description, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.made == nil {
		s.made = map[string]bool{}
	}
	s.made[name] = true
	return nil
}

// connection returns a connected D-Bus connection to systemd.
func (s *systemdSlices) connection(ctx context.Context) (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	conn, err := dialSystemd(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd: %w", err)
	}
	s.conn = conn
	return conn, nil
}

// dialSystemd connects to systemd's D-Bus API for as long as the
// connection is kept, however short ctx is: ctx bounds only the wait.
// go-systemd hands the context it connects with to godbus as the
// connection's own, and godbus closes the connection when that context
// ends. Connected on a call's context, the shared connection died when
// that call returned, under the calls of other pods then on it: their
// method calls failed ("use of closed network connection") and the jobs
// they waited for never reported, holding a pod's sandbox until its call
// timed out.
func dialSystemd(ctx context.Context) (*sddbus.Conn, error) {
	type dialed struct {
		conn *sddbus.Conn
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		conn, err := sddbus.NewWithContext(context.WithoutCancel(ctx))
		done <- dialed{conn, err}
	}()
	select {
	case d := <-done:
		return d.conn, d.err
	case <-ctx.Done():
		// Nobody takes a connection made after all: it is closed.
		go func() {
			if d := <-done; d.conn != nil {
				d.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// close ends the connection, if there is one.
func (s *systemdSlices) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// ensure starts slice name with the limits r sets, or sets them on the
// slice if it exists.
func (s *systemdSlices) ensure(ctx context.Context, name, description string, r *specs.LinuxResources) error {
	conn, err := s.connection(ctx)
	if err != nil {
		return err
	}
	limits := sliceProperties(s.v2, r)
	props := append([]sddbus.Property{
		sddbus.PropDescription(description),
		{Name: "DefaultDependencies", Value: dbus.MakeVariant(false)},
		{Name: "CPUAccounting", Value: dbus.MakeVariant(true)},
		{Name: "MemoryAccounting", Value: dbus.MakeVariant(true)},
		{Name: "TasksAccounting", Value: dbus.MakeVariant(true)},
	}, limits...)
	done := make(chan string, 1)
	_, err = conn.StartTransientUnitContext(ctx, name, "replace", props, done)
	if isDBusError(err, unitExistsError) {
		if len(limits) == 0 {
			return nil
		}
		if err := conn.SetUnitPropertiesContext(ctx, name, true, limits...); err != nil {
			return fmt.Errorf("setting the limits of slice %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("starting slice %s: %w", name, err)
	}
	return waitJob(ctx, "starting slice "+name, done)
}

// stop stops slice name, and with it anything still in it; a slice that
// is not there is no error.
func (s *systemdSlices) stop(ctx context.Context, name string) error {
	conn, err := s.connection(ctx)
	if err != nil {
		return err
	}
	done := make(chan string, 1)
	_, err = conn.StopUnitContext(ctx, name, "replace", done)
	if isDBusError(err, noSuchUnitError) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopping slice %s: %w", name, err)
	}
	return waitJob(ctx, "stopping slice "+name, done)
}

// waitJob waits for a systemd job's result on done.
func waitJob(ctx context.Context, what string, done <-chan string) error {
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("%s: systemd's job ended %q", what, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// isDBusError tells whether err is the D-Bus error name.
func isDBusError(err error, name string) bool {
	var e dbus.Error
	return errors.As(err, &e) && e.Name == name
}

// sliceProperties are the systemd properties that set a slice's CPU and
// memory limits to r's, in cgroup v2's or v1's terms. Limits r does not
// set are lifted (infinity), so that they follow edits of the pod.
func sliceProperties(v2 bool, r *specs.LinuxResources) []sddbus.Property {
	var props []sddbus.Property
	add := func(name string, v uint64) {
		props = append(props, sddbus.Property{Name: name, Value: dbus.MakeVariant(v)})
	}
	if r == nil {
		return nil
	}
	if c := r.CPU; c != nil {
		if c.Shares != nil {
			if v2 {
				add("CPUWeight", sharesToWeight(*c.Shares))
			} else {
				add("CPUShares", *c.Shares)
			}
		}
		add("CPUQuotaPerSecUSec", quotaPerSecond(c))
	}
	memory := uint64(math.MaxUint64)
	if m := r.Memory; m != nil && m.Limit != nil && *m.Limit > 0 {
		memory = uint64(*m.Limit)
	}
	if v2 {
		add("MemoryMax", memory)
	} else {
		add("MemoryLimit", memory)
	}
	tasks := uint64(math.MaxUint64)
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit > 0 {
		tasks = uint64(*p.Limit)
	}
	add("TasksMax", tasks)
	return props
}

// quotaPerSecond is c's CFS quota as systemd's CPUQuotaPerSecUSec:
// microseconds per second of wall time, rounded up to systemd's step;
// infinity without a quota.
func quotaPerSecond(c *specs.LinuxCPU) uint64 {
	if c.Quota == nil || *c.Quota <= 0 {
		return math.MaxUint64
	}
	period := uint64(100000)
	if c.Period != nil && *c.Period > 0 {
		period = *c.Period
	}
	perSec := uint64(*c.Quota) * 1000000 / period
	if rem := perSec % cpuQuotaStep; rem != 0 {
		perSec += cpuQuotaStep - rem
	}
	return perSec
}

// escapeSliceName makes s fit as one dash-separated part of a slice name:
// a dash there would start a new level of the hierarchy, so dashes become
// underscores, as the kubelet does with pod UIDs.
func escapeSliceName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// SystemdBooted tells whether systemd is the init system, as sd_booted
// does.
func SystemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}
