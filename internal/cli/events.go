package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

func getEventsCommand() *cobra.Command {
	var (
		cf     clientFlags
		of     outputFlags
		watch  bool
		forObj string
	)
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event", "ev"},
		Short:   "List recent events: LAST SEEN TYPE REASON OBJECT MESSAGE",
		Long: `events lists the events staticlet recorded about its pods (the last 1000,
each for an hour after its latest repeat), oldest first, as kubectl get
events does: repeats of an event are one row with their count. -w prints
them, then each new one as it happens.

-o json|yaml prints staticlet's event records; -o name, jsonpath,
go-template and custom-columns see core/v1 Events, the same Events the
Kubernetes API serves (kubectl get events): the repeats of one as one
Event with its count, first and last times, named as the kubelet names
them (POD.HEXTIME), involvedObject the pod with its UID (and fieldPath
spec.containers{NAME} for a container's), ordered by namespace and name.`,
		Example: `  # Every recent event
  staticlet get events

  # The events of one pod, then new ones as they happen
  staticlet get events --for pod/etcd-node1 -w

  # The events of namespace kube-system, as YAML
  staticlet get events -n kube-system -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			podName, err := eventsFor(cmd, &cf, forObj)
			if err != nil {
				return err
			}
			keep := func(e status.RecordedEvent) bool {
				return cf.namespace == "" || strings.HasPrefix(e.Pod, cf.namespace+"/")
			}
			if watch {
				return watchEvents(cmd, &cf, podName, &of, p, keep)
			}
			recorded, err := cf.client().RecordedEvents(cmd.Context(), podName)
			if err != nil {
				return err
			}
			recorded = slices.DeleteFunc(recorded, func(e status.RecordedEvent) bool { return !keep(e) })
			if p != nil {
				node, err := nodeName(cmd, &cf)
				if err != nil {
					return err
				}
				return printers.List(p, cmd.OutOrStdout(), "Event", status.CoreEvents(recorded, node))
			}
			events := make([]pod.Event, len(recorded))
			for i := range recorded {
				events[i] = recorded[i].Event
			}
			if of.Raw() != "" {
				return printers.Object(cmd.OutOrStdout(), events, of.Raw())
			}
			if len(events) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No events found.")
				return nil
			}
			return printers.Events(of.Writer(cmd.OutOrStdout()), events, time.Now())
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	f := cmd.Flags()
	of.add(cmd, printers.Formats{Own: []string{"", printers.FormatJSON, printers.FormatYAML}, Names: true}, true)
	f.BoolVarP(&watch, "watch", "w", false, "after listing the events, print each new one")
	f.StringVar(&forObj, "for", "", "only the events of this pod: pod/NAME")
	_ = cmd.RegisterFlagCompletionFunc("for", completePods(&cf, 0, "pod/"))
	return cmd
}

// eventsFor resolves --for pod/NAME to the pod's "namespace/name" while the
// pod exists (so a manifest's name works too), else to the name as given;
// "" when forObj is empty.
func eventsFor(cmd *cobra.Command, cf *clientFlags, forObj string) (string, error) {
	if forObj == "" {
		return "", nil
	}
	kind, name, ok := strings.Cut(forObj, "/")
	if !ok || name == "" || (kind != "pod" && kind != "pods" && kind != "po") {
		return "", fmt.Errorf("invalid --for %q: want pod/NAME", forObj)
	}
	p, err := cf.client().Pod(cmd.Context(), cf.podName(name))
	if errors.Is(err, status.ErrNotFound) {
		return cf.podName(name), nil
	}
	if err != nil {
		return "", err
	}
	return p.Namespace + "/" + p.Name, nil
}

// watchEvents prints the recent events of podName (every pod's when empty)
// that keep selects, then each new one, until interrupted.
func watchEvents(cmd *cobra.Command, cf *clientFlags, podName string, of *outputFlags, p *printers.Printer, keep func(status.RecordedEvent) bool) error {
	ctx, stop := watchContext(cmd.Context())
	defer stop()
	ew, err := printers.NewEventWatch(of.Writer(cmd.OutOrStdout()), of.Raw())
	if err != nil {
		return err
	}
	if p != nil {
		node, err := nodeName(cmd, cf)
		if err != nil {
			return err
		}
		ew.WithPrinter(p, node)
	}
	isMark := func(e status.RecordedEvent) bool { return e.Type == string(status.WatchBookmark) }
	err = cf.client().WatchEvents(ctx, podName, printWatch(isMark, keep, false, ew.Print))
	return endWatch(ctx, err)
}

// nodeName is the name of staticlet's node, which its events name as
// their source and the object of a node event.
func nodeName(cmd *cobra.Command, cf *clientFlags) (string, error) {
	n, err := cf.client().Node(cmd.Context())
	if err != nil {
		return "", err
	}
	return n.Name, nil
}
