package printers

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// eventSource is the From column of described events.
const eventSource = "staticlet"

// maxAnnotationLen is where describe cuts long annotation values, as
// kubectl does.
const maxAnnotationLen = 140

// describer writes kubectl-describe text: lines indented by level, with
// tab-separated cells aligned by a tabwriter. Write errors are kept and
// returned by flush.
type describer struct {
	tw *tabwriter.Writer
	// events and now are the pod's, for the probes' last failures.
	podEvents []pod.Event
	now       time.Time
}

func (d *describer) line(level int, format string, args ...any) {
	fmt.Fprintf(d.tw, strings.Repeat("  ", level)+format, args...)
}

// DescribePod writes p the way "kubectl describe pod" does, followed by its
// events (oldest first, as status.Store.Events returns them). Times are
// relative to now. staticlet pods have no controller, so there is no
// "Controlled By".
func DescribePod(w io.Writer, p *v1.Pod, events []pod.Event, now time.Time) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), podEvents: events, now: now}
	d.line(0, "Name:\t%s\n", p.Name)
	d.line(0, "Namespace:\t%s\n", p.Namespace)
	if p.Spec.Priority != nil {
		d.line(0, "Priority:\t%d\n", *p.Spec.Priority)
	}
	if p.Spec.PriorityClassName != "" {
		d.line(0, "Priority Class Name:\t%s\n", p.Spec.PriorityClassName)
	}
	if p.Spec.RuntimeClassName != nil {
		d.line(0, "Runtime Class Name:\t%s\n", *p.Spec.RuntimeClassName)
	}
	if p.Spec.NodeName == "" {
		d.line(0, "Node:\t%s\n", none)
	} else {
		d.line(0, "Node:\t%s/%s\n", p.Spec.NodeName, p.Status.HostIP)
	}
	if p.Status.StartTime != nil {
		d.line(0, "Start Time:\t%s\n", timeString(*p.Status.StartTime))
	}
	d.multiline("Labels", p.Labels, "=", 0)
	d.multiline("Annotations", p.Annotations, ": ", maxAnnotationLen)
	if p.DeletionTimestamp != nil {
		d.line(0, "Status:\tTerminating (lasts %s)\n", age(p.DeletionTimestamp.Time, now))
		if p.DeletionGracePeriodSeconds != nil {
			d.line(0, "Termination Grace Period:\t%ds\n", *p.DeletionGracePeriodSeconds)
		}
	} else {
		d.line(0, "Status:\t%s\n", orNone(string(p.Status.Phase)))
	}
	if p.Status.Reason != "" {
		d.line(0, "Reason:\t%s\n", p.Status.Reason)
	}
	if p.Status.Message != "" {
		d.line(0, "Message:\t%s\n", p.Status.Message)
	}
	if sc := p.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		d.line(0, "SeccompProfile:\t%s\n", sc.SeccompProfile.Type)
	}
	d.line(0, "IP:\t%s\n", p.Status.PodIP)
	if len(p.Status.PodIPs) == 0 {
		d.line(0, "IPs:\t%s\n", none)
	} else {
		d.line(0, "IPs:\n")
		for _, ip := range p.Status.PodIPs {
			d.line(1, "IP:\t%s\n", ip.IP)
		}
	}
	if len(p.Spec.InitContainers) > 0 {
		d.containers("Init Containers", p.Spec.InitContainers, p.Status.InitContainerStatuses, p.Annotations)
	}
	d.containers("Containers", p.Spec.Containers, p.Status.ContainerStatuses, p.Annotations)
	if len(p.Status.Conditions) > 0 {
		d.line(0, "Conditions:\n")
		d.line(1, "Type\tStatus\n")
		for _, c := range p.Status.Conditions {
			d.line(1, "%s \t%s \n", c.Type, c.Status)
		}
	}
	d.volumes(p.Spec.Volumes)
	qos := p.Status.QOSClass
	if qos == "" {
		qos = pod.QOSClass(&p.Spec)
	}
	d.line(0, "QoS Class:\t%s\n", qos)
	d.multiline("Node-Selectors", p.Spec.NodeSelector, "=", 0)
	d.tolerations(p.Spec.Tolerations)
	d.events(events, now)
	if err := d.tw.Flush(); err != nil {
		return fmt.Errorf("describing pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// multiline writes a sorted map one entry per line, the first after the
// title, "<none>" when empty; values longer than maxLen (when > 0) are cut.
func (d *describer) multiline(title string, m map[string]string, sep string, maxLen int) {
	d.line(0, "%s:\t", title)
	if len(m) == 0 {
		d.line(0, "%s\n", none)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			d.line(0, "\t")
		}
		v := m[k]
		if maxLen > 0 && (len(v) > maxLen || strings.Contains(v, "\n")) {
			v, _, _ = strings.Cut(v, "\n")
			if len(v) > maxLen {
				v = v[:maxLen]
			}
			v += "..."
		}
		d.line(0, "%s%s%s\n", k, sep, v)
	}
}

// containers writes a pod's containers of one sort (init or app); the
// pod's annotations name devices for each (see devices).
func (d *describer) containers(title string, specs []v1.Container, statuses []v1.ContainerStatus, annotations map[string]string) {
	d.line(0, "%s:\n", title)
	for _, c := range specs {
		var st *v1.ContainerStatus
		for i := range statuses {
			if statuses[i].Name == c.Name {
				st = &statuses[i]
				break
			}
		}
		d.line(1, "%s:\n", c.Name)
		if st != nil {
			d.line(2, "Container ID:\t%s\n", st.ContainerID)
		}
		d.line(2, "Image:\t%s\n", c.Image)
		if st != nil {
			d.line(2, "Image ID:\t%s\n", st.ImageID)
		}
		ports, hostPorts := describePorts(c.Ports)
		if strings.Contains(ports, ",") {
			d.line(2, "Ports:\t%s\n", ports)
		} else {
			d.line(2, "Port:\t%s\n", orNone(ports))
		}
		if strings.Contains(hostPorts, ",") {
			d.line(2, "Host Ports:\t%s\n", hostPorts)
		} else {
			d.line(2, "Host Port:\t%s\n", orNone(hostPorts))
		}
		d.argList("Command", c.Command)
		d.argList("Args", c.Args)
		if st != nil {
			d.state("State", st.State)
			if st.LastTerminationState.Terminated != nil {
				d.state("Last State", st.LastTerminationState)
			}
			d.line(2, "Ready:\t%s\n", boolString(st.Ready))
			if st.Started != nil && c.StartupProbe != nil {
				d.line(2, "Started:\t%s\n", boolString(*st.Started))
			}
			d.line(2, "Restart Count:\t%d\n", st.RestartCount)
		}
		d.resources(2, "Limits", c.Resources.Limits)
		d.resources(2, "Requests", c.Resources.Requests)
		d.devices(annotations, st)
		for _, pr := range []struct {
			name  string
			probe *v1.Probe
		}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
			if pr.probe != nil {
				d.line(2, "%s:\t%s\n", pr.name, describeProbe(pr.probe))
				if e, ok := lastProbeFailure(d.podEvents, c.Name, pr.name, st); ok {
					d.line(3, "Last Failure:\t%s ago: %s\n", age(e.Time, d.now), strings.TrimPrefix(e.Message, pr.name+" probe failed: "))
				}
			}
		}
		d.envFrom(c.EnvFrom)
		d.env(c.Env)
		d.mounts(c.VolumeMounts)
	}
}

func describePorts(ports []v1.ContainerPort) (container, host string) {
	var cs, hs []string
	for _, p := range ports {
		cs = append(cs, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
		hs = append(hs, fmt.Sprintf("%d/%s", p.HostPort, p.Protocol))
	}
	return strings.Join(cs, ", "), strings.Join(hs, ", ")
}

func (d *describer) argList(title string, args []string) {
	if len(args) == 0 {
		return
	}
	d.line(2, "%s:\n", title)
	for _, a := range args {
		for _, s := range strings.Split(a, "\n") {
			d.line(3, "%s\n", s)
		}
	}
}

func (d *describer) state(title string, s v1.ContainerState) {
	switch {
	case s.Running != nil:
		d.line(2, "%s:\tRunning\n", title)
		d.line(3, "Started:\t%s\n", timeString(s.Running.StartedAt))
	case s.Terminated != nil:
		t := s.Terminated
		d.line(2, "%s:\tTerminated\n", title)
		if t.Reason != "" {
			d.line(3, "Reason:\t%s\n", t.Reason)
		}
		if t.Message != "" {
			d.line(3, "Message:\t%s\n", t.Message)
		}
		d.line(3, "Exit Code:\t%d\n", t.ExitCode)
		if t.Signal > 0 {
			d.line(3, "Signal:\t%d\n", t.Signal)
		}
		d.line(3, "Started:\t%s\n", timeString(t.StartedAt))
		d.line(3, "Finished:\t%s\n", timeString(t.FinishedAt))
	default:
		d.line(2, "%s:\tWaiting\n", title)
		if s.Waiting != nil && s.Waiting.Reason != "" {
			d.line(3, "Reason:\t%s\n", s.Waiting.Reason)
		}
	}
}

// resources writes a resource list at level, sorted by name; nothing
// when it is empty.
func (d *describer) resources(level int, title string, rl v1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	d.line(level, "%s:\n", title)
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	slices.Sort(names)
	for _, n := range names {
		q := rl[v1.ResourceName(n)]
		d.line(level+1, "%s:\t%s\n", n, q.String())
	}
}

// lastProbeFailure finds the last failed run of container's probe typ
// (Liveness, Readiness, Startup) since the container last started, from
// its Unhealthy events.
func lastProbeFailure(events []pod.Event, container, typ string, st *v1.ContainerStatus) (pod.Event, bool) {
	if st == nil || st.State.Running == nil {
		return pod.Event{}, false
	}
	// StartedAt has whole seconds.
	since := st.State.Running.StartedAt.Time.Truncate(time.Second)
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Time.Before(since) {
			break
		}
		if e.Container == container && e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, typ+" probe failed: ") {
			return e, true
		}
	}
	return pod.Event{}, false
}

// describeProbe formats a probe as kubectl does, e.g.
// "http-get http://127.0.0.1:2381/health delay=10s timeout=15s period=10s #success=1 #failure=8".
func describeProbe(p *v1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %v %s", p.Exec.Command, attrs)
	case p.HTTPGet != nil:
		u := &url.URL{Scheme: strings.ToLower(string(p.HTTPGet.Scheme)), Path: p.HTTPGet.Path}
		if port := p.HTTPGet.Port.String(); port != "" {
			u.Host = net.JoinHostPort(p.HTTPGet.Host, port)
		} else {
			u.Host = p.HTTPGet.Host
		}
		return fmt.Sprintf("http-get %s %s", u, attrs)
	case p.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", p.TCPSocket.Host, p.TCPSocket.Port.String(), attrs)
	case p.GRPC != nil:
		if p.GRPC.Service != nil && *p.GRPC.Service != "" {
			return fmt.Sprintf("grpc <pod>:%d %s %s", p.GRPC.Port, *p.GRPC.Service, attrs)
		}
		return fmt.Sprintf("grpc <pod>:%d %s", p.GRPC.Port, attrs)
	}
	return "unknown " + attrs
}

func (d *describer) env(env []v1.EnvVar) {
	if len(env) == 0 {
		d.line(2, "Environment:\t%s\n", none)
		return
	}
	d.line(2, "Environment:\n")
	for _, e := range env {
		if e.ValueFrom == nil {
			lines := strings.Split(e.Value, "\n")
			d.line(3, "%s:\t%s\n", e.Name, lines[0])
			for _, l := range lines[1:] {
				d.line(3, "\t%s\n", l)
			}
			continue
		}
		switch vf := e.ValueFrom; {
		case vf.FieldRef != nil:
			d.line(3, "%s:\t (%s:%s)\n", e.Name, vf.FieldRef.APIVersion, vf.FieldRef.FieldPath)
		case vf.ResourceFieldRef != nil:
			d.line(3, "%s:\t (%s)\n", e.Name, vf.ResourceFieldRef.Resource)
		case vf.ConfigMapKeyRef != nil:
			r := vf.ConfigMapKeyRef
			d.line(3, "%s:\t<set to the key '%s' of config map '%s'>\tOptional: %t\n", e.Name, r.Key, r.Name, isTrue(r.Optional))
		case vf.SecretKeyRef != nil:
			r := vf.SecretKeyRef
			d.line(3, "%s:\t<set to the key '%s' in secret '%s'>\tOptional: %t\n", e.Name, r.Key, r.Name, isTrue(r.Optional))
		default:
			d.line(3, "%s:\t<set from an unsupported source>\n", e.Name)
		}
	}
}

// envFrom writes a container's envFrom sources as kubectl does: each
// object's name, kind, prefix and whether it is optional.
func (d *describer) envFrom(sources []v1.EnvFromSource) {
	if len(sources) == 0 {
		return
	}
	d.line(2, "Environment Variables from:\n")
	for _, s := range sources {
		name, kind, optional := "", "", false
		switch {
		case s.ConfigMapRef != nil:
			name, kind, optional = s.ConfigMapRef.Name, "ConfigMap", isTrue(s.ConfigMapRef.Optional)
		case s.SecretRef != nil:
			name, kind, optional = s.SecretRef.Name, "Secret", isTrue(s.SecretRef.Optional)
		default:
			continue
		}
		if s.Prefix != "" {
			kind += fmt.Sprintf(" with prefix '%s'", s.Prefix)
		}
		d.line(3, "%s\t%s\tOptional: %t\n", name, kind, optional)
	}
}

// isTrue is the value of an optional boolean, false when unset.
func isTrue(b *bool) bool { return b != nil && *b }

func (d *describer) mounts(mounts []v1.VolumeMount) {
	if len(mounts) == 0 {
		d.line(2, "Mounts:\t%s\n", none)
		return
	}
	d.line(2, "Mounts:\n")
	sorted := slices.Clone(mounts)
	slices.SortStableFunc(sorted, func(a, b v1.VolumeMount) int { return strings.Compare(a.MountPath, b.MountPath) })
	for _, m := range sorted {
		flags := []string{"rw"}
		if m.ReadOnly {
			flags[0] = "ro"
		}
		if m.SubPath != "" {
			flags = append(flags, fmt.Sprintf("path=%q", m.SubPath))
		}
		d.line(3, "%s from %s (%s)\n", m.MountPath, m.Name, strings.Join(flags, ","))
	}
}

func (d *describer) volumes(vols []v1.Volume) {
	if len(vols) == 0 {
		d.line(0, "Volumes:\t%s\n", none)
		return
	}
	d.line(0, "Volumes:\n")
	for _, v := range vols {
		d.line(1, "%s:\n", v.Name)
		switch {
		case v.HostPath != nil:
			d.line(2, "Type:\tHostPath (bare host directory volume)\n")
			d.line(2, "Path:\t%s\n", v.HostPath.Path)
			t := ""
			if v.HostPath.Type != nil {
				t = string(*v.HostPath.Type)
			}
			d.line(2, "HostPathType:\t%s\n", t)
		case v.EmptyDir != nil:
			d.line(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n")
			d.line(2, "Medium:\t%s\n", v.EmptyDir.Medium)
			limit := "<unset>"
			if v.EmptyDir.SizeLimit != nil {
				limit = v.EmptyDir.SizeLimit.String()
			}
			d.line(2, "SizeLimit:\t%s\n", limit)
		case v.ConfigMap != nil:
			d.line(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n")
			d.line(2, "Name:\t%s\n", v.ConfigMap.Name)
			d.line(2, "Optional:\t%t\n", isTrue(v.ConfigMap.Optional))
		case v.Secret != nil:
			d.line(2, "Type:\tSecret (a volume populated by a Secret)\n")
			d.line(2, "SecretName:\t%s\n", v.Secret.SecretName)
			d.line(2, "Optional:\t%t\n", isTrue(v.Secret.Optional))
		case v.Projected != nil:
			d.projected(v.Projected)
		case v.DownwardAPI != nil:
			d.line(2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n")
			d.line(2, "Items:\n")
			for _, it := range v.DownwardAPI.Items {
				d.downwardItem(it)
			}
		default:
			d.line(2, "Type:\t<unknown>\n")
		}
	}
}

// projected writes a projected volume's sources as kubectl does.
func (d *describer) projected(p *v1.ProjectedVolumeSource) {
	d.line(2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
	for _, s := range p.Sources {
		switch {
		case s.ConfigMap != nil:
			d.line(2, "ConfigMapName:\t%s\n", s.ConfigMap.Name)
			d.line(2, "ConfigMapOptional:\t%t\n", isTrue(s.ConfigMap.Optional))
		case s.Secret != nil:
			d.line(2, "SecretName:\t%s\n", s.Secret.Name)
			d.line(2, "SecretOptionalName:\t%t\n", isTrue(s.Secret.Optional))
		case s.DownwardAPI != nil:
			d.line(2, "DownwardAPI:\ttrue\n")
		}
	}
}

// downwardItem writes what a downwardAPI file holds and its path.
func (d *describer) downwardItem(it v1.DownwardAPIVolumeFile) {
	switch {
	case it.FieldRef != nil:
		d.line(3, "%s -> %s\n", it.FieldRef.FieldPath, it.Path)
	case it.ResourceFieldRef != nil:
		d.line(3, "%s -> %s\n", it.ResourceFieldRef.Resource, it.Path)
	}
}

func (d *describer) tolerations(ts []v1.Toleration) {
	d.line(0, "Tolerations:\t")
	if len(ts) == 0 {
		d.line(0, "%s\n", none)
		return
	}
	for i, t := range ts {
		if i > 0 {
			d.line(0, "\t")
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == v1.TolerationOpExists && t.Value == "" {
			s += " op=Exists"
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		d.line(0, "%s\n", s)
	}
}

// events writes the events table. Repeats of an event (same type, reason,
// container and message) are shown once, as kubectl shows an aggregated
// event: "(x3 over 5m)", at the place of the latest one.
func (d *describer) events(events []pod.Event, now time.Time) {
	if len(events) == 0 {
		d.line(0, "Events:\t%s\n", none)
		return
	}
	rows := aggregateEvents(events)
	// Cells of this table should not align with the lines above it.
	d.tw.Flush()
	d.line(0, "Events:\n")
	d.line(1, "Type\tReason\tAge\tFrom\tMessage\n")
	d.line(1, "----\t------\t----\t----\t-------\n")
	for _, a := range rows {
		ago := age(a.last, now)
		if a.count > 1 {
			ago = fmt.Sprintf("%s (x%d over %s)", ago, a.count, age(a.first, a.last))
		}
		d.line(1, "%s\t%s\t%s\t%s\t%s\n", a.e.Type, a.e.Reason, ago, eventSource, strings.TrimSpace(a.e.Message))
	}
}

func boolString(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
