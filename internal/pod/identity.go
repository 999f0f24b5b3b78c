package pod

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Identity, as the kubelet gives static pods (pkg/kubelet/config/common.go):
//
//   - the name is metadata.name + "-" + the node name in lower case, so the
//     same manifest on two nodes gives two pods;
//   - the UID, unless metadata.uid is set, is the MD5 of the defaulted pod as
//     written (before the steps below) followed by "host:<node>" and
//     "file:<path>" (for a file) or "url:<url>" (for a URL). Any edit to the
//     manifest therefore gives a new UID, as in the kubelet;
//   - the namespace defaults to "default", spec.nodeName is the node, a
//     toleration of every NoExecute taint is added (file sources only), and
//     the config.hash annotation holds the UID.
//
// The hashes here are hex digests of encoding/json output, which is
// deterministic for core/v1 types (struct fields in order, map keys sorted),
// so they are stable across processes and Go versions.

// FullName returns the name the kubelet gives a static pod: its
// metadata.name, a dash, and the node name in lower case.
func FullName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// ContainerHash returns a stable hash of one container's whole spec. When it
// changes, the container must be recreated.
func ContainerHash(c *v1.Container) string {
	return shortHash(c)
}

// prepare defaults and validates a decoded pod and gives it its identity.
// It returns nil and the problems when the pod is invalid.
func prepare(p *v1.Pod, source string, opts Options) (*Pod, []problem) {
	setDefaults(p)
	if errs := validate(p, opts.NodeName); len(errs) > 0 {
		return nil, errs
	}
	setIdentity(p, source, opts)
	return &Pod{Pod: p, Source: source, SandboxHash: sandboxHash(p)}, nil
}

// setIdentity applies the static pod identity rules above.
func setIdentity(p *v1.Pod, source string, opts Options) {
	if p.UID == "" {
		h := md5.New()
		writeJSON(h, p)
		if opts.SourceKind == SourceHTTP {
			fmt.Fprintf(h, "url:%s", source)
		} else {
			fmt.Fprintf(h, "host:%s", opts.NodeName)
			fmt.Fprintf(h, "file:%s", source)
		}
		p.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	p.Name = FullName(p.Name, opts.NodeName)
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	p.Spec.NodeName = opts.NodeName
	if opts.SourceKind != SourceHTTP {
		addToleration(&p.Spec, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationHash] = string(p.UID)
	p.Annotations[AnnotationSource] = opts.SourceKind
	p.Annotations[AnnotationSeen] = opts.Seen.Format(time.RFC3339Nano)
}

// addToleration adds t unless an identical toleration is there already.
func addToleration(s *v1.PodSpec, t v1.Toleration) {
	for _, have := range s.Tolerations {
		if have.Key == t.Key && have.Operator == t.Operator && have.Value == t.Value && have.Effect == t.Effect {
			return
		}
	}
	s.Tolerations = append(s.Tolerations, t)
}

// sandboxHash covers everything whose change means replacing the whole pod:
// namespace, name, labels, annotations other than the ones that change on
// every read or edit and staticlet's own (which say how to run the pod,
// not what it is), the spec without its app containers, and the app
// containers' host port mappings (they are set up with the sandbox's
// network, as CRI's PodSandboxConfig.PortMappings are). The UID is left out:
// it changes with every edit, also of a container. Compare names the fields
// of the same scope that differ.
func sandboxHash(p *v1.Pod) string {
	return shortHash(sandboxScopeOf(p))
}

// portMapping is one host port of an app container, as the sandbox hash
// covers it.
type portMapping struct {
	Container string `json:"container"`
	v1.ContainerPort
}

// sandboxScope is what sandboxHash hashes: the pod-level parts of a pod.
type sandboxScope struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Spec        *v1.PodSpec       `json:"spec"`
	HostPorts   []portMapping     `json:"hostPorts"`
}

// sandboxScopeOf returns the pod-level parts of p (see sandboxHash).
func sandboxScopeOf(p *v1.Pod) sandboxScope {
	annotations := map[string]string{}
	for k, v := range p.Annotations {
		if k != AnnotationSeen && k != AnnotationHash && !strings.HasPrefix(k, ownAnnotationPrefix) {
			annotations[k] = v
		}
	}
	spec := p.Spec.DeepCopy()
	spec.Containers = nil
	var ports []portMapping
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				ports = append(ports, portMapping{Container: c.Name, ContainerPort: port})
			}
		}
	}
	return sandboxScope{p.Namespace, p.Name, p.Labels, annotations, spec, ports}
}

// shortHash returns the first 16 hex digits of the SHA-256 of v's JSON.
func shortHash(v any) string {
	h := sha256.New()
	writeJSON(h, v)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// writeJSON writes v's JSON to h. Encoding core/v1 types cannot fail; should
// it ever, the error text is hashed so that the result is still stable.
func writeJSON(h hash.Hash, v any) {
	if err := json.NewEncoder(h).Encode(v); err != nil {
		fmt.Fprintf(h, "error: %v", err)
	}
}
