package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

func topCommand() *cobra.Command {
	top := &cobra.Command{Use: "top", Short: "Show the CPU and memory pods use"}
	top.AddCommand(topPodsCommand())
	return top
}

func topPodsCommand() *cobra.Command {
	var (
		cf         clientFlags
		containers bool
		selector   string
	)
	cmd := &cobra.Command{
		Use:     "pods [NAME]",
		Aliases: []string{"pod", "po"},
		Short:   "Show the CPU and memory of pods, or of their containers",
		Long: `top pods shows what each pod uses, as kubectl top does: CPU in millicores
(1000m is one core) on average over about a second, and memory as the
working set in MiB (what the pod is charged for, less page cache the
kernel reclaims first, as the kubelet counts it). staticlet reads
them from the cgroups of the pods and containers; a pod's figures are its
cgroup's, which holds its containers and its sandbox.`,
		Example: `  # Every pod's CPU and memory
  staticlet top pods

  # One pod's, by container
  staticlet top pods etcd-node1 --containers

  # The pods of kube-system that have the label component=etcd
  staticlet top pods -n kube-system -l component=etcd`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := cf.client()
			keep, err := topFilter(ctx, c, &cf, args, selector)
			if err != nil {
				return err
			}
			list, err := c.PodStats(ctx, 0)
			if err != nil {
				return err
			}
			pods := slices.DeleteFunc(list.Pods, func(p status.PodStats) bool { return !keep(p) })
			if len(args) == 1 && len(pods) == 0 {
				return fmt.Errorf("metrics not available yet for pod %q", args[0])
			}
			return printers.TopPods(cmd.OutOrStdout(), pods, containers)
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	cmd.ValidArgsFunction = completePods(&cf, 1, "")
	f := cmd.Flags()
	f.BoolVar(&containers, "containers", false, "show each container of the pods")
	f.StringVarP(&selector, "selector", "l", "", "label selector (e.g. -l key1=value1,key2!=value2): only pods that match")
	return cmd
}

// topFilter returns which pods' usage to show: those of -n, the one named
// (as get pods resolves a name), those -l selects.
func topFilter(ctx context.Context, c *status.Client, cf *clientFlags, args []string, selector string) (func(status.PodStats) bool, error) {
	var name, namespace string
	if len(args) == 1 {
		p, err := c.Pod(ctx, cf.podName(args[0]))
		if err != nil {
			return nil, err
		}
		name, namespace = p.Name, p.Namespace
	}
	var selected map[string]bool // by namespace/name; nil selects all
	if selector != "" {
		if _, err := labels.Parse(selector); err != nil {
			return nil, fmt.Errorf("parsing selector %q: %w", selector, err)
		}
		list, err := c.PodsMatching(ctx, selector) // the server selects, as for get pods -l
		if err != nil {
			return nil, err
		}
		selected = map[string]bool{}
		for _, p := range list.Items {
			selected[p.Namespace+"/"+p.Name] = true
		}
	}
	return func(p status.PodStats) bool {
		switch {
		case name != "" && (p.Name != name || p.Namespace != namespace):
			return false
		case cf.namespace != "" && p.Namespace != cf.namespace:
			return false
		case selected != nil && !selected[p.Namespace+"/"+p.Name]:
			return false
		}
		return true
	}, nil
}
