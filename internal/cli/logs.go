package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

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
