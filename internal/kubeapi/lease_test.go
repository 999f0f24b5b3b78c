package kubeapi

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// TestNodeLeaseRenew: a read renews the lease only once the heartbeat has
// moved a renew period past the last renewal, and each renewal moves its
// resourceVersion on, past the store's revision.
func TestNodeLeaseRenew(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const every = 10 * time.Second
	for _, tc := range []struct {
		name      string
		beats     []time.Time
		storeRevs []uint64
		renewed   time.Time
		rev       uint64
	}{
		{"no heartbeat yet", []time.Time{{}}, []uint64{7}, time.Time{}, 7},
		{"the first heartbeat", []time.Time{{}, t0}, []uint64{7, 7}, t0, 8},
		{"within the period", []time.Time{t0, t0.Add(every - time.Millisecond)}, []uint64{7, 7}, t0, 8},
		{"a period on", []time.Time{t0, t0.Add(every)}, []uint64{7, 7}, t0.Add(every), 9},
		{"the store moved on", []time.Time{t0, t0.Add(2 * every)}, []uint64{7, 20}, t0.Add(2 * every), 21},
		{"the clock stepped back", []time.Time{t0, t0.Add(-time.Minute)}, []uint64{7, 7}, t0.Add(-time.Minute), 9},
		{"a stuck heartbeat", []time.Time{t0, t0, t0}, []uint64{7, 8, 9}, t0, 8},
		{"microseconds", []time.Time{t0.Add(1500 * time.Nanosecond)}, []uint64{7}, t0.Add(time.Microsecond), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l nodeLease
			var renewed time.Time
			var rev uint64
			for i, beat := range tc.beats {
				renewed, rev = l.renew(beat, every, tc.storeRevs[i])
			}
			if !renewed.Equal(tc.renewed) || rev != tc.rev {
				t.Errorf("renewed %v at %d, want %v at %d", renewed, rev, tc.renewed, tc.rev)
			}
		})
	}
}

// fakeHeartbeat is a heartbeat a test moves.
type fakeHeartbeat struct {
	mu   sync.Mutex
	beat time.Time
}

func (h *fakeHeartbeat) get() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beat
}

func (h *fakeHeartbeat) set(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beat = t
}

// leaseAPI serves a node named node1, created at created, with a Lease
// renewed at h's heartbeat every renew.
func leaseAPI(t *testing.T, h *fakeHeartbeat, renew time.Duration, created time.Time) *testAPI {
	t.Helper()
	api := newTestAPI(t, Config{NodeName: "node1", Heartbeat: h.get, leaseRenew: renew})
	api.store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", CreationTimestamp: metav1.NewTime(created)}})
	return api
}

// TestNodeLease: client-go gets and lists the node's Lease in
// kube-node-lease as a kubelet's: held by the node for 40 s, renewed at
// the heartbeat, owned by the Node the API serves, created with it. The
// namespace is listed; writes are refused.
func TestNodeLease(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	beat := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	h := &fakeHeartbeat{beat: beat}
	api := leaseAPI(t, h, 0, created)
	cs := api.clientset(t)
	ctx := t.Context()

	node, err := cs.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity != "node1" || spec.LeaseDurationSeconds == nil || *spec.LeaseDurationSeconds != 40 ||
		spec.RenewTime == nil || !spec.RenewTime.Time.Equal(beat) || spec.AcquireTime != nil {
		t.Errorf("lease spec %+v, want node1's for 40 s renewed at %v", spec, beat)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node1", UID: node.UID}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0] != owner || node.UID == "" {
		t.Errorf("owners %+v, want %+v", lease.OwnerReferences, owner)
	}
	if !lease.CreationTimestamp.Equal(&node.CreationTimestamp) || !lease.CreationTimestamp.Time.Equal(created) ||
		lease.UID == "" || lease.ResourceVersion == "" {
		t.Errorf("lease metadata %+v, want created at %v with a UID and resourceVersion", lease.ObjectMeta, created)
	}

	// A heartbeat within the period renews nothing.
	h.set(beat.Add(defaultLeaseSeconds*time.Second/4 - time.Second))
	again, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != lease.ResourceVersion || !again.Spec.RenewTime.Time.Equal(beat) {
		t.Errorf("renewed within the period: %s at %v, was %s", again.ResourceVersion, again.Spec.RenewTime, lease.ResourceVersion)
	}

	for ns, want := range map[string]int{"": 1, v1.NamespaceNodeLease: 1, "default": 0} {
		list, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != want || list.ResourceVersion == "" {
			t.Errorf("leases in %q: %d at %q, want %d", ns, len(list.Items), list.ResourceVersion, want)
		}
	}
	if _, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("another lease: %v, want NotFound", err)
	}

	namespaces, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range namespaces.Items {
		names = append(names, ns.Name)
	}
	if !slices.Contains(names, v1.NamespaceNodeLease) || !slices.Contains(names, "default") {
		t.Errorf("namespaces %v, want kube-node-lease and default", names)
	}

	err = cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, "node1", metav1.DeleteOptions{})
	if !apierrors.IsMethodNotSupported(err) || err.Error() != nodeLeaseWriteText {
		t.Errorf("delete: %v, want 405 %q", err, nodeLeaseWriteText)
	}
	_, err = cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{})
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("update: %v, want 405", err)
	}
}

// TestNodeLeaseDuration: Config.LeaseDurationSeconds (the kubelet's
// nodeLeaseDurationSeconds) is the Lease's duration, renewed every
// quarter of it.
func TestNodeLeaseDuration(t *testing.T) {
	beat := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &fakeHeartbeat{beat: beat}
	api := newTestAPI(t, Config{NodeName: "node1", Heartbeat: h.get, LeaseDurationSeconds: 20})
	api.store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", CreationTimestamp: metav1.NewTime(beat.Add(-time.Hour))}})
	leases := api.clientset(t).CoordinationV1().Leases(v1.NamespaceNodeLease)
	for _, tc := range []struct {
		beat, renewed time.Time
	}{
		{beat, beat},
		// Within 5 s, a quarter of 20 s: not renewed.
		{beat.Add(5*time.Second - time.Millisecond), beat},
		{beat.Add(5 * time.Second), beat.Add(5 * time.Second)},
	} {
		h.set(tc.beat)
		lease, err := leases.Get(t.Context(), "node1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 20 || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.Time.Equal(tc.renewed) {
			t.Errorf("at heartbeat %v: lease spec %+v, want 20 s renewed at %v", tc.beat, lease.Spec, tc.renewed)
		}
	}
}

// TestNodeLeaseForms: the Lease in protobuf and YAML, and its Table with
// the apiserver's columns.
func TestNodeLeaseForms(t *testing.T) {
	beat := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := leaseAPI(t, &fakeHeartbeat{beat: beat}, 0, beat.Add(-time.Hour))
	for _, contentType := range []string{"application/vnd.kubernetes.protobuf", "application/yaml"} {
		cfg := rest.CopyConfig(api.config)
		cfg.AcceptContentTypes, cfg.ContentType = contentType, contentType
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(t.Context(), "node1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", contentType, err)
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.Time.Equal(beat) || *lease.Spec.HolderIdentity != "node1" {
			t.Errorf("%s: %+v", contentType, lease.Spec)
		}
	}

	table := getTable(t, api, "/apis/coordination.k8s.io/v1/leases")
	var columns []string
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if !slices.Equal(columns, []string{"Name", "Holder", "Age"}) || len(table.Rows) != 1 {
		t.Fatalf("columns %v, %d rows", columns, len(table.Rows))
	}
	if cells := table.Rows[0].Cells; cells[0] != "node1" || cells[1] != "node1" {
		t.Errorf("cells %v", cells)
	}
}

// TestNodeLeaseWatch: a watch of the Lease sees each renewal as MODIFIED,
// with a new resourceVersion, once the heartbeat has moved a renew
// period on; a watch from a list's resourceVersion too, without the
// Lease it listed as ADDED again.
func TestNodeLeaseWatch(t *testing.T) {
	const renew = 20 * time.Millisecond
	beat := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &fakeHeartbeat{beat: beat}
	api := leaseAPI(t, h, renew, beat.Add(-time.Hour))
	leases := api.clientset(t).CoordinationV1().Leases(v1.NamespaceNodeLease)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	for _, fromList := range []bool{false, true} {
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		was := &list.Items[0]
		var opts metav1.ListOptions
		if fromList {
			opts.ResourceVersion = list.ResourceVersion
		}
		w, err := leases.Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !fromList {
			first := nextLeaseEvent(t, ctx, w)
			if first.Type != watch.Added {
				t.Fatalf("first event %s, want ADDED", first.Type)
			}
			was = first.Object.(*coordinationv1.Lease)
		}

		beat = beat.Add(renew)
		h.set(beat)
		ev := nextLeaseEvent(t, ctx, w)
		got := ev.Object.(*coordinationv1.Lease)
		if ev.Type != watch.Modified || got.Spec.RenewTime == nil || !got.Spec.RenewTime.Time.Equal(beat) || got.ResourceVersion == was.ResourceVersion {
			t.Errorf("watching from %q, after a renewal: %s renewed at %v (%s), want MODIFIED at %v after %s",
				opts.ResourceVersion, ev.Type, got.Spec.RenewTime, got.ResourceVersion, beat, was.ResourceVersion)
		}
		w.Stop()
	}
}

// nextLeaseEvent is w's next event other than a bookmark.
func nextLeaseEvent(t *testing.T, ctx context.Context, w watch.Interface) watch.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			if ev.Type != watch.Bookmark {
				return ev
			}
		case <-ctx.Done():
			t.Fatal("no watch event before the deadline")
		}
	}
}

// TestKubectlLease: a real kubectl finds leases in discovery and their
// schema in the OpenAPI documents, lists the Lease with the apiserver's
// columns, and describe node shows it instead of failing to get it.
func TestKubectlLease(t *testing.T) {
	kubectl := kubetools.Kubectl(t)
	beat := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := leaseAPI(t, &fakeHeartbeat{beat: beat}, 0, beat.Add(-time.Hour))
	kc := api.kubeconfig(t)
	for _, tc := range []struct {
		args        []string
		want, never []string
	}{
		{[]string{"get", "leases", "-A"}, []string{"NAMESPACE         NAME    HOLDER   AGE", "kube-node-lease   node1   node1"}, nil},
		{[]string{"get", "namespaces"}, []string{"kube-node-lease   Active"}, nil},
		{[]string{"api-resources", "--api-group", "coordination.k8s.io"}, []string{"leases", "coordination.k8s.io/v1   true         Lease"}, nil},
		{[]string{"explain", "lease.spec.renewTime"}, []string{"GROUP:      coordination.k8s.io", "FIELD: renewTime <string>", "last updated the"}, nil},
		{[]string{"describe", "node", "node1"},
			[]string{"Lease:\n  HolderIdentity:  node1\n  AcquireTime:     <unset>\n  RenewTime:       Fri, 02 Jan 2026 03:04:05 +0000\n"},
			[]string{"Failed to get lease"}},
	} {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kc, "--cache-dir", t.TempDir()}, tc.args...)...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "TZ=UTC"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, out)
			}
		}
		for _, never := range tc.never {
			if strings.Contains(string(out), never) {
				t.Errorf("kubectl %s says %q:\n%s", strings.Join(tc.args, " "), never, out)
			}
		}
	}
}

// TestKubectlWatchLease: kubectl get leases -w shows a renewal as a
// MODIFIED line.
func TestKubectlWatchLease(t *testing.T) {
	kubectl := kubetools.Kubectl(t)
	const renew = 20 * time.Millisecond
	beat := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &fakeHeartbeat{beat: beat}
	api := leaseAPI(t, h, renew, beat.Add(-time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", api.kubeconfig(t), "--cache-dir", t.TempDir(),
		"get", "leases", "-A", "-w", "--output-watch-events")
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		cancel()
		for range lines {
		}
		_ = cmd.Wait()
	}()
	waitLine := func(prefix string) {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl ended before a line %q", prefix)
				}
				if strings.HasPrefix(line, prefix) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no line %q before the deadline", prefix)
			}
		}
	}
	waitLine("ADDED      kube-node-lease   node1   node1")
	h.set(beat.Add(renew))
	waitLine("MODIFIED   kube-node-lease   node1   node1")
}
