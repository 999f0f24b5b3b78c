package printers

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Node writes n as kubectl's "get nodes" table: NAME STATUS AGE VERSION.
// STATUS is Ready or NotReady, followed by each pressure condition that
// is true ("Ready,DiskPressure"), which kubectl shows only in describe.
func Node(w io.Writer, n *v1.Node, now time.Time) error {
	tw := newTable(w)
	tw.header("NAME\tSTATUS\tAGE\tVERSION")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, nodeStatus(n), age(n.CreationTimestamp.Time, now), orNone(n.Status.NodeInfo.KubeletVersion))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing the node: %w", err)
	}
	return nil
}

// nodeStatus is the STATUS cell of n.
func nodeStatus(n *v1.Node) string {
	status := "Unknown"
	var pressure []string
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == v1.NodeReady && c.Status == v1.ConditionTrue:
			status = "Ready"
		case c.Type == v1.NodeReady:
			status = "NotReady"
		case c.Status == v1.ConditionTrue:
			pressure = append(pressure, string(c.Type))
		}
	}
	return strings.Join(append([]string{status}, pressure...), ",")
}

// DescribeNode writes n the way "kubectl describe node" does, for what
// staticlet's node has: its name, labels, creation and conditions, each
// with when it last changed and why; its addresses; its capacity and
// allocatable (the CDI devices by kind among them); and its system info.
func DescribeNode(w io.Writer, n *v1.Node, now time.Time) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), now: now}
	d.line(0, "Name:\t%s\n", n.Name)
	d.multiline("Labels", n.Labels, "=", 0)
	d.line(0, "CreationTimestamp:\t%s\n", timeString(n.CreationTimestamp))
	d.line(0, "Conditions:\n")
	d.line(1, "Type\tStatus\tLastTransitionTime\tReason\tMessage\n")
	d.line(1, "----\t------\t------------------\t------\t-------\n")
	for _, c := range n.Status.Conditions {
		d.line(1, "%s \t%s \t%s \t%s \t%s\n", c.Type, c.Status, timeString(c.LastTransitionTime), c.Reason, c.Message)
	}
	if len(n.Status.Addresses) > 0 {
		d.line(0, "Addresses:\n")
		for _, a := range n.Status.Addresses {
			d.line(1, "%s:\t%s\n", a.Type, a.Address)
		}
	}
	d.resources(0, "Capacity", n.Status.Capacity)
	d.resources(0, "Allocatable", n.Status.Allocatable)
	info := n.Status.NodeInfo
	d.line(0, "System Info:\n")
	for _, f := range [][2]string{
		{"Machine ID", info.MachineID}, {"System UUID", info.SystemUUID}, {"Boot ID", info.BootID},
		{"Kernel Version", info.KernelVersion}, {"OS Image", info.OSImage},
		{"Operating System", info.OperatingSystem}, {"Architecture", info.Architecture},
		{"Container Runtime Version", info.ContainerRuntimeVersion},
		{"Kubelet Version", info.KubeletVersion}, {"Kube-Proxy Version", ""}, // staticlet runs no kube-proxy
	} {
		d.line(1, "%s:\t%s\n", f[0], f[1])
	}
	if err := d.tw.Flush(); err != nil {
		return fmt.Errorf("describing node %s: %w", n.Name, err)
	}
	return nil
}

// NodeStatus is the STATUS cell of n in the nodes table.
func NodeStatus(n *v1.Node) string { return nodeStatus(n) }
