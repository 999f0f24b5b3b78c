package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	socket    string
	namespace string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.socket, "status-socket", DefaultStatusSocket, "staticlet's status socket")
}

// addNamespace gives a pod command kubectl's -n.
func (f *clientFlags) addNamespace(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "the pod's namespace (a bare name is looked up in default, then in any namespace that has it)")
}

// podName qualifies name with -n unless it names its namespace itself.
func (f *clientFlags) podName(name string) string {
	if f.namespace == "" || strings.Contains(name, "/") {
		return name
	}
	return f.namespace + "/" + name
}

func (f *clientFlags) client() *status.Client { return status.NewClient(f.socket) }

func getCommand() *cobra.Command {
	get := &cobra.Command{Use: "get", Short: "List pods, manifests, ConfigMaps, Secrets, images, devices or events, or show the node"}
	get.AddCommand(getPodsCommand(), getManifestsCommand(), getObjectsCommand(configMapKind), getObjectsCommand(secretKind), getImagesCommand(),
		getDevicesCommand(), getEventsCommand(), getNodeCommand())
	return get
}

func getPodsCommand() *cobra.Command {
	var (
		cf       clientFlags
		of       outputFlags
		selector string
		wf       podWatchFlags
	)
	cmd := &cobra.Command{
		Use:     "pods [NAME]",
		Aliases: []string{"pod", "po"},
		Short:   "List pods: NAME READY STATUS RESTARTS AGE",
		Example: `  # Every pod, with its IP
  staticlet get pods -o wide

  # The pods labelled tier=control-plane, then a row for each change
  staticlet get pods -l tier=control-plane -w

  # One pod as YAML, printed again at each change
  staticlet get pod etcd-node1 -w -o yaml

  # The names of the pods, on one line, as kubectl's jsonpath prints them
  staticlet get pods -o jsonpath='{.items[*].metadata.name}'

  # pod/NAME for each pod
  staticlet get pods -o name

  # Each pod's name and IP, without the header line
  staticlet get pods -o custom-columns=NAME:.metadata.name,IP:.status.podIP --no-headers`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			if selector != "" {
				if len(args) == 1 {
					return fmt.Errorf("name cannot be provided when a selector is specified")
				}
				if err := checkSelector(selector); err != nil {
					return err
				}
			}
			if wf.watch || wf.watchOnly {
				return watchPods(cmd, &cf, strings.Join(args, ""), selector, &of, p, wf)
			}
			ctx := cmd.Context()
			c := cf.client()
			var obj any
			list, err := c.PodsMatching(ctx, selector)
			if err != nil {
				return err
			}
			items := list.Items
			if cf.namespace != "" {
				items = slices.DeleteFunc(items, func(p v1.Pod) bool { return p.Namespace != cf.namespace })
				list.Items = items
			}
			obj = list
			if len(args) == 1 {
				p, err := c.Pod(ctx, cf.podName(args[0]))
				if err != nil {
					return err
				}
				items = items[:0]
				items = append(items, *p)
				obj = p
			}
			return printKube(cmd.OutOrStdout(), &of, p, "Pod", items, len(args) == 1, obj, func(w io.Writer, wide bool) error {
				return printers.Pods(w, items, wide, time.Now())
			})
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	of.add(cmd, kubeFormats(true), true)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, as kubectl's: key=value, key!=value, key in (a,b), !key")
	wf.add(cmd)
	cmd.ValidArgsFunction = completePods(&cf, 1, "")
	return cmd
}

func getManifestsCommand() *cobra.Command {
	var (
		cf clientFlags
		of outputFlags
	)
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "List manifest files with their pods or errors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			ms, err := cf.client().Manifests(cmd.Context())
			if err != nil {
				return err
			}
			return printDocument(cmd.OutOrStdout(), &of, p, ms, func(w io.Writer) error {
				return printers.Manifests(w, ms)
			})
		},
	}
	cf.add(cmd)
	of.add(cmd, documentFormats(), true)
	return cmd
}

func getImagesCommand() *cobra.Command {
	var (
		cf clientFlags
		of outputFlags
	)
	cmd := &cobra.Command{
		Use:     "images",
		Aliases: []string{"image"},
		Short:   "List images with where each came from, when each was last used and why it is kept, and import files that failed",
		Long: `images lists the images of staticlet's containerd namespace: where each came
from, when a container last used it (LAST-USED; "never" until image garbage
collection has seen one use it) and why garbage collection keeps it whatever
its age and the disk's usage (KEPT): "in use" (a container was made from it),
"manifest" (a current manifest names it, whatever its pod's state) or
"import file" (its file is still in the image import directory); <none>
when it may be removed. Then the import files that failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			list, err := cf.client().Images(cmd.Context())
			if err != nil {
				return err
			}
			return printDocument(cmd.OutOrStdout(), &of, p, list, func(w io.Writer) error {
				return printers.Images(w, list, time.Now())
			})
		},
	}
	cf.add(cmd)
	of.add(cmd, documentFormats(), true)
	return cmd
}

func describeCommand() *cobra.Command {
	describe := &cobra.Command{Use: "describe", Short: "Show details of a pod, a ConfigMap, a Secret or the node"}
	var cf clientFlags
	podCmd := &cobra.Command{
		Use:     "pod NAME",
		Aliases: []string{"pods", "po"},
		Short:   "Show a pod's containers, conditions and events",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := cf.client()
			p, err := c.Pod(ctx, cf.podName(args[0]))
			if err != nil {
				return err
			}
			events, err := c.Events(ctx, p.Namespace+"/"+p.Name)
			if err != nil {
				return err
			}
			return printers.DescribePod(cmd.OutOrStdout(), p, events, time.Now())
		},
	}
	cf.add(podCmd)
	cf.addNamespace(podCmd)
	podCmd.ValidArgsFunction = completePods(&cf, 1, "")
	describe.AddCommand(podCmd, describeObjectCommand(configMapKind), describeObjectCommand(secretKind), describeNodeCommand())
	return describe
}

func getNodeCommand() *cobra.Command {
	var (
		cf clientFlags
		of outputFlags
	)
	cmd := &cobra.Command{
		Use:     "node [NAME]",
		Aliases: []string{"nodes", "no"},
		Short:   "Show the node: NAME STATUS AGE VERSION, STATUS naming a pressure such as DiskPressure",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			n, err := theNode(cmd, &cf, args)
			if err != nil {
				return err
			}
			return printKube(cmd.OutOrStdout(), &of, p, "Node", []v1.Node{*n}, len(args) == 1, n, func(w io.Writer, _ bool) error {
				return printers.Node(w, n, time.Now())
			})
		},
	}
	cf.add(cmd)
	of.add(cmd, kubeFormats(false), true)
	return cmd
}

func describeNodeCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "node [NAME]",
		Aliases: []string{"nodes", "no"},
		Short:   "Show the node's conditions (Ready, DiskPressure) with their reasons",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := theNode(cmd, &cf, args)
			if err != nil {
				return err
			}
			return printers.DescribeNode(cmd.OutOrStdout(), n, time.Now())
		},
	}
	cf.add(cmd)
	return cmd
}

// theNode asks for the node, which args may name as kubectl's do: the
// one node staticlet runs on.
func theNode(cmd *cobra.Command, cf *clientFlags, args []string) (*v1.Node, error) {
	n, err := cf.client().Node(cmd.Context())
	if err != nil {
		return nil, err
	}
	if len(args) == 1 && args[0] != n.Name {
		return nil, fmt.Errorf("node %q not found: staticlet runs on %q", args[0], n.Name)
	}
	return n, nil
}
