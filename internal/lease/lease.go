// Package lease makes, deletes and sweeps staticlet's containerd leases,
// for package sandbox (a container's snapshot) and package images (pulls,
// imports, unpacking). containerd's garbage collector removes what nothing
// refers to: a snapshot prepared for a container, content being pulled, an
// image being unpacked are kept only by a lease until a container or an
// image refers to them. Left to itself the client makes an anonymous lease that
// expires after 24 hours, and a staticlet killed between the two steps
// leaves what it held for a day. So every call that makes such things runs
// under a lease of staticlet's own, named and labelled as staticlet's,
// deleted when the call is done, and swept at start (Sweep) when a
// staticlet was killed before it could delete it.
//
// A Maker is safe for concurrent use.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// LabelLease is on every lease staticlet makes; its value says what for.
const LabelLease = "io.staticlet.lease"

// longestCall is the longest call a lease covers: an image import
// (package images' importTimeout).
const longestCall = 10 * time.Minute

// leaseExpiry is when containerd drops a lease staticlet could not delete
// and no later staticlet swept: past the longest call one covers (an
// import), so never under a call still in flight.
const leaseExpiry = 2 * longestCall

// leaseIDPrefix starts the IDs of staticlet's leases.
const leaseIDPrefix = "staticlet-"

// anonymousLeaseAge is how old a lease with no labels but the client's
// default expiry must be for Sweep to take it for one of an earlier
// staticlet's (older versions let the client make them): older than any
// call of a tool that makes one in staticlet's namespace would last.
const anonymousLeaseAge = longestCall

// gcExpireLabel is the label containerd's client and garbage collector
// keep a lease's expiry in.
const gcExpireLabel = "containerd.io/gc.expire"

// Maker makes and sweeps staticlet's leases in one containerd namespace.
type Maker struct {
	// Leases is containerd's lease service.
	Leases leases.Manager
	// Namespace is the containerd namespace of staticlet's objects.
	Namespace string
	// CallTimeout bounds each call to containerd.
	CallTimeout time.Duration
	// Logger is told of a lease that could not be deleted.
	Logger *slog.Logger
}

// call scopes ctx to the namespace with the per-call deadline.
func (m *Maker) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(ctx, m.Namespace), m.CallTimeout)
}

// With returns ctx under a new lease of staticlet's for purpose, and the
// function that deletes it. A ctx that already has a lease keeps it. The
// deletion runs even when ctx is done: what the lease held goes to the
// garbage collector either way, unless a container or image refers to it.
func (m *Maker) With(ctx context.Context, purpose string) (context.Context, func(), error) {
	if _, ok := leases.FromContext(ctx); ok {
		return ctx, func() {}, nil
	}
	ctx = namespaces.WithNamespace(ctx, m.Namespace)
	ls := m.Leases
	callCtx, cancel := m.call(ctx)
	l, err := ls.Create(callCtx,
		leases.WithID(leaseIDPrefix+purpose+"-"+randomID()),
		leases.WithLabel(LabelLease, purpose),
		leases.WithExpiration(leaseExpiry))
	cancel()
	if err != nil {
		return ctx, func() {}, fmt.Errorf("creating a lease for %s: %w", purpose, err)
	}
	return leases.WithLease(ctx, l.ID), func() {
		dctx, cancel := m.call(context.WithoutCancel(ctx))
		defer cancel()
		if err := ls.Delete(dctx, l); err != nil && !errdefs.IsNotFound(err) {
			m.Logger.Warn("deleting a lease; the next start of staticlet sweeps it", "lease", l.ID, "err", err)
		}
	}, nil
}

// Sweep deletes the leases an earlier staticlet made and could not
// delete, killed during a call: its own (labelled LabelLease), and
// anonymous ones older than anonymousLeaseAge, as the client made them
// before staticlet named its own. Call it before anything makes a lease.
func (m *Maker) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := m.call(ctx)
	defer cancel()
	ls := m.Leases
	all, err := ls.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing leases: %w", err)
	}
	n := 0
	var errs []error
	for _, l := range all {
		if !ownLease(l, time.Now()) {
			continue
		}
		if err := ls.Delete(ctx, l); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting lease %s: %w", l.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ownLease tells whether l is a lease of an earlier staticlet.
func ownLease(l leases.Lease, now time.Time) bool {
	if _, ok := l.Labels[LabelLease]; ok || strings.HasPrefix(l.ID, leaseIDPrefix) {
		return true
	}
	if len(l.Labels) != 1 || l.Labels[gcExpireLabel] == "" {
		return false
	}
	return now.Sub(l.CreatedAt) > anonymousLeaseAge
}

// randomID is 16 random hex digits.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux.
	return hex.EncodeToString(b)
}
