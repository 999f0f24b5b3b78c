package printers

import (
	"fmt"
	"io"

	"github.com/staticlet/staticlet/internal/status"
)

// TopPods writes pods' usage as kubectl's "top pods" table: NAME
// CPU(cores) MEMORY(bytes), or with containers one row per container
// under POD NAME CPU(cores) MEMORY(bytes).
func TopPods(w io.Writer, pods []status.PodStats, containers bool) error {
	tw := newTable(w)
	if containers {
		tw.header("POD\tNAME\tCPU(cores)\tMEMORY(bytes)")
	} else {
		tw.header("NAME\tCPU(cores)\tMEMORY(bytes)")
	}
	for _, p := range pods {
		if !containers {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, milliCores(p.CPUNanoCores), mebibytes(p.MemoryWorkingSetBytes))
			continue
		}
		for _, c := range p.Containers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, c.Name, milliCores(c.CPUNanoCores), mebibytes(c.MemoryWorkingSetBytes))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing pods' usage: %w", err)
	}
	return nil
}

// milliCores prints CPU as kubectl top does: whole millicores, rounded up
// (a quantity's MilliValue).
func milliCores(nano uint64) string {
	return fmt.Sprintf("%dm", (nano+999_999)/1_000_000)
}

// mebibytes prints memory as kubectl top does: whole MiB, rounded down.
func mebibytes(b uint64) string {
	return fmt.Sprintf("%dMi", b/(1<<20))
}
