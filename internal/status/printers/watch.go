package printers

import (
	"fmt"
	"io"
	"time"

	"github.com/liggitt/tabwriter"

	"github.com/staticlet/staticlet/internal/status"
)

// PodWatchOptions choose what a PodWatch prints.
type PodWatchOptions struct {
	// Output is "" or "wide" for table rows, "json" or "yaml" for
	// objects; ignored when Printer is set.
	Output string
	// Printer, when set, prints each pod (or each watch event with
	// WatchEvents) through one of kubectl's printers, aligned as kubectl
	// aligns them in a watch.
	Printer *Printer
	// WatchEvents prints the type of each change, as kubectl's
	// --output-watch-events: an EVENT column before the table's, or the
	// whole watch event instead of the pod with json and yaml.
	WatchEvents bool
}

// PodWatch prints a pod watch as `kubectl get pods -w` does: the table
// header once, then a row per change (or each object as JSON or YAML, YAML
// documents separated by "---"). It keeps what it printed: use it from one
// goroutine.
type PodWatch struct {
	w       io.Writer
	opts    PodWatchOptions
	printed int // batches of rows printed
	objects objectStream
	aligned *tabwriter.Writer // Printer's output, when it is set
}

// NewPodWatch returns a PodWatch writing to w, or an error for an unknown
// output format.
func NewPodWatch(w io.Writer, opts PodWatchOptions) (*PodWatch, error) {
	if opts.Printer != nil {
		return &PodWatch{w: w, opts: opts, aligned: watchWriter(w)}, nil
	}
	switch opts.Output {
	case "", "wide", "json", "yaml":
		return &PodWatch{w: w, opts: opts, objects: objectStream{w: w, format: opts.Output}}, nil
	default:
		return nil, fmt.Errorf("unknown output format %q: use wide, json or yaml", opts.Output)
	}
}

// Print writes a batch of watch events. Table rows of one batch are
// aligned with each other, and the header comes with the first batch, so
// that the initial pods print as one table, then each change as a row of
// its own (ages relative to now). Events of type BOOKMARK are skipped.
func (pw *PodWatch) Print(events []status.PodWatchEvent, now time.Time) error {
	var pods []status.PodWatchEvent
	for _, ev := range events {
		if ev.Type != status.WatchBookmark && ev.Object != nil {
			pods = append(pods, ev)
		}
	}
	if pw.opts.Printer != nil {
		return pw.printEach(pods)
	}
	if pw.opts.Output == "json" || pw.opts.Output == "yaml" {
		return pw.printObjects(pods)
	}
	if len(pods) == 0 && pw.printed > 0 {
		return nil
	}
	wide := pw.opts.Output == "wide"
	tw := newTable(pw.w)
	if pw.printed == 0 {
		if pw.opts.WatchEvents {
			tw.header("EVENT", podHeader(wide))
		} else {
			tw.header(podHeader(wide))
		}
	}
	for _, ev := range pods {
		if pw.opts.WatchEvents {
			fmt.Fprintf(tw, "%s\t", ev.Type)
		}
		fmt.Fprintln(tw, podLine(ev.Object, wide, now))
	}
	pw.printed++
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing pods: %w", err)
	}
	return nil
}

// printObjects writes each event's pod, or the event itself with
// WatchEvents.
func (pw *PodWatch) printObjects(events []status.PodWatchEvent) error {
	for _, ev := range events {
		var obj any = ev.Object
		if pw.opts.WatchEvents {
			obj = ev
		}
		if err := pw.objects.write(obj); err != nil {
			return err
		}
	}
	return nil
}

// printEach prints each event's pod, or the event itself with
// WatchEvents, through Printer, as kubectl prints a watch: the pods it
// lists first one by one, as it prints each later change.
func (pw *PodWatch) printEach(events []status.PodWatchEvent) error {
	for _, ev := range events {
		var err error
		if pw.opts.WatchEvents {
			err = pw.opts.Printer.WatchEvent(pw.aligned, string(ev.Type), "Pod", ev.Object)
		} else {
			err = pw.opts.Printer.Object(pw.aligned, "Pod", ev.Object)
		}
		if err != nil {
			return err
		}
	}
	if err := pw.aligned.Flush(); err != nil {
		return fmt.Errorf("printing pods: %w", err)
	}
	return nil
}

// objectStream writes objects one after another as JSON or YAML, YAML
// documents separated by "---" as kubectl separates them.
type objectStream struct {
	w      io.Writer
	format string
	n      int // objects written
}

func (s *objectStream) write(obj any) error {
	if s.format == "yaml" && s.n > 0 {
		if _, err := io.WriteString(s.w, "---\n"); err != nil {
			return fmt.Errorf("writing yaml: %w", err)
		}
	}
	s.n++
	return Object(s.w, obj, s.format)
}
