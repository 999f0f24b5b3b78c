package pod

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// IsHugePagesMedium reports whether an emptyDir medium is HugePages or
// HugePages-<size>.
func IsHugePagesMedium(m v1.StorageMedium) bool {
	return m == v1.StorageMediumHugePages || strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))
}

// HugePageSize returns the page size of a hugetlbfs emptyDir of medium m
// (IsHugePagesMedium), as the kubelet finds it when it mounts the volume:
// HugePages-<size> names the size, which the pod must request; plain
// HugePages takes the one size the pod requests. The requests are the
// containers' (init ones too) and the pod's.
func HugePageSize(s *v1.PodSpec, m v1.StorageMedium) (resource.Quantity, error) {
	var want *resource.Quantity
	if m != v1.StorageMediumHugePages {
		q, err := resource.ParseQuantity(strings.TrimPrefix(string(m), string(v1.StorageMediumHugePagesPrefix)))
		if err != nil || q.Sign() <= 0 {
			return resource.Quantity{}, fmt.Errorf("medium %s: not a page size", m)
		}
		want = &q
	}
	lists := []v1.ResourceList{}
	if s.Resources != nil {
		lists = append(lists, s.Resources.Requests)
	}
	for _, cs := range [][]v1.Container{s.Containers, s.InitContainers} {
		for i := range cs {
			lists = append(lists, cs[i].Resources.Requests)
		}
	}
	var found *resource.Quantity
	for _, l := range lists {
		for name := range l {
			size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(size)
			if err != nil {
				return resource.Quantity{}, fmt.Errorf("resource %s: not a page size", name)
			}
			switch {
			case want != nil && q.Cmp(*want) == 0:
				found = want
			case want != nil:
			case found != nil && found.Cmp(q) != 0:
				return resource.Quantity{}, fmt.Errorf("medium %s can't be used if containers request multiple huge page sizes", m)
			default:
				found = &q
			}
		}
	}
	if found == nil {
		return resource.Quantity{}, fmt.Errorf("medium %s: hugePages storage requested, but there is no resource request for huge pages", m)
	}
	return *found, nil
}
