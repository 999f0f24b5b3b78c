// Package kubetools gives tests the Kubernetes clients people point at a
// node: a real kubectl of the release staticlet's API speaks (KubectlVersion)
// and k9s (K9sVersion), built from the Go module proxy on first use into a
// cache shared by every test process and checkout on the machine (package
// modbuild), and a tmux session to run a full-screen client such as k9s in
// and read its screen (TmuxSession).
//
// It runs no server and writes no kubeconfig: tests bring both. Kubectl and
// K9s skip in the unit tier, and when a tool cannot be built they skip off
// CI and fail with CI=true (package tier). Its functions are safe for
// concurrent use; a build runs once however many processes ask at the same
// time.
package kubetools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/modbuild"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// KubectlVersion is the kubectl release built: the newest 1.30 patch
// release the module proxy served when it was pinned (go list -m -versions
// k8s.io/kubectl, whose v0.30.N is Kubernetes v1.30.N).
const KubectlVersion = "v1.30.14"

// kubectlModuleVersion is KubectlVersion's version of the k8s.io staging
// modules.
const kubectlModuleVersion = "v0.30.14"

// K9sVersion is the k9s release built: the newest the module proxy served
// when it was pinned. Its go.mod has no replace directives.
const K9sVersion = "v0.50.16"

// CacheDir holds the built tools, one directory per tool, version and Go
// version (kubectl/VERSION-GOVERSION/kubectl, k9s/VERSION-GOVERSION/k9s),
// kept between test runs and shared by every checkout on the machine.
const CacheDir = "/var/cache/staticlet-test"

// BuildTimeout bounds a cold build of one tool: a few minutes each on an
// idle two-core machine, several times that on a busy one.
const BuildTimeout = 30 * time.Minute

// kubectlMain is kubectl's main package: in Kubernetes it lives in
// k8s.io/kubernetes/cmd/kubectl, a module whose replace directives no other
// module can build from, and it only runs the command tree of the
// k8s.io/kubectl module, as this does. The auth plugins are linked as
// kubectl links them, for kubeconfigs that name one.
const kubectlMain = `package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
`

// kubectlRecipe builds kubectl with its version stamped where Kubernetes'
// own build stamps it (both version packages: kubectl version --client
// reads client-go's, the rest component-base's), so that it reports, and
// compares with the server, KubectlVersion rather than v0.0.0-master. The
// commit, which the module proxy does not say, is left empty rather than
// the placeholder the sources carry.
func kubectlRecipe() modbuild.Recipe {
	ldflags := "-s -w"
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags += fmt.Sprintf(" -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=30 -X %[1]s.gitTreeState=clean -X %[1]s.gitCommit=",
			pkg, KubectlVersion)
	}
	return modbuild.Recipe{
		Require:  []string{"k8s.io/kubectl@" + kubectlModuleVersion},
		Commands: []modbuild.Command{{Name: "kubectl", Main: kubectlMain}},
		LDFlags:  ldflags,
	}
}

// k9sRecipe builds k9s's own main package with its version stamped as its
// release builds stamp it.
func k9sRecipe() modbuild.Recipe {
	return modbuild.Recipe{
		Require:  []string{"github.com/derailed/k9s@" + K9sVersion},
		Commands: []modbuild.Command{{Name: "k9s", Package: "github.com/derailed/k9s"}},
		LDFlags:  "-s -w -X github.com/derailed/k9s/cmd.version=" + K9sVersion,
	}
}

// BuildKubectl returns the path of a static kubectl of KubectlVersion,
// building it from the module proxy first if CacheDir does not hold one
// built by the installed Go. Give ctx BuildTimeout.
func BuildKubectl(ctx context.Context) (string, error) {
	return build(ctx, "kubectl", KubectlVersion, kubectlRecipe())
}

// BuildK9s returns the path of a static k9s of K9sVersion, as BuildKubectl
// does kubectl's.
func BuildK9s(ctx context.Context) (string, error) {
	return build(ctx, "k9s", K9sVersion, k9sRecipe())
}

// build builds r, whose one command is name, into its cache entry.
func build(ctx context.Context, name, version string, r modbuild.Recipe) (string, error) {
	goVersion, err := modbuild.GoVersion(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir, name, version+"-"+goVersion)
	if err := modbuild.Build(ctx, dir, r); err != nil {
		return "", fmt.Errorf("building %s %s: %w", name, version, err)
	}
	return filepath.Join(dir, name), nil
}

// Kubectl returns the path of kubectl (BuildKubectl) for t, building it
// first if needed. It skips t in the unit tier, and when the build fails
// skips it off CI and fails it with CI=true.
func Kubectl(t testing.TB) string {
	t.Helper()
	return tool(t, "kubectl", BuildKubectl)
}

// K9s returns the path of k9s (BuildK9s) for t, as Kubectl does kubectl's.
func K9s(t testing.TB) string {
	t.Helper()
	return tool(t, "k9s", BuildK9s)
}

// tool runs build for t under BuildTimeout.
func tool(t testing.TB, name string, build func(context.Context) (string, error)) string {
	t.Helper()
	tier.Integration(t, name+" built from the Go module proxy")
	ctx, cancel := context.WithTimeout(t.Context(), BuildTimeout)
	defer cancel()
	path, err := build(ctx)
	if err != nil {
		tier.Missing(t, err.Error())
	}
	return path
}

// K9sEnv is the environment (for TmuxConfig.Env) that points k9s at
// kubeconfig and keeps its configuration, state and logs in a temp dir of
// t, rather than in the user's home. The configuration written there turns
// off k9s's check for a newer release, so that it asks nothing of the
// internet.
func K9sEnv(t testing.TB, kubeconfig string) []string {
	t.Helper()
	dir := t.TempDir()
	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		env = append(env, v+"="+filepath.Join(dir, strings.ToLower(strings.TrimPrefix(v, "XDG_"))))
	}
	conf := filepath.Join(dir, "config", "k9s", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("k9s:\n  skipLatestRevCheck: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return env
}
