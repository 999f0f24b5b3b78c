package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/status"
)

func logsCommand() *cobra.Command {
	var (
		cf        clientFlags
		container string
		opts      status.LogOptions
	)
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print the logs of a container of a pod",
		Long: `logs prints what a container of a pod wrote to stdout and stderr, from its
live log file: -c names the container (needed when the pod has several),
--previous reads the instance before the last restart, --tail the last N
lines, -f keeps printing new lines until the container stops or restarts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rc, err := cf.client().Logs(ctx, cf.podName(args[0]), container, opts)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(cmd.OutOrStdout(), rc)
			if ctx.Err() != nil {
				return nil // interrupted while following
			}
			return err
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "container name; may be left out for a pod with one container")
	cmd.ValidArgsFunction = completePods(&cf, 1, "")
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainers(&cf))
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new lines")
	f.Int64Var(&opts.TailLines, "tail", -1, "lines to print from the end of the log; -1 prints all")
	f.BoolVarP(&opts.Previous, "previous", "p", false, "print the log of the previous instance of the container")
	f.BoolVar(&opts.Timestamps, "timestamps", false, "prefix each line with the time it was logged")
	return cmd
}

// logOpener serves `staticlet logs` from the container log files under
// podLogsDir: the instance of the container that the pod's status names
// (its restartCount), or the one before it.
func logOpener(store *status.Store, podLogsDir string) status.LogOpener {
	return func(ctx context.Context, key, container string, opts status.LogOptions) (io.ReadCloser, error) {
		p, ok := store.Pod(key)
		if !ok {
			return nil, fmt.Errorf("pod %s: %w", key, fs.ErrNotExist)
		}
		cs, ok := containerStatus(p, container)
		if !ok {
			return nil, fmt.Errorf("container %q of pod %s has not been created yet: %w", container, key, fs.ErrNotExist)
		}
		instance := int(cs.RestartCount)
		if opts.Previous {
			if instance == 0 {
				return nil, fmt.Errorf("previous terminated container %q in pod %s not found: %w", container, key, fs.ErrNotExist)
			}
			instance--
		}
		path, err := logs.FindLog(podLogsDir, p.Namespace, p.Name, string(p.UID), container, instance)
		if err != nil {
			return nil, err
		}
		q := logs.Query{Path: path, TailLines: opts.TailLines, Timestamps: opts.Timestamps}
		// A previous instance writes no more; nor does one that is not
		// running, like a kubelet's follow of a terminated container.
		if opts.Follow && !opts.Previous && cs.State.Running != nil {
			q.Follow = true
			id := cs.ContainerID
			q.Running = func() bool {
				p, ok := store.Pod(key)
				if !ok {
					return false
				}
				cur, ok := containerStatus(p, container)
				return ok && cur.ContainerID == id && cur.State.Running != nil
			}
		}
		return logs.Open(ctx, q)
	}
}

// containerStatus finds the status of a container, app or init, that has
// been created.
func containerStatus(p *v1.Pod, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.ContainerID != "" {
				return cs, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}
