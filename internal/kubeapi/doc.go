// Package kubeapi serves the node's pods through the Kubernetes API, so
// that kubectl, k9s, dashboards and client-go programs work against a node
// that has no apiserver. It serves, from the status package's Store (the
// one source of truth the status socket and the CLI read too), what those
// clients ask for, in the apiserver's shapes: version and health,
// discovery (the legacy documents and the aggregated ones), pods (list,
// get and watch with resource versions, bookmarks, label and field
// selectors, and the server-side Table form), namespaces, the node, the
// ConfigMaps and Secrets in force (a Secret without its values, as the
// status socket serves it), metrics.k8s.io's pod and node usage for
// kubectl top (sampled for each request through readers in Config),
// containers' logs (pods/log, read through the caller's log opener), the
// store's events as core/v1 and events.k8s.io/v1 Events, and the node's
// Lease in kube-node-lease, renewed at the heartbeat the caller gives.
//
// It is read-only: a create, update, patch or delete answers 405 Method
// Not Allowed with a Status naming the manifest file to edit, since the
// files are the one source of truth for what runs. The one create it
// takes is of the reviews that change nothing: who the client is
// (SelfSubjectReview) and what it may do (SelfSubjectAccessReview and
// SelfSubjectRulesReview), answered from what the API serves and the
// client may do.
//
// It serves the pods' streaming subresources as the apiserver and the
// kubelet together do: exec, attach and portforward, over SPDY and
// WebSocket (remote command protocol v5 included), with the kubelet's own
// protocol code (k8s.io/cri-streaming). It runs nothing itself: commands,
// logs and connections into a pod's network namespace come through funcs
// the caller gives in Config. Their POST is a create only in name, as on
// an apiserver. The sessions' connections belong to Serve, which closes
// them when it stops.
//
// It authenticates clients by their TLS certificate alone: a request whose
// connection presented no certificate verified by the server's TLS
// configuration is answered 401, whatever it asks. It authorizes them by
// the certificate's organizations, as RBAC with the default roles would:
// system:masters anything, pki.ViewerGroup what Kubernetes' view role
// reads (no Secrets, exec, attach or port forwarding, no writes), anyone
// else discovery and the self reviews; a request refused is answered 403
// before it is served, and the reviews answer by the same decision. It
// makes no certificates itself (package pki does) and listens only where
// the caller tells it.
package kubeapi
