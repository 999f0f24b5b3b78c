package pod

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Node and pod affinity and topology spread constraints mean nothing to a
// pod that is bound to its node from the start, but the kubelet validates
// them as the apiserver does, and refuses a static pod that gets them
// wrong; so does staticlet. The rules are those of the apiserver
// (validateAffinity, validateTopologySpreadConstraints) under the default
// feature gates of the release staticlet builds on.

// selectorOptions are the label selector rules of affinity terms and
// topology spread constraints: label values must be valid.
var selectorOptions = metavalidation.LabelSelectorValidationOptions{}

// affinity checks spec.affinity.
func (v *validator) affinity(a *v1.Affinity, p *field.Path) {
	if a == nil {
		return
	}
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			tp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(req.NodeSelectorTerms) == 0 {
				v.addErrs(field.Required(tp, "must have at least one node selector term"))
			}
			for i := range req.NodeSelectorTerms {
				v.nodeSelectorTerm(&req.NodeSelectorTerms[i], tp.Index(i), true)
			}
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			v.weight(t.Weight, tp.Child("weight"))
			// Values need not be valid label values in a preference.
			v.nodeSelectorTerm(&t.Preference, tp.Child("preference"), false)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		v.podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))
	}
	if pa := a.PodAntiAffinity; pa != nil {
		v.podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))
	}
}

func (v *validator) weight(w int32, p *field.Path) {
	if w <= 0 || w > 100 {
		v.addErrs(field.Invalid(p, w, "must be in the range 1-100"))
	}
}

// nodeSelectorTerm checks one term of a node affinity; strictValues asks
// for valid label values, as required terms do.
func (v *validator) nodeSelectorTerm(t *v1.NodeSelectorTerm, p *field.Path, strictValues bool) {
	for i, r := range t.MatchExpressions {
		rp := p.Child("matchExpressions").Index(i)
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				v.addErrs(field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				v.addErrs(field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				v.addErrs(field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			v.addErrs(field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		v.addErrs(metavalidation.ValidateLabelName(r.Key, rp.Child("key"))...)
		if strictValues {
			for j, val := range r.Values {
				v.check(rp.Child("values").Index(j), val, validation.IsValidLabelValue(val))
			}
		}
	}
	for i, r := range t.MatchFields {
		rp := p.Child("matchFields").Index(i)
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(r.Values) != 1 {
				v.addErrs(field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			v.addErrs(field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		// metadata.name is the only node field a selector may name.
		if r.Key != "metadata.name" {
			v.addErrs(field.Invalid(rp.Child("key"), r.Key, "not a valid field selector key"))
			continue
		}
		for j, val := range r.Values {
			v.check(rp.Child("values").Index(j), val, validation.IsDNS1123Subdomain(val))
		}
	}
}

// podAffinityTerms checks the terms of a pod affinity or anti-affinity.
func (v *validator) podAffinityTerms(required []v1.PodAffinityTerm, preferred []v1.WeightedPodAffinityTerm, p *field.Path) {
	for i := range required {
		v.podAffinityTerm(&required[i], p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))
	}
	for i := range preferred {
		tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		v.weight(preferred[i].Weight, tp.Child("weight"))
		v.podAffinityTerm(&preferred[i].PodAffinityTerm, tp.Child("podAffinityTerm"))
	}
}

func (v *validator) podAffinityTerm(t *v1.PodAffinityTerm, p *field.Path) {
	v.addErrs(metavalidation.ValidateLabelSelector(t.LabelSelector, selectorOptions, p.Child("labelSelector"))...)
	v.addErrs(metavalidation.ValidateLabelSelector(t.NamespaceSelector, selectorOptions, p.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		// The apiserver names the list "namespace", without an index.
		v.check(p.Child("namespace"), ns, validation.IsDNS1123Label(ns))
	}
	v.labelKeys(p, t.MatchLabelKeys, t.MismatchLabelKeys, t.LabelSelector)
	if t.TopologyKey == "" {
		v.addErrs(field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	v.addErrs(metavalidation.ValidateLabelName(t.TopologyKey, p.Child("topologyKey"))...)
}

// labelKeys checks matchLabelKeys and mismatchLabelKeys: label names, only
// with a labelSelector, a match key not in the selector too, and no key in
// both lists.
func (v *validator) labelKeys(p *field.Path, match, mismatch []string, sel *metav1.LabelSelector) {
	for _, l := range []struct {
		name string
		keys []string
	}{{"matchLabelKeys", match}, {"mismatchLabelKeys", mismatch}} {
		if len(l.keys) == 0 {
			continue
		}
		if sel == nil {
			v.addErrs(field.Forbidden(p.Child(l.name), "must not be specified when labelSelector is not set"))
			continue
		}
		for i, k := range l.keys {
			v.addErrs(metavalidation.ValidateLabelName(k, p.Child(l.name).Index(i))...)
		}
	}
	if sel != nil {
		// A match key may not be in the selector already: in its
		// matchLabels or an earlier expression, as the apiserver tells.
		index := map[string]int{}
		for i, k := range match {
			index[k] = i
		}
		seen := sets.KeySet(sel.MatchLabels)
		for _, e := range sel.MatchExpressions {
			if i, ok := index[e.Key]; ok && seen.Has(e.Key) {
				v.addErrs(field.Invalid(p.Index(i), e.Key, "exists in both matchLabelKeys and labelSelector"))
			}
			seen.Insert(e.Key)
		}
	}
	both := sets.New(mismatch...)
	for i, k := range match {
		if both.Has(k) {
			v.addErrs(field.Invalid(p.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
}

// topologySpread checks spec.topologySpreadConstraints.
func (v *validator) topologySpread(cs []v1.TopologySpreadConstraint, p *field.Path) {
	for i, c := range cs {
		cp := p.Index(i)
		if c.MaxSkew <= 0 {
			v.addErrs(field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			v.addErrs(field.Required(cp.Child("topologyKey"), "can not be empty"))
		}
		enum(v, cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, v1.DoNotSchedule, v1.ScheduleAnyway)
		for _, later := range cs[i+1:] {
			if later.TopologyKey == c.TopologyKey && later.WhenUnsatisfiable == c.WhenUnsatisfiable {
				v.addErrs(field.Duplicate(cp.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if m := c.MinDomains; m != nil {
			if *m <= 0 {
				v.addErrs(field.Invalid(cp.Child("minDomains"), *m, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != v1.DoNotSchedule {
				v.addErrs(field.Invalid(cp.Child("minDomains"), *m, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", v1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		if c.NodeAffinityPolicy != nil {
			enum(v, cp.Child("nodeAffinityPolicy"), *c.NodeAffinityPolicy, v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore)
		}
		if c.NodeTaintsPolicy != nil {
			enum(v, cp.Child("nodeTaintsPolicy"), *c.NodeTaintsPolicy, v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore)
		}
		v.labelKeys(cp, c.MatchLabelKeys, nil, c.LabelSelector)
		v.addErrs(metavalidation.ValidateLabelSelector(c.LabelSelector, selectorOptions, cp.Child("labelSelector"))...)
	}
}
