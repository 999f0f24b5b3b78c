// Package pki makes and keeps the certificates of staticlet's Kubernetes
// API in one directory (`<root-dir>/api`): a CA of the node's own, the
// API's serving certificate and an admin client certificate, both signed
// by that CA. Every file is 0600 in a directory 0700, written through a
// temporary file renamed over the old one, and kept across restarts.
//
// Ensure loads what is there and issues what is missing or due: a leaf
// whose names no longer cover what the caller asks, that a third of its
// life or less is left to, or whose files do not belong together is
// issued again from the same CA. The CA is replaced only once it has
// expired, and Bundle.Issued says so, for the log. A file that cannot be
// read or parsed, or that group or others may read or write, is an error
// naming the file; staticlet does not fix modes itself, since a key
// others could read may have been copied and is the operator's to judge.
//
// A running server stays current without a restart: its tls.Config
// (Bundle.ServerConfig) takes the serving certificate at each handshake,
// and Bundle.Refresh, called at Bundle.RenewAt, issues new leaves and
// swaps them in.
//
// The package also reads and writes the one-line file in which the
// running API records its address (WriteAddress, ReadAddress), which
// `staticlet kubeconfig` reads. It knows no pods and serves nothing; a
// Bundle is safe for concurrent use.
package pki
