package pod

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Action is what staticlet does to a pod when its definition changes.
type Action string

// The actions Compare decides, in the words `staticlet diff` prints.
const (
	// ActionNone: the pod runs on untouched.
	ActionNone Action = "nothing"
	// ActionRestart: some app containers are recreated, started or stopped
	// in the running sandbox; the others run on.
	ActionRestart Action = "restart containers"
	// ActionReplace: the whole pod is stopped and made again.
	ActionReplace Action = "replace the pod"
	// ActionAdd: a pod that does not run yet is started.
	ActionAdd Action = "add"
	// ActionRemove: a running pod is stopped and removed.
	ActionRemove Action = "remove"
)

// ContainerAction is what happens to one app container in ActionRestart.
type ContainerAction string

// The container actions.
const (
	// ContainerRestart: its definition changed; it is stopped and started
	// again with the new one.
	ContainerRestart ContainerAction = "restart"
	// ContainerStart: the new definition adds it.
	ContainerStart ContainerAction = "start"
	// ContainerStop: the new definition drops it.
	ContainerStop ContainerAction = "stop"
)

// ContainerChange is one app container touched by a change.
type ContainerChange struct {
	Name   string
	Action ContainerAction
	// Fields are the container's fields that differ, e.g. "args", for
	// ContainerRestart.
	Fields []string
}

// Change is what staticlet does when a pod's definition old is replaced by
// new, as Compare decides it.
type Change struct {
	Action Action
	// Fields names the pod-level fields that differ, for ActionReplace:
	// "spec.volumes", "metadata.labels[app]", "spec.initContainers[setup].args",
	// "spec.containers[web].ports.hostPort".
	Fields []string
	// Containers are the app containers restarted, started or stopped, for
	// ActionRestart, in the order of the new spec, then the ones dropped.
	Containers []ContainerChange
	// Notes are changes that restart nothing but change how the pod is
	// run (staticlet's own annotations).
	Notes []string
}

// Compare decides what staticlet does when pod old (nil: none runs) is
// replaced by new (nil: its manifest no longer defines it). It is the
// daemon's decision, made on the same hashes the reconciler compares with
// the running containers' labels: a different SandboxHash replaces the pod;
// otherwise each app container whose ContainerHash differs is recreated in
// the running sandbox, one that is new is started and one that is gone is
// stopped. The fields are named by comparing the parts each hash covers.
// An edit that changes neither (a re-read, with a new config.seen
// annotation; a new UID) does nothing.
func Compare(old, new *Pod) Change {
	switch {
	case old == nil && new == nil:
		return Change{Action: ActionNone}
	case old == nil:
		return Change{Action: ActionAdd}
	case new == nil:
		return Change{Action: ActionRemove}
	}
	ch := Change{Action: ActionNone, Notes: ownAnnotationNotes(old.Pod, new.Pod)}
	if old.SandboxHash != new.SandboxHash {
		ch.Action = ActionReplace
		ch.Fields = sandboxFields(sandboxScopeOf(old.Pod), sandboxScopeOf(new.Pod))
		if len(ch.Fields) == 0 {
			// The scope compared equal field by field, yet hashed apart:
			// say so rather than name nothing.
			ch.Fields = []string{"pod-level fields"}
		}
		return ch
	}
	oldByName := map[string]*v1.Container{}
	for i := range old.Spec.Containers {
		oldByName[old.Spec.Containers[i].Name] = &old.Spec.Containers[i]
	}
	for i := range new.Spec.Containers {
		c := &new.Spec.Containers[i]
		was, ok := oldByName[c.Name]
		delete(oldByName, c.Name)
		switch {
		case !ok:
			ch.Containers = append(ch.Containers, ContainerChange{Name: c.Name, Action: ContainerStart})
		case ContainerHash(was) != ContainerHash(c):
			ch.Containers = append(ch.Containers, ContainerChange{Name: c.Name, Action: ContainerRestart, Fields: changedKeys(toMap(was), toMap(c))})
		}
	}
	for i := range old.Spec.Containers {
		if name := old.Spec.Containers[i].Name; oldByName[name] != nil {
			ch.Containers = append(ch.Containers, ContainerChange{Name: name, Action: ContainerStop})
		}
	}
	if len(ch.Containers) > 0 {
		ch.Action = ActionRestart
	}
	return ch
}

// Affects tells whether the change stops container name (an init or app
// container) of the old pod: it is replaced, removed, or the container is
// restarted or stopped.
func (ch Change) Affects(name string) bool {
	switch ch.Action {
	case ActionReplace, ActionRemove:
		return true
	case ActionRestart:
		return slices.ContainsFunc(ch.Containers, func(c ContainerChange) bool { return c.Name == name && c.Action != ContainerStart })
	}
	return false
}

// Reason returns the change in one line, e.g. "replace the pod: pod-level
// field spec.volumes changed" or "restart containers: app (args changed)".
func (ch Change) Reason() string {
	switch ch.Action {
	case ActionReplace:
		word := "field"
		if len(ch.Fields) > 1 {
			word = "fields"
		}
		return fmt.Sprintf("%s: pod-level %s %s changed", ch.Action, word, strings.Join(ch.Fields, ", "))
	case ActionRestart:
		parts := make([]string, len(ch.Containers))
		for i, c := range ch.Containers {
			switch c.Action {
			case ContainerRestart:
				parts[i] = fmt.Sprintf("restart container %s (%s changed)", c.Name, strings.Join(c.Fields, ", "))
			case ContainerStart:
				parts[i] = fmt.Sprintf("start new container %s", c.Name)
			case ContainerStop:
				parts[i] = fmt.Sprintf("stop removed container %s", c.Name)
			}
		}
		return strings.Join(parts, "; ")
	}
	return string(ch.Action)
}

// sandboxFields names the fields in which two pod-level scopes differ.
func sandboxFields(a, b sandboxScope) []string {
	var out []string
	if a.Namespace != b.Namespace {
		out = append(out, "metadata.namespace")
	}
	if a.Name != b.Name {
		out = append(out, "metadata.name")
	}
	for _, k := range changedKeys(toMap(a.Labels), toMap(b.Labels)) {
		out = append(out, "metadata.labels["+k+"]")
	}
	for _, k := range changedKeys(toMap(a.Annotations), toMap(b.Annotations)) {
		out = append(out, "metadata.annotations["+k+"]")
	}
	sa, sb := toMap(a.Spec), toMap(b.Spec)
	for _, k := range changedKeys(sa, sb) {
		if k == "initContainers" {
			out = append(out, namedListFields("spec.initContainers", sa[k], sb[k])...)
			continue
		}
		out = append(out, "spec."+k)
	}
	hostPorts := func(s sandboxScope) map[string]any {
		byName := map[string][]v1.ContainerPort{}
		for _, pm := range s.HostPorts {
			byName[pm.Container] = append(byName[pm.Container], pm.ContainerPort)
		}
		m := map[string]any{}
		for name, ports := range byName {
			m[name] = ports
		}
		return m
	}
	for _, name := range changedKeys(hostPorts(a), hostPorts(b)) {
		out = append(out, "spec.containers["+name+"].ports.hostPort")
	}
	return out
}

// namedListFields names what differs between two JSON lists of named
// objects (containers): "prefix[name].field" for a field of one in both,
// "prefix[name]" for one in only one list, and prefix alone when only the
// order differs.
func namedListFields(prefix string, a, b any) []string {
	byName := func(list any) (map[string]map[string]any, []string) {
		m := map[string]map[string]any{}
		var names []string
		items, _ := list.([]any)
		for _, it := range items {
			obj, _ := it.(map[string]any)
			name, _ := obj["name"].(string)
			m[name] = obj
			names = append(names, name)
		}
		return m, names
	}
	am, an := byName(a)
	bm, bn := byName(b)
	var out []string
	for _, name := range bn {
		was, ok := am[name]
		if !ok {
			out = append(out, prefix+"["+name+"]")
			continue
		}
		for _, k := range changedKeys(was, bm[name]) {
			out = append(out, prefix+"["+name+"]."+k)
		}
	}
	for _, name := range an {
		if _, ok := bm[name]; !ok {
			out = append(out, prefix+"["+name+"]")
		}
	}
	if len(out) == 0 && !slices.Equal(an, bn) {
		out = append(out, prefix)
	}
	return out
}

// ownAnnotationNotes tells of staticlet's own annotations that differ:
// they change how the pod is run, and restart nothing.
func ownAnnotationNotes(a, b *v1.Pod) []string {
	own := func(p *v1.Pod) map[string]any {
		m := map[string]any{}
		for k, v := range p.Annotations {
			if strings.HasPrefix(k, ownAnnotationPrefix) {
				m[k] = v
			}
		}
		return m
	}
	var out []string
	for _, k := range changedKeys(own(a), own(b)) {
		out = append(out, fmt.Sprintf("metadata.annotations[%s] changed: it says how staticlet runs the pod, and restarts nothing", k))
	}
	return out
}

// toMap returns v as encoding/json maps it, the form the hashes are taken
// of; nil when it is not an object.
func toMap(v any) map[string]any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// changedKeys returns the keys whose values differ between a and b, sorted.
func changedKeys(a, b map[string]any) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Reported returns p, a pod as a staticlet reports it on its status socket
// (the defaulted pod with its identity, as decoded from the manifest at
// source), as the Pod the daemon holds, with the SandboxHash it computed.
// The hashes are of encoding/json output, which survives the round trip
// through the status API unchanged.
func Reported(p *v1.Pod, source string) *Pod {
	p = p.DeepCopy()
	p.Status = v1.PodStatus{}
	return &Pod{Pod: p, Source: source, SandboxHash: sandboxHash(p)}
}
