package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// restartOptions are what staticlet restart is told.
type restartOptions struct {
	clientFlags
	container string
}

func restartCommand() *cobra.Command {
	var o restartOptions
	cmd := &cobra.Command{
		Use:   "restart POD [-c CONTAINER]",
		Short: "Restart a pod's containers now, resetting their restart backoff",
		Long: `restart restarts the app containers of a pod now (or with -c one
container, which may also be a sidecar) and resets their restart backoff:
for a control-plane pod left crash-looping, once what made it crash is
fixed. A running container is stopped as for a failed liveness probe (its
preStop hook, then the stop signal within the pod's grace period) and
started again at once; one waiting in CrashLoopBackOff starts at once. The
restart counts in restartCount, and a Killing or Restarting event says it
was asked for. The sandbox and the init containers are kept.

A pod whose restartPolicy is Never is refused: its containers never run
twice. So is an init container that is no sidecar.`,
		Example: `  # etcd crash-looped on a full disk; after making room, start it now
  staticlet restart etcd-node1 -n kube-system

  # Restart one container of a pod
  staticlet restart kube-apiserver-node1 -n kube-system -c kube-apiserver`,
		Args: cobra.ExactArgs(1),
		RunE: o.run,
	}
	o.add(cmd)
	o.addNamespace(cmd)
	cmd.Flags().StringVarP(&o.container, "container", "c", "", "the container to restart; every app container when left out")
	cmd.ValidArgsFunction = completePods(&o.clientFlags, 1, "")
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainers(&o.clientFlags))
	return cmd
}

// run asks staticlet for the restart, and says what was restarted.
func (o *restartOptions) run(cmd *cobra.Command, args []string) error {
	reply, err := o.client().Restart(cmd.Context(), o.podName(args[0]), o.container)
	if err != nil {
		return err
	}
	what := "pod/" + reply.Name
	if reply.Container != "" {
		what += " container " + reply.Container
	}
	fmt.Fprintln(cmd.OutOrStdout(), what, "restarted")
	return nil
}
