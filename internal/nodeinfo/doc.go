// Package nodeinfo reads what the node object says of the machine: its
// identity (machine ID, system UUID, boot ID), its kernel and operating
// system, its capacity (CPUs, memory, huge pages, the filesystem of the
// root dir), the node's addresses (--node-ip's, checked by the kubelet's
// rule, or else the one on the default route, as the kubelet picks it) and
// the CPU time the whole machine has used.
//
// The parsers are pure functions of the files' contents; Read takes the
// root of the file system to read them under, so that tests read
// fixture trees. It keeps nothing and starts nothing.
package nodeinfo
