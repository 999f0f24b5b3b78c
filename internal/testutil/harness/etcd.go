package harness

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/etcdtest"
)

// Where kubeadm's etcd manifest mounts the certificates and the data.
const (
	EtcdPKIDir  = "/etc/kubernetes/pki/etcd"
	EtcdDataDir = "/var/lib/etcd"
)

// EtcdNode is a local etcd as kubeadm sets one up on a control-plane node
// (etcdtest.Member: its ports and flags), with its certificates and data
// in directories of the test's.
type EtcdNode struct {
	etcdtest.Member
	PKI, Data string // host directories, mounted at EtcdPKIDir and EtcdDataDir
}

// NewEtcdNode writes kubeadm's etcd certificates into dir/pki and picks
// the ports; dir/data is etcd's data directory (staticlet creates it, as
// the volume's type is DirectoryOrCreate).
func NewEtcdNode(tb testing.TB, dir string) *EtcdNode {
	tb.Helper()
	m, err := etcdtest.NewMember(TestNode)
	if err != nil {
		tb.Fatal(err)
	}
	n := &EtcdNode{Member: m, PKI: filepath.Join(dir, "pki"), Data: filepath.Join(dir, "data")}
	if err := etcdtest.WritePKI(n.PKI); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Pod is the etcd pod kubeadm 1.30 writes to
// /etc/kubernetes/manifests/etcd.yaml, but for n's ports and directories.
func (n *EtcdNode) Pod() *v1.Pod {
	probe := func(path string, failureThreshold int32) *v1.Probe {
		return &v1.Probe{
			ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Host: "127.0.0.1", Path: path, Port: intstr.FromInt32(int32(n.MetricsPort)), Scheme: v1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, FailureThreshold: failureThreshold,
		}
	}
	hostPath := func(name, path string) v1.Volume {
		t := v1.HostPathDirectoryOrCreate
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	priority := int32(2000001000)
	return &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "etcd", Namespace: metav1.NamespaceSystem,
			Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
			Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": n.ClientURL()},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:            "etcd",
				Image:           etcdtest.ImageRef,
				ImagePullPolicy: v1.PullIfNotPresent,
				Command:         append([]string{"etcd"}, n.Flags(EtcdPKIDir, EtcdDataDir)...),
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi"),
				}},
				VolumeMounts: []v1.VolumeMount{
					{Name: "etcd-data", MountPath: EtcdDataDir},
					{Name: "etcd-certs", MountPath: EtcdPKIDir},
				},
				LivenessProbe: probe("/health?exclude=NOSPACE&serializable=true", 8),
				StartupProbe:  probe("/health?serializable=false", 24),
			}},
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Priority:          &priority,
			SecurityContext:   &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			Volumes:           []v1.Volume{hostPath("etcd-certs", n.PKI), hostPath("etcd-data", n.Data)},
		},
	}
}

// EtcdManifest is p as YAML, as kubeadm writes it.
func EtcdManifest(tb testing.TB, p *v1.Pod) string {
	tb.Helper()
	b, err := yaml.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// Client is a client of n's etcd, closed when the test ends.
func (n *EtcdNode) Client(tb testing.TB) *etcdtest.Client {
	tb.Helper()
	c, err := etcdtest.NewClient(n.ClientURL(), n.PKI)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// etcdArchive is the etcd image archive, built once per process: etcd
// itself is built once per machine (make test builds it before the tests).
var etcdArchive = sync.OnceValues(func() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.BuildTimeout)
	defer cancel()
	bin, err := etcdtest.Build(ctx)
	if err != nil {
		return nil, err
	}
	return etcdtest.Archive(bin)
})

// ImportEtcd imports the etcd image into namespace ns of ctrd.
func ImportEtcd(tb testing.TB, ctrd *ctrdtest.Env, ns string) {
	tb.Helper()
	archive, err := etcdArchive()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ctrd.Import(ctx, ns, bytes.NewReader(archive)); err != nil {
		tb.Fatal(err)
	}
}
