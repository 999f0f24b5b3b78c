package desired

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// CycleError rejects the pods whose staticlet.io/after annotations wait
// for each other in a cycle: none of them could ever start, so none is
// run, and each file that defines one says so.
type CycleError struct {
	// Cycle is the pods of the cycle, by key, each waiting for the next
	// and the last for the first.
	Cycle []pod.Key
}

func (e *CycleError) Error() string {
	names := make([]string, 0, len(e.Cycle)+1)
	for _, k := range e.Cycle {
		names = append(names, k.String())
	}
	names = append(names, e.Cycle[0].String())
	return fmt.Sprintf("metadata.annotations[%s]: the pods wait for each other in a cycle (%s); none of them is run",
		pod.AnnotationAfter, strings.Join(names, " waits for "))
}

// refuseCycles takes out of pods those whose staticlet.io/after
// annotations form a cycle among the pods, and gives the files that define
// them a CycleError. Dependencies on pods that are not in pods are no
// cycle: such a pod waits for a bounded time, then starts.
func refuseCycles(pods []*pod.Pod, files []watch.FileResult) ([]*pod.Pod, []watch.FileResult) {
	byKey := make(map[pod.Key]*pod.Pod, len(pods))
	for _, p := range pods {
		byKey[p.Key()] = p
	}
	cycles := findCycles(byKey)
	if len(cycles) == 0 {
		return pods, files
	}
	in := map[pod.Key]error{}
	for _, c := range cycles {
		e := &CycleError{Cycle: c}
		for _, k := range c {
			in[k] = e
		}
	}
	return refusePods(pods, files, in)
}

// refusePods takes out of pods those that why has an error for, and gives
// each file that defines one its error, once.
func refusePods(pods []*pod.Pod, files []watch.FileResult, why map[pod.Key]error) ([]*pod.Pod, []watch.FileResult) {
	kept := slices.DeleteFunc(slices.Clone(pods), func(p *pod.Pod) bool { return why[p.Key()] != nil })
	out := flagPods(files, why)
	for i := range out {
		out[i].Pods = slices.DeleteFunc(slices.Clone(out[i].Pods), func(p *pod.Pod) bool { return why[p.Key()] != nil })
	}
	return kept, out
}

// flagPods gives each file that defines pods in why their errors, once
// each, keeping the pods.
func flagPods(files []watch.FileResult, why map[pod.Key]error) []watch.FileResult {
	if len(why) == 0 {
		return files
	}
	out := slices.Clone(files)
	for i := range out {
		f := &out[i]
		var errs []error
		for _, p := range f.Pods {
			if e := why[p.Key()]; e != nil && !slices.Contains(errs, e) {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			f.Err = errors.Join(append([]error{f.Err}, errs...)...)
		}
	}
	return out
}

// findCycles returns cycles of the "waits for" graph of pods, each
// starting at its least key: every pod on a cycle is on one of them.
func findCycles(pods map[pod.Key]*pod.Pod) [][]pod.Key {
	next := func(k pod.Key) []pod.Key {
		var out []pod.Key
		for _, d := range pods[k].AfterKeys() {
			if pods[d] != nil {
				out = append(out, d)
			}
		}
		return out
	}
	keys := make([]pod.Key, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pod.Key) int { return strings.Compare(a.String(), b.String()) })
	// Depth-first, colouring: a pod on the path is grey; reaching a grey
	// pod closes a cycle, which is the path from it on.
	const (
		white = iota
		grey
		black
	)
	colour := map[pod.Key]int{}
	var path []pod.Key
	var cycles [][]pod.Key
	var visit func(k pod.Key)
	visit = func(k pod.Key) {
		colour[k] = grey
		path = append(path, k)
		for _, d := range next(k) {
			switch colour[d] {
			case white:
				visit(d)
			case grey:
				i := slices.Index(path, d)
				cycles = append(cycles, rotateToLeast(slices.Clone(path[i:])))
			}
		}
		path = path[:len(path)-1]
		colour[k] = black
	}
	for _, k := range keys {
		if colour[k] == white {
			visit(k)
		}
	}
	return cycles
}

// rotateToLeast rotates cycle c to start at its least key.
func rotateToLeast(c []pod.Key) []pod.Key {
	least := 0
	for i, k := range c {
		if k.String() < c[least].String() {
			least = i
		}
	}
	return append(slices.Clone(c[least:]), c[:least]...)
}
