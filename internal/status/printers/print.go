package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/status"
)

// none is what kubectl prints for an empty cell.
const none = "<none>"

// table is the tabwriter kubectl uses for tables, which knows whether to
// print their headers.
type table struct {
	*tabwriter.Writer
	noHeaders bool // kubectl's --no-headers: see Output.Writer
}

// newTable returns a table writing to w, without headers when w came
// from Output.Writer with NoHeaders.
func newTable(w io.Writer) *table {
	h, noHeaders := w.(headless)
	if noHeaders {
		w = h.Writer
	}
	return &table{Writer: tabwriter.NewWriter(w, 6, 4, 3, ' ', 0), noHeaders: noHeaders}
}

// header prints a header line made of cells, separated by tabs, unless
// the table is without headers.
func (t *table) header(cells ...string) {
	if !t.noHeaders {
		fmt.Fprintln(t, strings.Join(cells, "\t"))
	}
}

// Pods writes pods as kubectl's "get pods" table: NAME READY STATUS
// RESTARTS AGE, and with wide also IP and NODE. Ages are relative to now.
func Pods(w io.Writer, pods []v1.Pod, wide bool, now time.Time) error {
	tw := newTable(w)
	tw.header(podHeader(wide))
	for i := range pods {
		fmt.Fprintln(tw, podLine(&pods[i], wide, now))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing pods: %w", err)
	}
	return nil
}

// podHeader is the header line of the pods table, cells separated by tabs.
func podHeader(wide bool) string {
	if wide {
		return "NAME\tREADY\tSTATUS\tRESTARTS\tAGE\tIP\tNODE"
	}
	return "NAME\tREADY\tSTATUS\tRESTARTS\tAGE"
}

// podLine is the line of pod p in the pods table, cells separated by tabs.
func podLine(p *v1.Pod, wide bool, now time.Time) string {
	row := podRow(p, now)
	line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Name, row.ready, row.status, row.restarts, podAge(p, now))
	if wide {
		line += fmt.Sprintf("\t%s\t%s", orNone(p.Status.PodIP), orNone(p.Spec.NodeName))
	}
	return line
}

// row holds the computed columns of one pod.
type row struct {
	ready    string // "ready/total"
	status   string
	restarts string
}

// podRow computes READY, STATUS and RESTARTS the way kubectl's pod printer
// does: STATUS starts from the phase (or status.reason), is overridden by
// the first init container that has not succeeded ("Init:1/2",
// "Init:CrashLoopBackOff", "Init:Error"), else by the waiting or terminated
// reason of an app container, and is "Terminating" once a non-terminal pod
// has a deletion timestamp. Restartable init containers (sidecars) count as
// app containers.
func podRow(p *v1.Pod, now time.Time) row {
	restarts, sidecarRestarts := 0, 0
	var lastRestart, lastSidecarRestart time.Time
	total := len(p.Spec.Containers)
	ready := 0

	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	if reason == "" {
		reason = string(v1.PodPending)
	}

	initSpecs := make(map[string]*v1.Container, len(p.Spec.InitContainers))
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isSidecar(c) {
			total++
		}
	}

	initializing := false
	for i, cs := range p.Status.InitContainerStatuses {
		restarts += int(cs.RestartCount)
		lastRestart = later(lastRestart, cs.LastTerminationState)
		sidecar := isSidecar(initSpecs[cs.Name])
		if sidecar {
			sidecarRestarts += int(cs.RestartCount)
			lastSidecarRestart = later(lastSidecarRestart, cs.LastTerminationState)
		}
		st := cs.State
		switch {
		case st.Terminated != nil && st.Terminated.ExitCode == 0:
			continue
		case sidecar && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case st.Terminated != nil:
			switch {
			case st.Terminated.Reason != "":
				reason = "Init:" + st.Terminated.Reason
			case st.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", st.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", st.Terminated.ExitCode)
			}
		case st.Waiting != nil && st.Waiting.Reason != "" && st.Waiting.Reason != "PodInitializing":
			reason = "Init:" + st.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || conditionTrue(p, v1.PodInitialized) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning := false
		// Backwards, so that the first container's reason wins, as in kubectl.
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := p.Status.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			lastRestart = later(lastRestart, cs.LastTerminationState)
			st := cs.State
			switch {
			case st.Waiting != nil && st.Waiting.Reason != "":
				reason = st.Waiting.Reason
			case st.Terminated != nil && st.Terminated.Reason != "":
				reason = st.Terminated.Reason
			case st.Terminated != nil && st.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", st.Terminated.Signal)
			case st.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", st.Terminated.ExitCode)
			case cs.Ready && st.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// A completed container next to one still running: the pod runs.
		if reason == "Completed" && hasRunning {
			if conditionTrue(p, v1.PodReady) {
				reason = string(v1.PodRunning)
			} else {
				reason = "NotReady"
			}
		}
	}

	if p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
		reason = "Terminating"
	}

	rs := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		rs = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestart, now))
	}
	return row{ready: fmt.Sprintf("%d/%d", ready, total), status: reason, restarts: rs}
}

// isSidecar reports whether c is a restartable init container.
func isSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// later returns the later of t and the finish time of a last termination.
func later(t time.Time, last v1.ContainerState) time.Time {
	if last.Terminated != nil && last.Terminated.FinishedAt.After(t) {
		return last.Terminated.FinishedAt.Time
	}
	return t
}

// podAge is the pod's age from its start time, or its creation time before
// it has started.
func podAge(p *v1.Pod, now time.Time) string {
	if p.Status.StartTime != nil && !p.Status.StartTime.IsZero() {
		return age(p.Status.StartTime.Time, now)
	}
	return age(p.CreationTimestamp.Time, now)
}

// age formats now-t as kubectl does (5s, 3m20s, 2d4h), "<unknown>" for a
// zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// conditionTrue reports whether p has condition t with status True.
func conditionTrue(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// Manifests writes the manifest results as a table: PATH PODS ERROR,
// with a leading SOURCE column when they come from more than one source,
// and OBJECTS (the ConfigMaps and Secrets in force from each file, as
// "configmap/namespace/name") after PODS when a file has any.
// A result without a path (the source as a whole failed) shows the source
// as its path. Multi-line errors are joined on one line, followed by the
// time of the last success when there is one (a URL that stopped working).
func Manifests(w io.Writer, manifests []status.Manifest) error {
	now := time.Now()
	sources := map[string]bool{}
	for _, m := range manifests {
		sources[m.Source] = true
	}
	withSource := len(sources) > 1
	withObjects := slices.ContainsFunc(manifests, func(m status.Manifest) bool { return len(m.Objects) > 0 })
	tw := newTable(w)
	var header []string
	if withSource {
		header = append(header, "SOURCE")
	}
	header = append(header, "PATH", "PODS")
	if withObjects {
		header = append(header, "OBJECTS")
	}
	tw.header(append(header, "ERROR")...)
	for _, m := range manifests {
		if withSource {
			fmt.Fprintf(tw, "%s\t", m.Source)
		}
		errText := strings.Join(strings.Fields(m.Error), " ")
		if errText != "" && !m.LastSuccess.IsZero() {
			errText += fmt.Sprintf(" (last success %s ago, at %s)",
				duration.HumanDuration(now.Sub(m.LastSuccess)), m.LastSuccess.Format(time.RFC3339))
		}
		path := m.Path
		if path == "" { // an error of the source as a whole
			path = m.Source
		}
		fmt.Fprintf(tw, "%s\t%s\t", path, orNone(strings.Join(m.Pods, ",")))
		if withObjects {
			fmt.Fprintf(tw, "%s\t", orNone(strings.Join(m.Objects, ",")))
		}
		fmt.Fprintf(tw, "%s\n", orNone(errText))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing manifests: %w", err)
	}
	return nil
}

// Object writes obj (a Pod, a PodList, manifests, events) as "json"
// (indented like kubectl) or "yaml".
func Object(w io.Writer, obj any, format string) error {
	var b []byte
	var err error
	switch format {
	case "json":
		b, err = json.MarshalIndent(obj, "", "    ")
		b = append(b, '\n')
	case "yaml":
		b, err = yaml.Marshal(obj)
	default:
		return fmt.Errorf("unknown output format %q: want json or yaml", format)
	}
	if err != nil {
		return fmt.Errorf("encoding %s: %w", format, err)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", format, err)
	}
	return nil
}

// timeString formats a timestamp as kubectl describe does.
func timeString(t metav1.Time) string {
	return t.Time.Format(time.RFC1123Z)
}

// PodCells returns the READY, STATUS, RESTARTS and AGE cells of p as the
// pods table prints them, for other tables of pods (the Kubernetes API's
// Table form).
func PodCells(p *v1.Pod, now time.Time) (ready, status, restarts, age string) {
	row := podRow(p, now)
	return row.ready, row.status, row.restarts, podAge(p, now)
}

// Age formats now-t as kubectl's AGE columns do, "<unknown>" for a zero
// time.
func Age(t, now time.Time) string { return age(t, now) }
