package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// startWithAPI starts staticlet with the Kubernetes API on a loopback port
// of its choosing and returns it with a client-go config from `staticlet
// kubeconfig` and the kubeconfig's path.
func startWithAPI(t *testing.T, e *harness.Env) (*harness.Daemon, *rest.Config, string) {
	t.Helper()
	d := e.Start("--api-address", "127.0.0.1:0")
	kubeconfig := filepath.Join(e.Dir, "kubeconfig")
	out, err := exec.Command(harness.Binary(t), "kubeconfig", "--root-dir", e.Root, "-o", kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("staticlet kubeconfig: %v\n%s", err, out)
	}
	fi, err := os.Stat(kubeconfig)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v, %v; want mode 0600", fi, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return d, cfg, kubeconfig
}

// TestKubeAPIPods: client-go, with the kubeconfig staticlet prints, lists
// the node's pods, the node and the namespaces, and watches a pod through
// a restart and the removal of its manifest; a client without the
// certificate gets 401, and a delete is refused naming the manifest.
func TestKubeAPIPods(t *testing.T) {
	e := harness.NewEnv(t)
	_, cfg, _ := startWithAPI(t, e)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.Write("web.yaml", exiterPod("web", "Always", "0"))
	name := "web-" + harness.TestNode
	harness.WaitFor(t, 60*time.Second, "the pod running, through the API", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return harness.Running(p), harness.Describe(p)
	})

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != harness.TestNode {
		t.Fatalf("nodes = %+v, %v; want the one node %s", nodes, err, harness.TestNode)
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil || len(nss.Items) == 0 {
		t.Fatalf("namespaces = %+v, %v", nss, err)
	}

	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion,
		FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The container exits 0 and restarts (restartPolicy Always): the watch
	// sees the restart count grow, then the pod go with its manifest.
	waitWatch(t, w, "a restart", func(ev kwatch.Event) bool {
		p, ok := ev.Object.(*v1.Pod)
		return ok && ev.Type == kwatch.Modified && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0
	})

	err = cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), filepath.Join(e.Manifest, "web.yaml")) {
		t.Errorf("delete through the API: %v, want 405 naming the manifest", err)
	}
	e.Remove("web.yaml")
	waitWatch(t, w, "the deletion", func(ev kwatch.Event) bool { return ev.Type == kwatch.Deleted })

	anon := rest.AnonymousClientConfig(cfg)
	anonCS, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anonCS.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("list without the client certificate: %v, want 401", err)
	}
}

// exiterPod is a pod whose container sleeps a little and exits with code.
func exiterPod(name, policy, code string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "sleep 2; exit %s"]
`, name, policy, code)
}

// waitEvent reads w until an event satisfies ok.
func waitWatch(t *testing.T, w kwatch.Interface, what string, ok func(kwatch.Event) bool) {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatalf("the watch ended before %s", what)
			}
			if ok(ev) {
				return
			}
		case <-timeout:
			t.Fatalf("no watch event for %s", what)
		}
	}
}

// TestKubeAPIOff: without --api-address staticlet listens on no TCP port
// and writes no certificates.
func TestKubeAPIOff(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	if n := tcpListeners(t, d.Cmd.Process.Pid); n != 0 {
		t.Errorf("staticlet without --api-address listens on %d TCP sockets, want none", n)
	}
	if _, err := os.Stat(filepath.Join(e.Root, "api")); !os.IsNotExist(err) {
		t.Errorf("%s/api exists without --api-address: %v", e.Root, err)
	}
}

// tcpListeners counts the listening TCP sockets that process pid holds.
func tcpListeners(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local remote st ... inode is the tenth field; 0A is LISTEN.
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] {
				n++
			}
		}
		f.Close()
	}
	return n
}
