// Command staticlet runs Kubernetes Pod manifests from a directory on one
// machine through containerd, with no apiserver, and answers questions
// about them. main only wires: each subcommand lives in its own file.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pause"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// The pause sandbox runs this binary; it must not touch cobra or flags.
	if len(os.Args) == 2 && os.Args[1] == "pause" {
		os.Exit(pause.Main())
	}
	// So does the log driver the shim runs for every container where
	// there is no forwarder for the architecture, and the log daemon.
	if logs.IsDriver(os.Args[1:]) {
		os.Exit(logs.RunDriver(os.Args[1:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "log-daemon" {
		os.Exit(logd.RunDaemon(os.Args[2]))
	}
	if err := rootCommand().Execute(); err != nil {
		if e, ok := err.(*exitError); ok && e.raw {
			fmt.Fprintln(os.Stderr, err)
		} else {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitError carries a process exit code up to main.
type exitError struct {
	code int
	err  error
	// raw has main print the message as it is, without "error: ": one
	// that copies another tool's, like kubectl's "Error from server".
	raw bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "staticlet",
		Short: "Run Kubernetes static pods on one machine, without an apiserver",
		Long: `staticlet runs the Pod manifests found in a directory through containerd,
keeps them running, and reports their status on a local socket and to systemd.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCommand(), getCommand(), describeCommand(), logsCommand(), execCommand(), restartCommand(), topCommand(), waitCommand(), validateCommand(), diffCommand(), versionCommand())
	return root
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print staticlet's version, and the node's cgroup mode and init system",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "staticlet %s\n", version)
			mode, err := cgroups.Mode()
			if err != nil {
				mode = "unknown: " + err.Error()
			}
			fmt.Fprintf(out, "cgroups: %s\n", mode)
			// Which --cgroup-driver can work here: systemd needs systemd.
			drivers := "cgroupfs"
			if cgroups.SystemdBooted() {
				drivers = "cgroupfs, systemd"
			}
			fmt.Fprintf(out, "cgroup drivers: %s\n", drivers)
		},
	}
}
