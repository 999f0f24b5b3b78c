// Command staticlet-logd is the node's log daemon (package logd) as a
// program of its own, `staticlet-logd log-daemon DIR`, the arguments
// `staticlet log-daemon DIR` takes. staticlet runs it, when it finds it
// beside its own binary, rather than itself: this program holds nothing
// but the daemon. Idle, it takes about 2 MiB (PSS) where staticlet's
// binary takes about 8.5: that one initialises its Kubernetes and
// containerd packages before main can tell it is to be the daemon, which
// leaves heap the daemon never uses and has the garbage collector and the
// runtime touch its code and type data all over the binary.
package main

import (
	"fmt"
	"os"

	"github.com/staticlet/staticlet/internal/logd"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "log-daemon" {
		fmt.Fprintln(os.Stderr, "usage: staticlet-logd log-daemon DIR")
		os.Exit(2)
	}
	os.Exit(logd.RunDaemon(os.Args[2]))
}
