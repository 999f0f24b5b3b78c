package e2e

import (
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// TestKubectlExplain: a real kubectl 1.30 explains the served types from
// the API's OpenAPI v3 documents, and from the v2 one in protobuf.
func TestKubectlExplain(t *testing.T) {
	e := harness.NewEnv(t)
	_, _, kubeconfig := startWithAPI(t, e)
	k := kubectl{t: t, bin: kubetools.Kubectl(t), kubeconfig: kubeconfig}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"explain", "pod.spec.containers"}, []string{"KIND:       Pod", "FIELD: containers <[]Container>", "image\t<string>"}},
		{[]string{"explain", "nodes.status.nodeInfo"}, []string{"KIND:       Node", "kubeletVersion\t<string> -required-"}},
		{[]string{"explain", "selfsubjectaccessreviews.spec"}, []string{"GROUP:      authorization.k8s.io", "resourceAttributes"}},
		{[]string{"explain", "pod.spec.containers", "--output=plaintext-openapiv2"}, []string{"KIND:     Pod", "RESOURCE: containers <[]Object>"}},
	} {
		out := k.must(tc.args...)
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, out)
			}
		}
	}
}
