package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

func validateCommand() *cobra.Command {
	var nodeName string
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check manifests offline, as the daemon would read them",
		Long: `validate decodes and validates each manifest file, and each file of each
directory (skipping the same files the daemon skips), with the daemon's
rules: its pods, and the ConfigMaps and Secrets beside them, as the
apiserver validates those. It prints one line per pod, object or error,
then a count of what is valid, and exits 1 if any file is invalid. No
line shows a value of a Secret; keys a Secret fills from files or
systemd credentials are checked but not read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if nodeName == "" {
				nodeName, _ = os.Hostname()
			}
			decode := func(path string, data []byte) (*pod.Manifest, error) {
				return pod.DecodeFile(path, data, pod.Options{NodeName: nodeName, SourceKind: pod.SourceFile, Seen: time.Now()})
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var snaps []watch.Snapshot
			bad := 0
			for _, arg := range args {
				snap := watch.ReadOnce(arg, decode)
				if snap.Err != nil {
					fmt.Fprintf(errOut, "%s: %v\n", arg, snap.Err)
					bad++
				}
				snaps = append(snaps, snap)
			}
			// The daemon's rule for the same pod, or object, defined twice
			// applies here too.
			_, files := watch.Merge(snaps)
			var count validCount
			for _, f := range files {
				if f.Err != nil {
					msg := f.Err.Error()
					if !strings.HasPrefix(msg, f.Path) {
						msg = f.Path + ": " + msg
					}
					fmt.Fprintln(errOut, msg)
					bad++
				}
				for _, p := range f.Pods {
					fmt.Fprintf(out, "%s: pod %s ok\n", f.Path, p.Key())
					count.pods++
				}
				for _, o := range f.Objects {
					fmt.Fprintf(out, "%s: %s %s/%s ok (%s)\n", f.Path, strings.ToLower(o.Kind()), o.Key().Namespace, o.Key().Name, plural(len(o.Keys()), "key", "keys"))
					count.add(o)
				}
			}
			fmt.Fprintf(out, "%s valid\n", count)
			if bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d invalid manifest file(s)", bad)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&nodeName, "node-name", "", "node name appended to pod names (default: the host name)")
	return cmd
}

// validCount counts what validate found valid.
type validCount struct{ pods, configMaps, secrets int }

func (c *validCount) add(o *pod.Object) {
	if o.Secret != nil {
		c.secrets++
	} else {
		c.configMaps++
	}
}

// String is "2 pods, 1 ConfigMap, 0 Secrets".
func (c validCount) String() string {
	return plural(c.pods, "pod", "pods") + ", " + plural(c.configMaps, "ConfigMap", "ConfigMaps") + ", " + plural(c.secrets, "Secret", "Secrets")
}

// plural is "1 pod" or "n pods".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
