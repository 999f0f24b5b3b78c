// Package desired turns the manifest sources' snapshots into the set of
// pods the reconciler runs. A Merger merges the latest snapshot of every
// source (watch.Merge) and holds the first desired set back until every
// source has reported once, so that no pod is stopped only because its
// source has not been read yet; an Admission then caps the set at maxPods,
// as the kubelet's admission does.
//
// It owns only that decision: it reads no manifest (the watch sources do),
// runs no pod (the reconciler does) and keeps no status. The per-file
// results go to a ManifestSink and the OutOfpods events to an EventSink,
// interfaces declared here so that the package imports pod and watch but
// neither status nor reconcile.
//
// Concurrency: constructors start nothing. Run keeps all of its state on
// the calling goroutine, calls the sinks from it, and returns nil once ctx
// is done; it must not be called twice at once on the same value. The pod
// values passed along are shared with the sources: they are read, never
// written.
package desired
