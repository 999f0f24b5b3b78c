package pod

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks here follow the apiserver's for a container's resources: what
// a resource may be called, which quantities it takes, and how requests
// stand to limits.

// resources checks a container's resource requirements.
func (v *validator) resources(r *v1.ResourceRequirements, p *field.Path) {
	for _, l := range []struct {
		name string
		list v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sets.List(sets.KeySet(l.list)) {
			q, qp := l.list[name], p.Child(l.name).Key(string(name))
			v.resourceName(name, qp)
			switch {
			case q.Sign() < 0:
				v.addErrs(field.Invalid(qp, q.String(), "must be greater than or equal to 0"))
			case isExtendedResource(name) && q.MilliValue()%1000 != 0:
				v.addErrs(field.Invalid(qp, q.String(), "must be an integer"))
			}
			if size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix); ok {
				if page, err := resource.ParseQuantity(size); err != nil || page.Sign() <= 0 || q.Value()%page.Value() != 0 {
					v.addErrs(field.Invalid(qp, q.String(), fmt.Sprintf("must be a whole number of %s pages", size)))
				}
			}
		}
	}
	for _, name := range sets.List(sets.KeySet(r.Requests)) {
		req, rp := r.Requests[name], p.Child("requests").Key(string(name))
		limit, ok := r.Limits[name]
		switch {
		case !ok && !overcommittable(name):
			v.addErrs(field.Required(p.Child("limits").Key(string(name)), fmt.Sprintf("a limit is required for %s, whose request must equal its limit", name)))
		case !ok:
		case !overcommittable(name) && req.Cmp(limit) != 0:
			v.addErrs(field.Invalid(rp, req.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case req.Cmp(limit) > 0:
			v.addErrs(field.Invalid(rp, req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	if hasHugePages(r.Limits) || hasHugePages(r.Requests) {
		if !hasCPUOrMemory(r.Limits) && !hasCPUOrMemory(r.Requests) {
			v.addErrs(field.Forbidden(p, "hugepages need a cpu or memory request or limit"))
		}
	}
	if len(r.Claims) > 0 {
		v.add(p.Child("claims"), "resource claims need an apiserver; %s", noAPIServer)
	}
}

// resourceName checks the name of a container resource: cpu, memory,
// ephemeral-storage or hugepages-<size> unprefixed, or a name with a domain
// prefix, which outside kubernetes.io is an extended resource (a device,
// say) and must read as one.
func (v *validator) resourceName(name v1.ResourceName, p *field.Path) {
	s := string(name)
	if msgs := validation.IsQualifiedName(s); len(msgs) > 0 {
		v.check(p, s, msgs)
		return
	}
	switch {
	case !strings.Contains(s, "/"):
		switch name {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		default:
			if !strings.HasPrefix(s, v1.ResourceHugePagesPrefix) {
				v.addErrs(field.Invalid(p, s, "must be cpu, memory, ephemeral-storage, hugepages-<size> or a name with a domain prefix"))
			}
		}
	case isNativeResource(name):
	case !isExtendedResource(name):
		v.addErrs(field.Invalid(p, s, "must be an extended resource name: a domain prefix, and not starting with requests."))
	}
}

// isNativeResource reports whether name is Kubernetes' own: unprefixed or
// under kubernetes.io.
func isNativeResource(name v1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource reports whether name is an extended resource, one the
// node advertises beyond Kubernetes' own (example.com/gpu).
func isExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	if isNativeResource(name) || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	// Quota names it requests.<name>, which must be a valid name too.
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// overcommittable reports whether a request of name may be below its
// limit: not so for hugepages and extended resources.
func overcommittable(name v1.ResourceName) bool {
	return isNativeResource(name) && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func hasHugePages(l v1.ResourceList) bool {
	for name := range l {
		if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			return true
		}
	}
	return false
}

func hasCPUOrMemory(l v1.ResourceList) bool {
	_, cpu := l[v1.ResourceCPU]
	_, mem := l[v1.ResourceMemory]
	return cpu || mem
}

// divisors are the divisors a resourceFieldRef may give, by resource; any
// other resource (hugepages) takes the memory ones.
var (
	cpuDivisors    = sets.New("1m", "1")
	memoryDivisors = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

// divisor checks the divisor of a resourceFieldRef for resource.
func (v *validator) divisor(res string, d resource.Quantity, p *field.Path) {
	if d.IsZero() {
		return // unset
	}
	allowed := memoryDivisors
	if res == "limits.cpu" || res == "requests.cpu" {
		allowed = cpuDivisors
	}
	if !allowed.Has(d.String()) {
		v.addErrs(field.Invalid(p, d.String(), fmt.Sprintf("must be one of %s for %s", strings.Join(sets.List(allowed), ", "), res)))
	}
}
