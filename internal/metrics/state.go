package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// The gauges read at each scrape from the reported state.
var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running container (the kubelet: a running pod sandbox).", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running, by state.", []string{"container_state"}, nil)
	podsDesc = prometheus.NewDesc("staticlet_pods",
		"Number of pods, by phase.", []string{"phase"}, nil)
	restartsDesc = prometheus.NewDesc("staticlet_container_restarts_total",
		"Restarts of each container of each pod, its status' restartCount.", []string{"namespace", "pod", "container"}, nil)
	manifestErrorsDesc = prometheus.NewDesc("staticlet_manifest_errors",
		"Number of manifest files (or URLs) of a source that are rejected.", []string{"source"}, nil)
	nodeConditionDesc = prometheus.NewDesc("staticlet_node_status_condition",
		"The node's conditions (Ready, DiskPressure), as kube-state-metrics' kube_node_status_condition: 1 on the series of the condition's status.",
		[]string{"condition", "status"}, nil)
	devicesDesc = prometheus.NewDesc("staticlet_devices",
		"Number of CDI devices of the node, by kind and state: free, allocated (a container holds it alone, by its limits) or shared (only pods' cdi.k8s.io/ annotations name it).",
		[]string{"kind", "state"}, nil)
)

// DeviceCounts are how many CDI devices of one kind are in each state:
// held by no container (Free), held by a container alone, by its
// resource limits (Allocated), or used only by the containers of pods
// whose CDI annotations name it (Shared).
type DeviceCounts struct {
	Kind                    string
	Free, Allocated, Shared int
}

// conditionStatuses are the statuses of a node condition, each reported.
var conditionStatuses = []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown}

// phases are the pod phases, each reported even when no pod has it.
var phases = []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}

// containerStates are the kubelet's container states, each reported even
// when no container is in it.
var containerStates = []string{"created", "running", "exited", "unknown"}

// stateCollector makes the gauges of the pods and manifests as reported
// at the moment of the scrape.
type stateCollector struct {
	pods           func() []v1.Pod
	manifestErrors func() map[string]int
	nodeConditions func() []v1.NodeCondition
	devices        func() []DeviceCounts
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runningPodsDesc, runningContainersDesc, podsDesc, restartsDesc, manifestErrorsDesc, nodeConditionDesc, devicesDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.pods != nil {
		s := countPods(c.pods())
		ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(s.running))
		for _, st := range containerStates {
			ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(s.containers[st]), st)
		}
		for _, ph := range phases {
			ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(s.phases[ph]), string(ph))
		}
		for _, r := range s.restarts {
			ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(r.count), r.namespace, r.pod, r.container)
		}
	}
	if c.manifestErrors != nil {
		for source, n := range c.manifestErrors() {
			ch <- prometheus.MustNewConstMetric(manifestErrorsDesc, prometheus.GaugeValue, float64(n), source)
		}
	}
	if c.nodeConditions != nil {
		for _, cond := range c.nodeConditions() {
			for _, st := range conditionStatuses {
				v := 0.0
				if cond.Status == st {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(nodeConditionDesc, prometheus.GaugeValue, v, string(cond.Type), strings.ToLower(string(st)))
			}
		}
	}
	if c.devices != nil {
		for _, d := range c.devices() {
			for _, st := range []struct {
				state string
				n     int
			}{{"free", d.Free}, {"allocated", d.Allocated}, {"shared", d.Shared}} {
				ch <- prometheus.MustNewConstMetric(devicesDesc, prometheus.GaugeValue, float64(st.n), d.Kind, st.state)
			}
		}
	}
}

// podCounts are the pod gauges' values.
type podCounts struct {
	running    int
	phases     map[v1.PodPhase]int
	containers map[string]int // by container state
	restarts   []restarts
}

// restarts is one container's restart count.
type restarts struct {
	namespace, pod, container string
	count                     int32
}

// countPods counts pods by phase (no phase yet is Pending), the running
// pods (phase Running, or a container running), and containers by the
// kubelet's container states: running; exited (terminated, or waiting to
// be restarted after it terminated); created (waiting, with a container
// already made); a container not yet made is not counted.
func countPods(pods []v1.Pod) podCounts {
	s := podCounts{phases: map[v1.PodPhase]int{}, containers: map[string]int{}}
	for i := range pods {
		p := &pods[i]
		phase := p.Status.Phase
		if phase == "" {
			phase = v1.PodPending
		}
		s.phases[phase]++
		running := phase == v1.PodRunning
		for _, statuses := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				st := containerState(cs)
				if st != "" {
					s.containers[st]++
				}
				running = running || st == "running"
				s.restarts = append(s.restarts, restarts{p.Namespace, p.Name, cs.Name, cs.RestartCount})
			}
		}
		if running {
			s.running++
		}
	}
	return s
}

// containerState is the kubelet's state of the container cs reports, ""
// when there is none yet.
func containerState(cs v1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return "running"
	case cs.State.Terminated != nil:
		return "exited"
	case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		return "exited"
	case cs.State.Waiting != nil && cs.ContainerID != "":
		return "created"
	case cs.State.Waiting != nil:
		return ""
	}
	return "unknown"
}
