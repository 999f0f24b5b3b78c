package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

// completionTimeout bounds the status socket call a completion makes: a
// shell waits on it at every TAB.
const completionTimeout = 2 * time.Second

// completePods completes the pod names of a command that takes pods as
// its arguments, max of them (0: any number), from the running staticlet:
// the pods of -n when it is given, a bare name when no other namespace
// has a pod of that name, "namespace/name" otherwise. prefix ("pod/" for
// wait) is put before each. With no staticlet to ask it offers nothing.
func completePods(cf *clientFlags, max int, prefix string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		pods := completionPods(cmd.Context(), cf)
		taken := map[string]bool{}
		for _, a := range args {
			taken[strings.TrimPrefix(a, prefix)] = true
		}
		var out []cobra.Completion
		for _, name := range podNames(pods, cf.namespace) {
			if !taken[name] && strings.HasPrefix(prefix+name, toComplete) {
				out = append(out, prefix+name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeContainers completes -c with the containers (init ones too) of
// the pod named by the command's first argument.
func completeContainers(cf *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(orBackground(cmd.Context()), completionTimeout)
		defer cancel()
		p, err := cf.client().Pod(ctx, cf.podName(args[0]))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				if strings.HasPrefix(c.Name, toComplete) {
					out = append(out, c.Name)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completionPods lists the pods for a completion, none when staticlet
// does not answer in time.
func completionPods(ctx context.Context, cf *clientFlags) []v1.Pod {
	ctx, cancel := context.WithTimeout(orBackground(ctx), completionTimeout)
	defer cancel()
	list, err := cf.client().Pods(ctx)
	if err != nil {
		return nil
	}
	return list.Items
}

// podNames are the names a client command takes for pods, in namespace
// ns when it is not empty: as `get pods` shows them, qualified with their
// namespace where the bare name would resolve to another pod (see
// status.Store.Pod).
func podNames(pods []v1.Pod, ns string) []string {
	keys := make([]nsName, len(pods))
	for i, p := range pods {
		keys[i] = nsName{p.Namespace, p.Name}
	}
	return shortNames(keys, ns)
}

// nsName is a namespaced object's namespace and name.
type nsName struct{ namespace, name string }

// shortNames are the names of keys, in namespace ns when it is not empty,
// as a client command takes them: bare, or qualified with their namespace
// where the bare name would resolve to another object (one in "default",
// or several of that name).
func shortNames(keys []nsName, ns string) []string {
	count := map[string]int{}
	for _, k := range keys {
		count[k.name]++
	}
	var out []string
	for _, k := range keys {
		switch {
		case ns != "":
			if k.namespace == ns {
				out = append(out, k.name)
			}
		case count[k.name] == 1 || k.namespace == "default":
			out = append(out, k.name)
		default:
			out = append(out, k.namespace+"/"+k.name)
		}
	}
	return out
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
