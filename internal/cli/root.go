// Package cli is staticlet's command line around the daemon: the cobra
// command tree with the client commands (get, describe, logs, exec,
// restart, top, wait, validate, diff, kubeconfig, version), which ask a
// running staticlet through its status socket or, for validate and diff,
// read manifests themselves (kubeconfig reads the API's certificates
// under the root dir). It does not run pods: the daemon's command (run)
// is built by the main package and handed to Root, and main turns a
// command's error into the process's exit. Each command's goroutines end
// before its run returns.
package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/cgroups"
)

// DefaultStatusSocket is where the daemon serves its status socket unless
// told otherwise, and where the client commands look for it.
const DefaultStatusSocket = "/run/staticlet/staticlet.sock"

// DefaultRootDir is run's --root-dir unless told otherwise, where the
// commands that read its files (kubeconfig) look.
const DefaultRootDir = "/var/lib/staticlet"

// Root returns staticlet's command tree: run, the daemon's command that
// the caller builds, beside the client commands. version is what
// `staticlet version` prints.
func Root(version string, run *cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "staticlet",
		Short: "Run Kubernetes static pods on one machine, without an apiserver",
		Long: `staticlet runs the Pod manifests found in a directory through containerd,
keeps them running, and reports their status on a local socket and to systemd.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(run, getCommand(), describeCommand(), logsCommand(), execCommand(), restartCommand(), topCommand(), waitCommand(), validateCommand(), diffCommand(), kubeconfigCommand(), versionCommand(version))
	return root
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

// ExitCode is the process's exit status for err, returned by a command:
// the one the command chose, else 1.
func ExitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

// Message is the line main prints on stderr for err, returned by a
// command: "error: " and the error, or the error alone where the command
// copies another tool's message.
func Message(err error) string {
	if e, ok := err.(*exitError); ok && e.raw {
		return err.Error()
	}
	return "error: " + err.Error()
}

func versionCommand(version string) *cobra.Command {
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
