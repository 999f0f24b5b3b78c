package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/status"
)

const (
	// pollInterval is how often wait asks staticlet again.
	pollInterval = 200 * time.Millisecond
	// defaultWaitTimeout and foreverTimeout (what a negative --timeout
	// means) are kubectl's.
	defaultWaitTimeout = 30 * time.Second
	foreverTimeout     = 7 * 24 * time.Hour
)

func waitCommand() *cobra.Command {
	var (
		cf      clientFlags
		forFlag string
		timeout time.Duration
		all     bool
	)
	cmd := &cobra.Command{
		Use:   "wait (pod/NAME... | --all) --for=delete|condition=NAME[=VALUE]|jsonpath='{PATH}'[=VALUE] [--timeout=30s]",
		Short: "Wait until pods meet a condition, or are gone, like kubectl wait",
		Long: `wait waits until each pod named meets the condition that --for gives, then
prints "pod/NAME condition met" and exits 0; when --timeout passes first, it
prints "error: timed out waiting for the condition on pods/NAME" and exits 1,
as kubectl wait does. Pods are waited for one after the other, within one
timeout.

--for takes kubectl's forms:
  condition=NAME[=VALUE]     the pod's status has condition NAME (Ready,
                             ContainersReady, Initialized, PodScheduled,
                             PodReadyToStartContainers) with status VALUE,
                             true by default; both in any case
  jsonpath='{PATH}'[=VALUE]  the field at PATH in the pod's JSON (as
                             get pods NAME -o json shows it) is VALUE, as
                             text; without VALUE, has any value
  delete                     staticlet has no such pod (any more)

Unlike kubectl, a wait for a condition or a path does not fail on a pod
that staticlet does not have: it waits for the pod to appear, as it will
once staticlet reads a manifest just written. Nor does any wait fail while
staticlet is not up (no status socket yet, or one that refuses): it asks
again until the timeout. So a bootstrap script may write a manifest, start
staticlet and wait, in any order. A pod counts as gone only once staticlet
is ready (has read its manifests), and at once if it never was there.

A pod is named as get pods shows it (metadata.name, a dash and the node
name), or by its manifest's metadata.name alone when no pod has that as
its full name; in namespace -n, else in default, else in the only
namespace that has it. --all waits for every pod the manifests define
(with delete, and every pod staticlet still runs), once staticlet is ready.

--timeout=0 checks once; a negative timeout waits a week.`,
		Example: `  # Bootstrap: write etcd's manifest, then wait until etcd is Ready
  cp etcd.yaml /etc/kubernetes/manifests/
  staticlet wait --for=condition=Ready pod/etcd --timeout=5m

  # Wait until the pod runs, by its phase
  staticlet wait --for=jsonpath='{.status.phase}'=Running pod/etcd-node1

  # Remove a manifest, and wait until its pod is stopped and gone
  rm /etc/kubernetes/manifests/etcd.yaml
  staticlet wait --for=delete pod/etcd --timeout=60s

  # Wait until every pod of kube-system is Ready
  staticlet wait --for=condition=Ready --all -n kube-system`,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseFor(forFlag)
			if err != nil {
				return err
			}
			names, err := parsePodArgs(args, all)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout < 0 {
				timeout = foreverTimeout
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			w := &waiter{c: cf.client(), cond: cond, once: timeout == 0, out: cmd.OutOrStdout()}
			var targets []target
			if all {
				if targets, err = w.allPods(ctx, cf.namespace); err != nil {
					return err
				}
			}
			for _, n := range names {
				targets = append(targets, target{query: cf.podName(n), name: n})
			}
			for _, t := range targets {
				if err := w.wait(ctx, t); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	f := cmd.Flags()
	f.StringVar(&forFlag, "for", "", "the condition to wait for: "+forUsage)
	f.DurationVar(&timeout, "timeout", defaultWaitTimeout, "how long to wait before giving up; 0 checks once, negative waits a week")
	f.BoolVar(&all, "all", false, "wait for every pod (of namespace -n, if given)")
	cmd.ValidArgsFunction = completePods(&cf, 0, "pod/")
	return cmd
}

// target is a pod to wait for: what to ask the status socket, and its
// name for messages until staticlet gives its full name.
type target struct {
	query, name string
}

// waiter asks staticlet about pods until they meet cond.
type waiter struct {
	c    *status.Client
	cond waitCond
	once bool // --timeout=0: ask once
	out  io.Writer
}

var (
	// errTimedOut: ctx ended before the check was done.
	errTimedOut = errors.New("timed out")
	// errNotMet: with once, the one check was not done.
	errNotMet = errors.New("condition not met")
)

// wait waits until the pod t names meets w.cond, and says so.
func (w *waiter) wait(ctx context.Context, t target) error {
	name := t.name
	found := false
	err := w.poll(ctx, func() (bool, error) {
		p, err := w.observe(ctx, t.query)
		if err != nil {
			return false, err
		}
		if found = p != nil; found {
			name = p.Name
		}
		return w.cond.met(p)
	})
	switch {
	case err == nil:
		fmt.Fprintf(w.out, "pod/%s condition met\n", name)
		return nil
	case errors.Is(err, errTimedOut):
		return fmt.Errorf("timed out waiting for the condition on pods/%s", t.name)
	case errors.Is(err, errNotMet) && !found && !w.cond.delete:
		return &exitError{code: 1, raw: true, err: fmt.Errorf("Error from server (NotFound): pods %q not found", t.name)}
	case errors.Is(err, errNotMet):
		return fmt.Errorf("condition not met for pods/%s", t.name)
	}
	return err
}

// observe returns the pod staticlet has by the name query, or nil when it
// has none. For delete, having none counts only once staticlet is ready:
// before, it may not have read the manifests nor found the containers it
// already runs.
func (w *waiter) observe(ctx context.Context, query string) (*v1.Pod, error) {
	p, err := w.c.Pod(ctx, query)
	if !errors.Is(err, status.ErrNotFound) {
		return p, err
	}
	if w.cond.delete {
		if err := w.c.Ready(ctx); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// allPods returns, once staticlet is ready, the pods --all waits for (in
// namespace, if set): those its manifests define, known even before their
// first status; and for delete also those it still runs without one.
func (w *waiter) allPods(ctx context.Context, namespace string) ([]target, error) {
	var keys []string
	err := w.poll(ctx, func() (bool, error) {
		keys = nil
		if err := w.c.Ready(ctx); err != nil {
			return false, err
		}
		ms, err := w.c.Manifests(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ms {
			keys = append(keys, m.Pods...)
		}
		if w.cond.delete {
			list, err := w.c.Pods(ctx)
			if err != nil {
				return false, err
			}
			for _, p := range list.Items {
				keys = append(keys, p.Namespace+"/"+p.Name)
			}
		}
		return true, nil
	})
	if errors.Is(err, errTimedOut) {
		return nil, errors.New("timed out waiting for staticlet to be ready")
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	var targets []target
	for _, k := range slices.Compact(keys) {
		ns, name, _ := strings.Cut(k, "/")
		if namespace == "" || ns == namespace {
			targets = append(targets, target{query: k, name: name})
		}
	}
	if len(targets) == 0 && !w.cond.delete {
		return nil, errors.New("no matching resources found")
	}
	return targets, nil
}

// poll calls check until it is done, fails with an error that waiting
// does not mend, or ctx ends (errTimedOut). Errors that say staticlet is
// not up or not ready yet are waited out. With w.once, check runs once:
// its error, or errNotMet.
func (w *waiter) poll(ctx context.Context, check func() (bool, error)) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, err := check()
		switch {
		case done && err == nil:
			return nil
		case ctx.Err() != nil:
			return errTimedOut
		case err != nil && (w.once || !(errors.Is(err, status.ErrNotRunning) || errors.Is(err, status.ErrNotReady))):
			return err
		case w.once:
			return errNotMet
		}
		select {
		case <-ctx.Done():
			return errTimedOut
		case <-tick.C:
		}
	}
}
