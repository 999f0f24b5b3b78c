package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/liggitt/tabwriter"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// eventGroup is the repeats of one event (same pod, type, reason, container
// and message), shown as one row as kubectl shows an aggregated event.
type eventGroup struct {
	e           pod.Event // the latest
	first, last time.Time
	count       int
}

type eventKey struct{ pod, object, typ, reason, container, message string }

// eventGroups aggregates events into groups, kept in the order of each
// group's latest event.
type eventGroups struct {
	byKey map[eventKey]*eventGroup
	rows  []*eventGroup
}

func newEventGroups() *eventGroups {
	return &eventGroups{byKey: make(map[eventKey]*eventGroup)}
}

// add counts e in its group, moves the group last and returns it.
func (g *eventGroups) add(e pod.Event) *eventGroup {
	k := eventKey{e.Pod, e.Object, e.Type, e.Reason, e.Container, e.Message}
	a, ok := g.byKey[k]
	if !ok {
		a = &eventGroup{first: e.Time}
		g.byKey[k] = a
	} else {
		g.rows = slices.DeleteFunc(g.rows, func(r *eventGroup) bool { return r == a })
	}
	a.e = e
	a.count++
	a.last = e.Time
	g.rows = append(g.rows, a)
	return a
}

// aggregateEvents groups repeated events, in the order of each group's
// latest event.
func aggregateEvents(events []pod.Event) []*eventGroup {
	g := newEventGroups()
	for _, e := range events {
		g.add(e)
	}
	return g.rows
}

const eventHeader = "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE"

// eventLine is the row of a group in kubectl's events table: LAST SEEN is
// the age of the latest event, with "(xN over AGE)" for repeats, AGE being
// the age of the first, as kubectl shows an event's count.
func eventLine(a *eventGroup, now time.Time) string {
	seen := age(a.last, now)
	if a.count > 1 {
		seen = fmt.Sprintf("%s (x%d over %s)", seen, a.count, age(a.first, now))
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", seen, a.e.Type, a.e.Reason, eventObject(a.e), strings.TrimSpace(a.e.Message))
}

// eventObject is the OBJECT column: the pod, else what a node-level event
// names, else "node".
func eventObject(e pod.Event) string {
	switch {
	case e.Pod != "":
		_, name, _ := strings.Cut(e.Pod, "/")
		return "pod/" + name
	case e.Object != "":
		return e.Object
	default:
		return "node"
	}
}

// Events writes events (oldest first, as status.Store.Events returns them)
// as kubectl's "get events" table: LAST SEEN TYPE REASON OBJECT MESSAGE,
// repeats on one row at the place of the latest. Ages are relative to now.
func Events(w io.Writer, events []pod.Event, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	tw := newTable(w)
	tw.header(eventHeader)
	for _, a := range aggregateEvents(events) {
		fmt.Fprintln(tw, eventLine(a, now))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing events: %w", err)
	}
	return nil
}

// EventWatch prints an event watch as `kubectl get events -w` does: the
// header once, then for each batch a row per event group it touched, with
// the group's count so far. It keeps the groups: use it from one
// goroutine.
type EventWatch struct {
	w       io.Writer
	groups  *eventGroups
	printed bool // the header
	objects *objectStream
	printer *Printer          // set by WithPrinter
	aligned *tabwriter.Writer // printer's output
	node    string            // the node of the events, for printer
}

// NewEventWatch returns an EventWatch writing to w in format "" (the
// table), "json" or "yaml" (each event as an object), or an error for
// another format.
func NewEventWatch(w io.Writer, format string) (*EventWatch, error) {
	ew := &EventWatch{w: w, groups: newEventGroups()}
	switch format {
	case "":
	case "json", "yaml":
		ew.objects = &objectStream{w: w, format: format}
	default:
		return nil, fmt.Errorf("unknown output format %q: use json or yaml", format)
	}
	return ew, nil
}

// WithPrinter has ew print, instead of rows, each event of node as the
// core/v1 Event the Kubernetes API serves (see status.CoreEvent), with
// the count of its repeats so far, through p, one of kubectl's printers,
// aligned as kubectl aligns them in a watch.
func (ew *EventWatch) WithPrinter(p *Printer, node string) *EventWatch {
	ew.printer, ew.aligned, ew.node = p, watchWriter(ew.w), node
	return ew
}

// Print writes a batch of events, oldest first: the initial ones as one
// table with the header, then each later one as it comes.
func (ew *EventWatch) Print(events []status.RecordedEvent, now time.Time) error {
	if ew.printer != nil {
		for i := range events {
			ce := status.CoreEvent(&events[i], ew.node)
			if err := ew.printer.Object(ew.aligned, "Event", &ce); err != nil {
				return err
			}
		}
		if err := ew.aligned.Flush(); err != nil {
			return fmt.Errorf("printing events: %w", err)
		}
		return nil
	}
	if ew.objects != nil {
		for _, e := range events {
			if err := ew.objects.write(e.Event); err != nil {
				return err
			}
		}
		return nil
	}
	var touched []*eventGroup
	for _, e := range events {
		a := ew.groups.add(e.Event)
		touched = slices.DeleteFunc(touched, func(r *eventGroup) bool { return r == a })
		touched = append(touched, a)
	}
	if len(touched) == 0 && ew.printed {
		return nil
	}
	tw := newTable(ew.w)
	if !ew.printed {
		tw.header(eventHeader)
		ew.printed = true
	}
	for _, a := range touched {
		fmt.Fprintln(tw, eventLine(a, now))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing events: %w", err)
	}
	return nil
}
