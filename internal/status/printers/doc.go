// Package printers writes what the status API returns for a person at a
// terminal, the way kubectl does: the tables of `staticlet get` (pods,
// manifests, images, devices), the text of `staticlet describe pod`, the unified
// diffs of `staticlet diff`, and any object as JSON or YAML or through
// kubectl's other output formats (name, jsonpath, go-template,
// custom-columns: Output, Printer), with cli-runtime's printers, so that
// they print what kubectl prints for the same objects.
//
// It only formats: it takes the objects (core/v1 Pods, the status
// package's Manifest, ImageList and Device types, events) and the time to measure
// ages from, and writes to an io.Writer. It does not fetch them, nor decide
// anything about a pod: a column such as STATUS is computed from the pod's
// status as kubectl computes it. The status package never imports it; the
// command line does.
//
// Concurrency: its functions hold no state and are safe for concurrent use.
// The watch printers (PodWatch, EventWatch) remember what they printed, to
// print the header once and count repeated events, and a Printer whether
// it printed custom-columns' header: each is used by one goroutine.
package printers
