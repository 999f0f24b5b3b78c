// Package apidiff measures staticlet's manifest validation against the
// apiserver's own: it generates single-field mutants of real static pod
// manifests, validates each with staticlet's pod package and with the
// validation code of the Kubernetes release whose API staticlet builds on
// (k8s.io/kubernetes at the version of k8s.io/api in staticlet's go.mod),
// and compares the verdicts. It is a module of its own, so that staticlet's
// go.mod does not carry k8s.io/kubernetes; its only code is its tests.
package apidiff
