package kubeapi

import (
	"net/http"
	"runtime"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// kubeVersion is the version of the Kubernetes API staticlet implements:
// that of the k8s.io/api module it is built with.
const (
	kubeMajor = "1"
	kubeMinor = "37"
	kubePatch = "2"
)

// contentTypeGroupDiscovery is the media type of an aggregated discovery
// document, by which clients tell it from a legacy one.
const contentTypeGroupDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// version serves /version: the Kubernetes version implemented, with
// staticlet's own as build metadata.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	info := version.Info{
		Major:      kubeMajor,
		Minor:      kubeMinor,
		GitVersion: "v" + kubeMajor + "." + kubeMinor + "." + kubePatch + "+staticlet-" + strings.TrimPrefix(s.cfg.Version, "v"),
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	s.writeJSON(w, r, &info)
}

// groupVersions returns the group versions the API serves, the core group
// ("") first, then the others sorted.
func (s *Server) groupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, res := range s.resources {
		if !slices.Contains(out, res.gv) {
			out = append(out, res.gv)
		}
	}
	slices.SortStableFunc(out, func(a, b schema.GroupVersion) int {
		return strings.Compare(a.Group, b.Group)
	})
	return out
}

// apiVersions serves /api: the legacy versions document, or the core
// group's aggregated discovery document.
func (s *Server) apiVersions(w http.ResponseWriter, r *http.Request) {
	t, ok := negotiate(r.Header.Get("Accept"), asGroupDiscovery)
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	if t.as == asGroupDiscovery {
		s.writeGroupDiscovery(w, r, true)
		return
	}
	s.writeObject(w, r, http.StatusOK, t, &metav1.APIVersions{
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	})
}

// apiGroups serves /apis: the groups other than the core one, or their
// aggregated discovery document.
func (s *Server) apiGroups(w http.ResponseWriter, r *http.Request) {
	t, ok := negotiate(r.Header.Get("Accept"), asGroupDiscovery)
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	if t.as == asGroupDiscovery {
		s.writeGroupDiscovery(w, r, false)
		return
	}
	list := &metav1.APIGroupList{}
	for _, gv := range s.groupVersions() {
		if gv.Group == "" {
			continue
		}
		list.Groups = append(list.Groups, s.group(gv.Group))
	}
	s.writeObject(w, r, http.StatusOK, t, list)
}

// group is the APIGroup document of a group.
func (s *Server) group(name string) metav1.APIGroup {
	g := metav1.APIGroup{Name: name}
	for _, gv := range s.groupVersions() {
		if gv.Group == name {
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			g.Versions = append(g.Versions, v)
		}
	}
	if len(g.Versions) > 0 {
		g.PreferredVersion = g.Versions[0]
	}
	return g
}

// apiGroup serves /apis/GROUP.
func (s *Server) apiGroup(w http.ResponseWriter, r *http.Request, name string) {
	g := s.group(name)
	if len(g.Versions) == 0 {
		s.notFound(w, r)
		return
	}
	s.writeObject(w, r, http.StatusOK, target{mediaType: mediaJSON}, &g)
}

// groupVersionResources serves /api/v1 and /apis/GROUP/VERSION: the
// APIResourceList of the resources there, subresources included.
func (s *Server) groupVersionResources(w http.ResponseWriter, r *http.Request, parts []string) {
	gv := schema.GroupVersion{Version: parts[1]}
	if parts[0] == "apis" {
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
	}
	list := &metav1.APIResourceList{GroupVersion: gv.String()}
	for _, res := range s.resources {
		if res.gv != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.name, SingularName: res.singular, Namespaced: res.namespaced,
			Kind: res.kind, Verbs: res.verbs(), ShortNames: res.shortNames, Categories: res.categories,
		})
		for _, name := range sortedKeys(res.subresources) {
			sub := res.subresources[name]
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.name + "/" + name, Namespaced: res.namespaced, Kind: sub.kind, Verbs: sub.verbs,
			})
		}
	}
	if len(list.APIResources) == 0 {
		s.notFound(w, r)
		return
	}
	s.writeObject(w, r, http.StatusOK, target{mediaType: mediaJSON}, list)
}

// writeGroupDiscovery writes the aggregated discovery document of the core
// group (core) or of the other groups.
func (s *Server) writeGroupDiscovery(w http.ResponseWriter, r *http.Request, core bool) {
	list := &apidiscoveryv2.APIGroupDiscoveryList{}
	for _, gv := range s.groupVersions() {
		if (gv.Group == "") != core {
			continue
		}
		if n := len(list.Items); n == 0 || list.Items[n-1].Name != gv.Group {
			list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}})
		}
		g := &list.Items[len(list.Items)-1]
		g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{
			Version:   gv.Version,
			Resources: s.discoveryResources(gv),
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		})
	}
	b, err := s.codecs.encode(mediaJSON, list)
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentTypeGroupDiscovery)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// discoveryResources are the aggregated discovery entries of gv's
// resources.
func (s *Server) discoveryResources(gv schema.GroupVersion) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	for _, res := range s.resources {
		if res.gv != gv {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if res.namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		d := apidiscoveryv2.APIResourceDiscovery{
			Resource:         res.name,
			ResponseKind:     &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: res.kind},
			Scope:            scope,
			SingularResource: res.singular,
			Verbs:            res.verbs(),
			ShortNames:       res.shortNames,
			Categories:       res.categories,
		}
		for _, name := range sortedKeys(res.subresources) {
			sub := res.subresources[name]
			d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource:  name,
				ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: sub.kind},
				Verbs:        sub.verbs,
			})
		}
		out = append(out, d)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
