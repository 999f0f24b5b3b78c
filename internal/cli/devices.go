package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

func getDevicesCommand() *cobra.Command {
	var (
		cf clientFlags
		of outputFlags
	)
	cmd := &cobra.Command{
		Use:     "devices [KIND]",
		Aliases: []string{"device"},
		Short:   "List the node's CDI devices: KIND DEVICE SPEC STATE HELD BY",
		Long: `devices lists the CDI devices that the specs in the CDI spec directories
(--cdi-spec-dirs of staticlet run) name, of one kind (vendor.com/class) when
KIND is given: the spec file of each, its state and the containers holding it
(HELD BY, namespace/pod/container). A container holds a device alone when its
resources.limits ask for the device's kind (STATE allocated); every container
of a pod shares the devices its pod's cdi.k8s.io/ annotations name (STATE
shared, when no container holds the device alone; "(shared)" beside such a
container when one does). A device that a container still holds after its
spec went is listed with SPEC <none>.`,
		Example: `  # Every device, and which container holds each
  staticlet get devices

  # The devices of one kind, as JSON
  staticlet get devices nvidia.com/gpu -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := of.printer()
			if err != nil {
				return err
			}
			list, err := cf.client().Devices(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				list.Devices = slices.DeleteFunc(list.Devices, func(d status.Device) bool { return d.Kind != args[0] })
			}
			if table, _ := of.Table(); !table {
				return printDocument(cmd.OutOrStdout(), &of, p, list, nil)
			}
			if len(list.Devices) == 0 {
				what := "CDI devices"
				if len(args) == 1 {
					what = args[0] + " devices"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "No %s: no CDI spec in %s names one.\n", what, strings.Join(list.SpecDirs, ", "))
				return nil
			}
			return printers.Devices(of.Writer(cmd.OutOrStdout()), list.Devices)
		},
	}
	cf.add(cmd)
	of.add(cmd, documentFormats(), true)
	cmd.ValidArgsFunction = completeDeviceKinds(&cf)
	return cmd
}

// completeDeviceKinds completes the one argument of get devices with the
// kinds of the node's CDI devices.
func completeDeviceKinds(cf *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(orBackground(cmd.Context()), completionTimeout)
		defer cancel()
		list, err := cf.client().Devices(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, d := range list.Devices {
			if strings.HasPrefix(d.Kind, toComplete) && !slices.Contains(out, d.Kind) {
				out = append(out, d.Kind)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
