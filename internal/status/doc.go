// Package status owns staticlet's observed state and everything that reports
// it: the Store (every pod as a core/v1 Pod with its full status, the recent
// events, the per-file manifest results and readiness), the HTTP API served
// on the local unix socket (Server) and its Client for the command line,
// and the systemd notification protocol (Notifier: READY, STATUS, WATCHDOG,
// STOPPING). Printing what the API returns for a terminal is the job of its
// subpackage printers.
//
// It does not compute pod status: the reconciler builds each Pod and hands it
// to the Store, which only keeps copies. It does not read logs either: the
// server streams them through a LogOpener that the caller provides.
//
// Concurrency: every Store method is safe for concurrent use and returns
// copies, never references into the store. A watcher follows the store
// through its own Subscription, which writers never wait for: it keeps
// which pods changed (a slow watcher gets their latest state) and a cursor
// into the ring of recent events. Server and Notifier start nothing
// in their constructors; their Run methods own every goroutine they start and
// return only after those have exited. Client holds no state of its own
// and is safe for concurrent use.
package status
