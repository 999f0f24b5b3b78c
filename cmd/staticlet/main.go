// Command staticlet runs Kubernetes Pod manifests from a directory on one
// machine through containerd, with no apiserver, and answers questions
// about them. main only wires: the daemon's command (run) is built here,
// the client commands live in internal/cli.
package main

import (
	"fmt"
	"os"

	"github.com/staticlet/staticlet/internal/cli"
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
	if err := cli.Root(version, runCommand()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, cli.Message(err))
		os.Exit(cli.ExitCode(err))
	}
}
