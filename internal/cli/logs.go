package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/status"
)

func logsCommand() *cobra.Command {
	var (
		cf        clientFlags
		container string
		opts      status.LogOptions
		since     time.Duration
		sinceTime string
	)
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print the logs of a container of a pod",
		Long: `logs prints what a container of a pod wrote to stdout and stderr, from its
live log file: -c names the container (needed when the pod has several),
--previous reads the instance before the last restart, --tail the last N
lines, --since and --since-time the lines logged after a time, --limit-bytes
at most that many bytes, -f keeps printing new lines until the container
stops or restarts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := sinceOptions(&opts, since, sinceTime); err != nil {
				return err
			}
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
	f.DurationVar(&since, "since", 0, "print only lines newer than a relative duration like 5s, 2m or 3h; only one of --since and --since-time may be used")
	f.StringVar(&sinceTime, "since-time", "", "print only lines logged after a time (RFC 3339); only one of --since and --since-time may be used")
	f.Int64Var(&opts.LimitBytes, "limit-bytes", 0, "maximum bytes of log to print; 0 prints all")
	return cmd
}

// sinceOptions sets the options of --since, --since-time and checks
// --limit-bytes, as kubectl logs does.
func sinceOptions(opts *status.LogOptions, since time.Duration, sinceTime string) error {
	if sinceTime != "" && since != 0 {
		return errors.New("at most one of --since and --since-time may be used")
	}
	if since < 0 {
		return errors.New("--since must be greater than 0")
	}
	if opts.LimitBytes < 0 {
		return errors.New("--limit-bytes must be greater than 0")
	}
	if since > 0 {
		opts.SinceSeconds = max(int64(since.Round(time.Second).Seconds()), 1)
	}
	if sinceTime != "" {
		t, err := time.Parse(time.RFC3339Nano, sinceTime)
		if err != nil {
			return fmt.Errorf("--since-time %q is no RFC 3339 time, like 2006-01-02T15:04:05Z: %w", sinceTime, err)
		}
		opts.SinceTime = t
	}
	return nil
}
