package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
)

// Leases. containerd's garbage collector removes what nothing refers to:
// a snapshot prepared for a container, content being pulled, an image
// being unpacked are kept only by a lease until a container or an image
// refers to them. Left to itself the client makes an anonymous lease that
// expires after 24 hours, and a staticlet killed between the two steps
// leaves what it held for a day. So every call that makes such things runs
// under a lease of staticlet's own, named and labelled as staticlet's,
// deleted when the call is done, and swept at start (SweepLeases) when a
// staticlet was killed before it could delete it.

// LabelLease is on every lease staticlet makes; its value says what for.
const LabelLease = labelPrefix + "lease"

// leaseExpiry is when containerd drops a lease staticlet could not delete
// and no later staticlet swept: past the longest call one covers (an
// import), so never under a call still in flight.
const leaseExpiry = 2 * importTimeout

// leaseIDPrefix starts the IDs of staticlet's leases.
const leaseIDPrefix = "staticlet-"

// anonymousLeaseAge is how old a lease with no labels but the client's
// default expiry must be for SweepLeases to take it for one of an earlier
// staticlet's (older versions let the client make them): older than any
// call of a tool that makes one in staticlet's namespace would last.
const anonymousLeaseAge = importTimeout

// gcExpireLabel is the label containerd's client and garbage collector
// keep a lease's expiry in.
const gcExpireLabel = "containerd.io/gc.expire"

// withLease returns ctx under a new lease of staticlet's for purpose, and
// the function that deletes it. A ctx that already has a lease keeps it.
// The deletion runs even when ctx is done: what the lease held goes to the
// garbage collector either way, unless a container or image refers to it.
func (r *Runtime) withLease(ctx context.Context, purpose string) (context.Context, func(), error) {
	if _, ok := leases.FromContext(ctx); ok {
		return ctx, func() {}, nil
	}
	ctx = r.nsContext(ctx)
	ls := r.client.LeasesService()
	callCtx, cancel := r.call(ctx)
	l, err := ls.Create(callCtx,
		leases.WithID(leaseIDPrefix+purpose+"-"+newID()[:16]),
		leases.WithLabel(LabelLease, purpose),
		leases.WithExpiration(leaseExpiry))
	cancel()
	if err != nil {
		return ctx, func() {}, fmt.Errorf("creating a lease for %s: %w", purpose, err)
	}
	return leases.WithLease(ctx, l.ID), func() {
		dctx, cancel := r.call(context.WithoutCancel(ctx))
		defer cancel()
		if err := ls.Delete(dctx, l); err != nil && !errdefs.IsNotFound(err) {
			r.cfg.Logger.Warn("deleting a lease; the next start of staticlet sweeps it", "lease", l.ID, "err", err)
		}
	}, nil
}

// SweepLeases deletes the leases an earlier staticlet made and could not
// delete, killed during a call: its own (labelled LabelLease), and
// anonymous ones older than anonymousLeaseAge, as the client made them
// before staticlet named its own. Call it before anything makes a lease.
func (r *Runtime) SweepLeases(ctx context.Context) (int, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	ls := r.client.LeasesService()
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
