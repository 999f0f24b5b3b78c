package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// podWatchFlags are the watch flags of `get pods`, kubectl's.
type podWatchFlags struct {
	watch       bool
	watchOnly   bool
	watchEvents bool
}

func (f *podWatchFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.watch, "watch", "w", false, "after listing the pods, print a row for each change")
	fl.BoolVar(&f.watchOnly, "watch-only", false, "print a row for each change, without listing the pods first")
	fl.BoolVar(&f.watchEvents, "output-watch-events", false, "with --watch, print the kind of each change (ADDED, MODIFIED, DELETED)")
}

// checkSelector reports a label selector that does not parse, before it
// reaches the server.
func checkSelector(selector string) error {
	if _, err := labels.Parse(selector); err != nil {
		return fmt.Errorf("invalid selector %q: %w", selector, err)
	}
	return nil
}

// watchContext is ctx, cancelled on an interrupt: a watch runs until then.
func watchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// endWatch turns the end of a watch by an interrupt into success.
func endWatch(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// watchPods prints the pods the selector, -n and name (if not empty)
// select, then each change, until interrupted.
func watchPods(cmd *cobra.Command, cf *clientFlags, name, selector string, of *outputFlags, p *printers.Printer, f podWatchFlags) error {
	ctx, stop := watchContext(cmd.Context())
	defer stop()
	c := cf.client()
	_, wide := of.Table()
	output := of.Raw()
	if wide {
		output = printers.FormatWide
	}
	pw, err := printers.NewPodWatch(of.Writer(cmd.OutOrStdout()), printers.PodWatchOptions{Output: output, Printer: p, WatchEvents: f.watchEvents})
	if err != nil {
		return err
	}
	keep := func(p *v1.Pod) bool { return cf.namespace == "" || p.Namespace == cf.namespace }
	if name != "" {
		p, err := c.Pod(ctx, cf.podName(name))
		if err != nil {
			return err
		}
		keep = func(o *v1.Pod) bool { return o.Namespace == p.Namespace && o.Name == p.Name }
	}
	isMark := func(ev status.PodWatchEvent) bool { return ev.Type == status.WatchBookmark }
	err = c.WatchPods(ctx, selector, printWatch(isMark, func(ev status.PodWatchEvent) bool { return keep(ev.Object) },
		f.watchOnly, pw.Print))
	return endWatch(ctx, err)
}

// printWatch returns the callback of a watch that prints with print: the
// items before the bookmark (which isMark tells) as one batch, unless
// skipInitial, then each later one; keep selects the items to print.
func printWatch[T any](isMark, keep func(T) bool, skipInitial bool, print func([]T, time.Time) error) func(T) error {
	var initial []T
	listed := false // the bookmark came
	return func(item T) error {
		switch {
		case isMark(item):
			listed = true
			if skipInitial {
				return nil
			}
			return print(initial, time.Now())
		case !keep(item):
			return nil
		case !listed:
			initial = append(initial, item)
			return nil
		}
		return print([]T{item}, time.Now())
	}
}
