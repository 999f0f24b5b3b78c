package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/status"
)

const defaultStatusSocket = "/run/staticlet/staticlet.sock"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	socket string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.socket, "status-socket", defaultStatusSocket, "staticlet's status socket")
}

func (f *clientFlags) client() *status.Client { return status.NewClient(f.socket) }

func getCommand() *cobra.Command {
	get := &cobra.Command{Use: "get", Short: "List pods or manifests"}
	get.AddCommand(getPodsCommand(), getManifestsCommand())
	return get
}

func getPodsCommand() *cobra.Command {
	var (
		cf     clientFlags
		output string
	)
	cmd := &cobra.Command{
		Use:     "pods [NAME]",
		Aliases: []string{"pod", "po"},
		Short:   "List pods: NAME READY STATUS RESTARTS AGE",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := cf.client()
			var obj any
			list, err := c.Pods(ctx)
			if err != nil {
				return err
			}
			items := list.Items
			obj = list
			if len(args) == 1 {
				p, err := c.Pod(ctx, args[0])
				if err != nil {
					return err
				}
				items = items[:0]
				items = append(items, *p)
				obj = p
			}
			switch output {
			case "", "wide":
				return status.PrintPods(cmd.OutOrStdout(), items, output == "wide", time.Now())
			case "json", "yaml":
				return status.PrintObject(cmd.OutOrStdout(), obj, output)
			default:
				return fmt.Errorf("unknown output format %q: use wide, json or yaml", output)
			}
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

func getManifestsCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "List manifest files with their pods or errors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := cf.client().Manifests(cmd.Context())
			if err != nil {
				return err
			}
			return status.PrintManifests(cmd.OutOrStdout(), ms)
		},
	}
	cf.add(cmd)
	return cmd
}

func describeCommand() *cobra.Command {
	describe := &cobra.Command{Use: "describe", Short: "Show details of a pod"}
	var cf clientFlags
	podCmd := &cobra.Command{
		Use:     "pod NAME",
		Aliases: []string{"pods", "po"},
		Short:   "Show a pod's containers, conditions and events",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := cf.client()
			p, err := c.Pod(ctx, args[0])
			if err != nil {
				return err
			}
			events, err := c.Events(ctx, p.Namespace+"/"+p.Name)
			if err != nil {
				return err
			}
			return status.DescribePod(cmd.OutOrStdout(), p, events, time.Now())
		},
	}
	cf.add(podCmd)
	describe.AddCommand(podCmd)
	return describe
}
