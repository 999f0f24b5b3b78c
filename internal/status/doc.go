// Package status owns staticlet's observed state and everything that reports
// it: the Store (every pod as a core/v1 Pod with its full status, the
// ConfigMaps and Secrets in force, the recent events, the per-file manifest
// results and readiness), the HTTP API served
// on the local unix socket (Server) and its Client for the command line,
// and the systemd notification protocol (Notifier: READY, STATUS, WATCHDOG,
// STOPPING). Printing what the API returns for a terminal is the job of its
// subpackage printers.
//
// Secrets are served as core/v1 Secrets without data or stringData, ever:
// their keys and sizes stand in an annotation (see APISecret), and the one
// thing derived from a value that the API serves is an HMAC of it under a
// key the caller picks afresh (for staticlet diff).
//
// It does not compute pod status: the reconciler builds each Pod and hands it
// to the Store, which only keeps copies. Nor does it know the node's CDI
// devices: a DeviceLister names them, and GET /devices adds the containers
// holding each from the pods' statuses (allocatedResourcesStatus) and CDI
// annotations. It does not read logs either: the
// server streams them through a LogOpener that the caller provides; nor
// does it run commands in containers, which an ExecFunc does.
//
// The exec protocol: POST /pods/{name}/exec?container=&command=&stdin=&tty=&cols=&rows=
// (command repeated, one per argument) with "Connection: Upgrade" and
// "Upgrade: staticlet-exec.v1" is answered with an error as every endpoint
// is, or with 101 Switching Protocols, after which the connection carries
// frames both ways: a type byte, the payload's length (uint32, big-endian,
// at most 32 KiB), the payload.
//
//	type            from    payload
//	0 stdin         client  bytes for the command's standard input
//	1 stdout        server  bytes the command wrote to its standard output
//	                        (with a terminal: all its output)
//	2 stderr        server  bytes the command wrote to its standard error
//	3 stdin-close   client  none: the command's input ends (EOF)
//	4 resize        client  columns and rows, each a big-endian uint16
//	5 exit          server  the exit code, a big-endian int32, then an
//	                        error message in UTF-8 (empty on success)
//
// The exit frame is the server's last: once the command has exited and its
// output has been sent, or when it could not be run or was killed (then
// the message says why and the code is -1). A client that closes the
// connection ends the command: the server kills it. A frame of an unknown
// type, or too long, is a protocol error that ends the connection.
//
// Concurrency: every Store method is safe for concurrent use and returns
// copies, never references into the store. A watcher follows the store
// through its own Subscription, which writers never wait for: it keeps
// which pods changed (a slow watcher gets their latest state) and a cursor
// into the ring of recent events. The Store starts no goroutine: it holds
// one timer for the next expiry of an event (an hour after its latest
// repeat), whose function only takes its lock, drops what expired and
// wakes the subscriptions. Server and Notifier start nothing
// in their constructors; their Run methods own every goroutine they start and
// return only after those have exited, exec sessions included. Client holds
// no state of its own and is safe for concurrent use.
package status
