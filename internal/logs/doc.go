// Package logs owns container output on disk in the CRI log format, the
// format the kubelet and containerd's CRI plugin write and that log shippers
// and `crictl logs` read: one record per line,
//
//	<RFC3339Nano time> stdout|stderr F|P <content>
//
// where a line longer than MaxLineSize is split into P (partial) records
// ended by an F (full) record.
//
// It has two halves that share the format and the file layout:
//
//   - The writer (Writer, and RunDriver around it) turns a container's
//     stdout and stderr into records in <restartCount>.log, rotating the
//     file by size and keeping a bounded number of files as the kubelet
//     does (the live file keeps its name, rotated ones get a time suffix).
//     RunDriver is containerd's shim binary-logging protocol: the runc shim
//     spawns the staticlet binary with the container's output pipes, so
//     output is written by a process that lives with the shim, and
//     staticlet being stopped, killed or restarted neither loses nor blocks
//     it.
//   - The reader (Open) streams a container's live log file for
//     `staticlet logs` and the Kubernetes API: whole lines (P parts
//     joined), with or without their time, the last N lines, those logged
//     since a time, up to a number of bytes, and following growth and
//     rotation until the container is replaced or stops.
//
// Beside them, the node-wide budget (OverBudget, EnforceBudget) keeps the
// total of every container's files under a pod logs directory within a
// size, removing rotated files first, oldest first across containers,
// then the logs of earlier instances; never the live ones.
//
// It does not know pods or containerd: callers give it paths and a
// function that says whether the container still runs.
//
// Concurrency: a Writer is safe for concurrent use by its two streams. The
// stream Open returns owns one goroutine, which Close (or the end of its
// context) stops and waits for.
package logs
