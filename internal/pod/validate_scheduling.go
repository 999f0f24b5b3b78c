package pod

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks here follow the apiserver's for the pod fields that matter to
// scheduling, priority and the pod's place on the node. Most mean little
// to a static pod, but the kubelet refuses a static pod that gets them
// wrong, and so does staticlet.

// placement checks nodeSelector, affinity, topology spread constraints,
// tolerations, the gates, the priority and runtime class names,
// preemptionPolicy and hostAliases.
func (v *validator) placement(s *v1.PodSpec, p *field.Path) {
	v.addErrs(metavalidation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
	v.affinity(s.Affinity, p.Child("affinity"))
	v.topologySpread(s.TopologySpreadConstraints, p.Child("topologySpreadConstraints"))
	for i := range s.Tolerations {
		v.toleration(&s.Tolerations[i], p.Child("tolerations").Index(i))
	}
	for i, g := range s.ReadinessGates {
		ct := string(g.ConditionType)
		v.check(p.Child("readinessGates").Index(i).Child("conditionType"), ct, validation.IsQualifiedName(ct))
	}
	if len(s.SchedulingGates) > 0 {
		// A static pod is bound to its node from the start, which a gated
		// pod may not be.
		v.addErrs(field.Forbidden(p.Child("schedulingGates"), "may not be set for a static pod, which is bound to its node (spec.nodeName) from the start"))
	}
	if s.PriorityClassName != "" {
		v.check(p.Child("priorityClassName"), s.PriorityClassName, validation.IsDNS1123Subdomain(s.PriorityClassName))
	}
	if s.RuntimeClassName != nil {
		v.check(p.Child("runtimeClassName"), *s.RuntimeClassName, validation.IsDNS1123Subdomain(*s.RuntimeClassName))
	}
	if s.PreemptionPolicy != nil {
		enum(v, p.Child("preemptionPolicy"), *s.PreemptionPolicy, v1.PreemptLowerPriority, v1.PreemptNever)
	}
	for i, a := range s.HostAliases {
		ap := p.Child("hostAliases").Index(i)
		v.addErrs(validation.IsValidIP(ap.Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			v.check(ap.Child("hostnames").Index(j), h, validation.IsDNS1123Subdomain(h))
		}
	}
}

// toleration checks one toleration: its key, its operator and value, and
// its effect.
func (v *validator) toleration(t *v1.Toleration, p *field.Path) {
	if t.Key != "" {
		v.addErrs(metavalidation.ValidateLabelName(t.Key, p.Child("key"))...)
	} else if t.Operator != v1.TolerationOpExists {
		// An empty key matches every taint, whatever its value.
		v.addErrs(field.Invalid(p.Child("operator"), t.Operator, "must be Exists when key is empty"))
	}
	if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
		v.addErrs(field.Invalid(p.Child("effect"), t.Effect, "must be NoExecute when tolerationSeconds is set"))
	}
	switch t.Operator {
	case v1.TolerationOpEqual, "":
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			v.addErrs(field.Invalid(p.Child("value"), t.Value, strings.Join(msgs, "; ")))
		}
	case v1.TolerationOpExists:
		if t.Value != "" {
			v.addErrs(field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	case v1.TolerationOpLt, v1.TolerationOpGt:
		// Comparisons of numeric taint values: behind the
		// TaintTolerationComparisonOperators gate, off by default.
		v.addErrs(field.NotSupported(p.Child("operator"), t.Operator, []v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists}))
	default:
		enum(v, p.Child("operator"), t.Operator, v1.TolerationOpEqual, v1.TolerationOpExists)
	}
	if t.Effect != "" {
		enum(v, p.Child("effect"), t.Effect, v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute)
	}
}

// resizePolicy checks a container's resizePolicy: cpu and memory, each
// once, with a known policy; a pod that never restarts cannot restart a
// container to resize it.
func (v *validator) resizePolicy(c *v1.Container, p *field.Path, restart v1.RestartPolicy) {
	seen := sets.New[v1.ResourceName]()
	for i, r := range c.ResizePolicy {
		rp := p.Index(i)
		switch {
		case r.ResourceName == "":
			v.addErrs(field.Required(rp.Child("resourceName"), ""))
		case seen.Has(r.ResourceName):
			v.addErrs(field.Duplicate(rp.Child("resourceName"), r.ResourceName))
		default:
			enum(v, rp.Child("resourceName"), r.ResourceName, v1.ResourceCPU, v1.ResourceMemory)
		}
		seen.Insert(r.ResourceName)
		if r.RestartPolicy == "" {
			v.addErrs(field.Required(rp.Child("restartPolicy"), ""))
		} else {
			enum(v, rp.Child("restartPolicy"), r.RestartPolicy, v1.NotRequired, v1.RestartContainer)
		}
		if restart == v1.RestartPolicyNever && r.RestartPolicy == v1.RestartContainer {
			v.addErrs(field.Invalid(rp.Child("restartPolicy"), r.RestartPolicy, "must be NotRequired when the pod's restartPolicy is Never"))
		}
	}
}
