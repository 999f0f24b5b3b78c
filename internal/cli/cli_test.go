package cli

import (
	"github.com/spf13/cobra"
)

// rootCommand is the command tree as main builds it, with a stand-in for
// the daemon's run command, which these tests do not run.
func rootCommand() *cobra.Command {
	return Root("dev", &cobra.Command{Use: "run"})
}
