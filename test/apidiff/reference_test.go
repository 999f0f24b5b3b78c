package apidiff

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // registers core/v1 with its conversions and defaults
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/capabilities"
)

// The kubelet and the apiserver both allow privileged containers by
// default (--allow-privileged); the validation package asks this
// process-wide setting.
func init() { capabilities.Setup(true, 0) }

// verdict is one validator's judgement of a manifest: nil fields and no
// error means accepted.
type verdict struct {
	rejected bool
	fields   []string // field paths of the errors, "" for a whole-document error
	msgs     []string
}

func (v verdict) String() string {
	if !v.rejected {
		return "accepted"
	}
	parts := make([]string, len(v.msgs))
	for i := range v.msgs {
		parts[i] = v.fields[i] + ": " + v.msgs[i]
	}
	return "rejected: " + strings.Join(parts, "; ")
}

func (v *verdict) add(field, msg string) {
	v.rejected = true
	v.fields = append(v.fields, field)
	v.msgs = append(v.msgs, msg)
}

// apiserverDoc judges a manifest of one Pod, ConfigMap or Secret as the
// apiserver does. A pod is taken as the kubelet's file source takes it
// (pkg/kubelet/config/common.go, tryDecodeSinglePod): YAML to JSON, the
// universal decoder (core/v1 defaults, then conversion to the internal
// types), the static pod defaults (applyDefaults), and then
// ValidatePodCreate with the options the apiserver's pod strategy passes,
// under the release's default feature gates. The kubelet's own refusal of
// API object references is not applied: that is the rule staticlet means
// to lift. A ConfigMap or Secret is validated as on create, in the
// namespace "default" when it names none (as staticlet places it).
func apiserverDoc(data []byte, node string) verdict {
	var v verdict
	js, err := utilyaml.ToJSON(data)
	if err != nil {
		v.add("", "yaml: "+err.Error())
		return v
	}
	obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), js)
	if err != nil {
		v.add("", "decode: "+err.Error())
		return v
	}
	var errs field.ErrorList
	switch o := obj.(type) {
	case *api.Pod:
		if o.Name == "" {
			v.add("metadata.name", "name is needed for the pod")
			return v
		}
		staticDefaults(o, node)
		opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&o.Spec, nil, &o.ObjectMeta, nil)
		opts.ResourceIsPod = true
		errs = validation.ValidatePodCreate(o, opts)
	case *api.ConfigMap:
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		errs = validation.ValidateConfigMap(o)
	case *api.Secret:
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		errs = validation.ValidateSecret(o)
	default:
		v.add("", fmt.Sprintf("not a pod, configmap or secret: %T", obj))
	}
	for _, e := range errs {
		v.add(e.Field, e.ErrorBody())
	}
	return v
}

// staticDefaults is the kubelet's applyDefaults for a file source, less
// the UID's hash, which validation does not look at.
func staticDefaults(pod *api.Pod, node string) {
	if pod.UID == "" {
		pod.UID = types.UID("0123456789abcdef0123456789abcdef")
	}
	pod.Name = pod.Name + "-" + strings.ToLower(node)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = node
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["kubernetes.io/config.hash"] = string(pod.UID)
	helper.AddOrUpdateTolerationInPod(pod, &api.Toleration{Operator: "Exists", Effect: api.TaintEffectNoExecute})
	pod.Status.Phase = api.PodPending
}
