package status

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// histObject is a ConfigMap (kind "cm") or a Secret ("secret") of
// namespace ns, name and one value, for the history tests.
func histObject(kind, ns, name, value string) *pod.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	if kind == "secret" {
		return &pod.Object{Secret: &v1.Secret{ObjectMeta: meta, Data: map[string][]byte{"k": []byte(value)}}, Source: "/m/s.yaml"}
	}
	return &pod.Object{ConfigMap: &v1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": value}}, Source: "/m/c.yaml"}
}

// objectChanges are the ConfigMaps' and Secrets' changes after rev as
// "TYPE kind ns/name", each checked to carry its revision as its
// resourceVersion and no Secret value.
func objectChanges(t *testing.T, s *Store, rev uint64) []string {
	t.Helper()
	cms, err := s.ConfigMapChangesSince(rev)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := s.SecretChangesSince(rev)
	if err != nil {
		t.Fatal(err)
	}
	byRev := map[uint64]string{}
	var revs []uint64
	for _, c := range cms {
		if c.Object.ResourceVersion != strconv.FormatUint(c.Rev, 10) {
			t.Errorf("ConfigMap change at %d has resourceVersion %s", c.Rev, c.Object.ResourceVersion)
		}
		byRev[c.Rev] = fmt.Sprintf("%s cm %s/%s=%s", c.Type, c.Object.Namespace, c.Object.Name, c.Object.Data["k"])
		revs = append(revs, c.Rev)
	}
	for _, c := range secs {
		if c.Object.ResourceVersion != strconv.FormatUint(c.Rev, 10) || len(c.Object.Data) != 0 || len(c.Object.StringData) != 0 {
			t.Errorf("Secret change at %d = %+v, want resourceVersion %d and no data", c.Rev, c.Object, c.Rev)
		}
		byRev[c.Rev] = fmt.Sprintf("%s secret %s/%s", c.Type, c.Object.Namespace, c.Object.Name)
		revs = append(revs, c.Rev)
	}
	var out []string
	for r := rev + 1; r <= s.Revision(); r++ {
		if c, ok := byRev[r]; ok {
			out = append(out, c)
		}
	}
	if len(out) != len(revs) {
		t.Errorf("changes %v at revisions %v: two share a revision, or one is past the store's", out, revs)
	}
	return out
}

// TestObjectRevisions: each ConfigMap and Secret added, changed in content
// or removed is one change with its own revision; the same content given
// again is none.
func TestObjectRevisions(t *testing.T) {
	steps := []struct {
		name string
		objs []*pod.Object
		want []string
	}{
		{name: "first set", objs: []*pod.Object{histObject("cm", "a", "x", "1"), histObject("secret", "a", "s", "pw")},
			want: []string{"ADDED cm a/x=1", "ADDED secret a/s"}},
		{name: "the same content in new objects", objs: []*pod.Object{histObject("cm", "a", "x", "1"), histObject("secret", "a", "s", "pw")}},
		{name: "a value changes", objs: []*pod.Object{histObject("cm", "a", "x", "2"), histObject("secret", "a", "s", "pw")},
			want: []string{"MODIFIED cm a/x=2"}},
		{name: "a secret value changes", objs: []*pod.Object{histObject("cm", "a", "x", "2"), histObject("secret", "a", "s", "pw2")},
			want: []string{"MODIFIED secret a/s"}},
		{name: "one goes, one comes", objs: []*pod.Object{histObject("cm", "b", "y", "1"), histObject("secret", "a", "s", "pw2")},
			want: []string{"ADDED cm b/y=1", "DELETED cm a/x=2"}},
		{name: "all go", want: []string{"DELETED cm b/y=1", "DELETED secret a/s"}},
	}
	s := NewStore()
	for _, step := range steps {
		before := s.Revision()
		s.SetObjects(step.objs)
		if got := objectChanges(t, s, before); strings.Join(got, "; ") != strings.Join(step.want, "; ") {
			t.Errorf("%s: changes %v, want %v", step.name, got, step.want)
		}
		if _, rev := s.ConfigMapsAt(""); rev != s.Revision() {
			t.Errorf("%s: ConfigMapsAt at %d, want %d", step.name, rev, s.Revision())
		}
	}
	if _, err := s.ConfigMapChangesSince(1); !errors.Is(err, ErrRevisionGone) {
		t.Errorf("ConfigMapChangesSince(1) = %v, want ErrRevisionGone", err)
	}
	if _, err := s.SecretChangesSince(s.Revision() + 1); !errors.Is(err, ErrRevisionGone) {
		t.Errorf("SecretChangesSince(a future revision) = %v, want ErrRevisionGone", err)
	}
}

// TestObjectResourceVersion: an object's resourceVersion is the revision
// of its last change, and stays while it does not change.
func TestObjectResourceVersion(t *testing.T) {
	s := NewStore()
	s.SetObjects([]*pod.Object{histObject("cm", "a", "x", "1"), histObject("cm", "a", "y", "1")})
	x := s.ConfigMap("a", "x").ResourceVersion
	s.SetObjects([]*pod.Object{histObject("cm", "a", "x", "1"), histObject("cm", "a", "y", "2")})
	if got := s.ConfigMap("a", "x").ResourceVersion; got != x {
		t.Errorf("unchanged ConfigMap's resourceVersion %s, want %s kept", got, x)
	}
	if got, want := s.ConfigMap("a", "y").ResourceVersion, strconv.FormatUint(s.Revision(), 10); got != want {
		t.Errorf("changed ConfigMap's resourceVersion %s, want %s", got, want)
	}
}

// TestNamespaceRevisions: a namespace appears with its first pod or
// object and goes with its last, each at the revision of that change;
// "default" is always there.
func TestNamespaceRevisions(t *testing.T) {
	p := func(ns, name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	var objs []*pod.Object
	steps := []struct {
		name   string
		do     func(s *Store)
		want   []string
		listed string
	}{
		{name: "start", listed: "default kube-node-lease"},
		{name: "a pod in default", do: func(s *Store) { s.SetPod(p("default", "a")) }, listed: "default kube-node-lease"},
		{name: "the first pod of team", do: func(s *Store) { s.SetPod(p("team", "a")) },
			want: []string{"ADDED team"}, listed: "default kube-node-lease team"},
		{name: "a second pod of team", do: func(s *Store) { s.SetPod(p("team", "b")) }, listed: "default kube-node-lease team"},
		{name: "a pod changes", do: func(s *Store) {
			c := p("team", "b")
			c.Labels = map[string]string{"x": "y"}
			s.SetPod(c)
		}, listed: "default kube-node-lease team"},
		{name: "a ConfigMap in team and one in cfg", do: func(s *Store) {
			objs = []*pod.Object{histObject("cm", "team", "x", "1"), histObject("secret", "cfg", "s", "1")}
			s.SetObjects(objs)
		}, want: []string{"ADDED cfg"}, listed: "cfg default kube-node-lease team"},
		{name: "the pods of team go", do: func(s *Store) {
			s.DeletePod(pod.Key{Namespace: "team", Name: "a"})
			s.DeletePod(pod.Key{Namespace: "team", Name: "b"})
		}, listed: "cfg default kube-node-lease team"},
		{name: "the objects go", do: func(s *Store) { s.SetObjects(nil) },
			want: []string{"DELETED team", "DELETED cfg"}, listed: "default kube-node-lease"},
		{name: "the pod of default goes", do: func(s *Store) { s.DeletePod(pod.Key{Namespace: "default", Name: "a"}) }, listed: "default kube-node-lease"},
	}
	s := NewStore()
	start := s.Revision()
	for _, step := range steps {
		before := s.Revision()
		if step.do != nil {
			step.do(s)
		}
		changes, err := s.NamespaceChangesSince(before)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range changes {
			got = append(got, string(c.Type)+" "+c.Object.Name)
			if c.Object.ResourceVersion != strconv.FormatUint(c.Rev, 10) || c.Rev <= before || c.Rev > s.Revision() {
				t.Errorf("%s: change %s at %d with resourceVersion %s", step.name, got[len(got)-1], c.Rev, c.Object.ResourceVersion)
			}
		}
		if strings.Join(got, "; ") != strings.Join(step.want, "; ") {
			t.Errorf("%s: namespace changes %v, want %v", step.name, got, step.want)
		}
		nss, rev := s.NamespacesAt()
		var names []string
		for _, ns := range nss {
			names = append(names, ns.Name)
			if ns.Status.Phase != v1.NamespaceActive || ns.UID == "" || ns.CreationTimestamp.IsZero() {
				t.Errorf("%s: namespace %+v, want Active with a UID and a creation time", step.name, ns)
			}
		}
		if strings.Join(names, " ") != step.listed || rev != s.Revision() {
			t.Errorf("%s: NamespacesAt = %v at %d, want %s at %d", step.name, names, rev, step.listed, s.Revision())
		}
	}
	if all, err := s.NamespaceChangesSince(start); err != nil || len(all) != 4 {
		t.Errorf("NamespaceChangesSince(start) = %d changes, %v; want 4", len(all), err)
	}
	if _, err := s.NamespaceChangesSince(start - 1); !errors.Is(err, ErrRevisionGone) {
		t.Errorf("NamespaceChangesSince(before the start) = %v, want ErrRevisionGone", err)
	}
}

// TestChangeLogForgets: once full, the log forgets its oldest change and
// a version before the ones kept is gone.
func TestChangeLogForgets(t *testing.T) {
	l := newChangeLog[int](100)
	for i := range maxHistory + 2 {
		l.add(Change[int]{Rev: 101 + uint64(i), Type: WatchAdded, Object: i})
	}
	current := uint64(100 + maxHistory + 2)
	id := func(c Change[int]) int { return c.Object }
	tests := []struct {
		rev     uint64
		want    int // changes, or -1 for gone
		wantOld int // the first change's object
	}{
		{rev: 100, want: -1},
		{rev: 101, want: -1},
		{rev: 102, want: maxHistory, wantOld: 2},
		{rev: current - 1, want: 1, wantOld: maxHistory + 1},
		{rev: current, want: 0},
		{rev: current + 1, want: -1},
	}
	for _, tc := range tests {
		got, err := changesSince(&l, tc.rev, current, id)
		if tc.want < 0 {
			if !errors.Is(err, ErrRevisionGone) {
				t.Errorf("changesSince(%d) = %d, %v; want ErrRevisionGone", tc.rev, len(got), err)
			}
			continue
		}
		if err != nil || len(got) != tc.want || (tc.want > 0 && got[0] != tc.wantOld) {
			t.Errorf("changesSince(%d) = %d changes from %v, %v; want %d from %d", tc.rev, len(got), got[:min(1, len(got))], err, tc.want, tc.wantOld)
		}
	}
}
