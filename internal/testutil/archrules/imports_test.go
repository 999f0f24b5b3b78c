package archrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// kind says what a package is for, which decides who may import it.
type kind int

const (
	// product code is built into the staticlet binary. Its non-test code
	// imports only product packages, and never package testing.
	product kind = iota
	// helper is a test helper: imported by tests, other helpers and tools,
	// never by product code.
	helper
	// tool is a program or check for development (go run, go test) that
	// nothing imports.
	tool
)

func (k kind) String() string {
	switch k {
	case product:
		return "product"
	case helper:
		return "test helper"
	case tool:
		return "tool"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// rule is what one package's code may import from the module.
type rule struct {
	kind kind
	// imports are the module packages its non-test code may import, as
	// paths inside the module; "p/..." stands for p and every package
	// under it, "..." for every package of the module. Its tests may
	// import these, the package itself, and any test helper.
	imports []string
}

// rules holds a row for every package of the module, and for packages
// about to be added (a row whose package does not exist is not an error).
var rules = map[string]rule{
	// The command: flags, wiring, client subcommands.
	"cmd/staticlet": {product, []string{"..."}},
	// The command tree and client commands: they read manifests (pod,
	// desired, watch) and the status socket; sandbox only for what
	// version says of the node's cgroups.
	"internal/cli": {product, []string{"internal/pod", "internal/desired", "internal/watch", "internal/status", "internal/status/printers", "internal/cgroups", "internal/kubeapi/pki"}},
	// The log daemon's own program: the daemon and nothing else.
	"cmd/staticlet-logd": {product, []string{"internal/logd"}},

	// The vocabulary every package shares.
	"internal/pod": {product, nil},

	// The control loop.
	"internal/reconcile": {product, []string{"internal/pod"}},
	// Merges the sources' snapshots into desired sets and admits pods
	// under maxPods (being written).
	"internal/desired": {product, []string{"internal/pod", "internal/watch"}},

	// The adapters: pod, never each other nor reconcile (filewatch
	// watches the files that containers mount). sandbox also
	// imports its own subpackages, logs to read the tail of a
	// container's log as its termination message, and the trades it
	// drives (below).
	"internal/watch":           {product, []string{"internal/pod"}},
	"internal/health":          {product, []string{"internal/pod"}},
	"internal/filewatch":       {product, []string{"internal/pod"}},
	"internal/storagelimit":    {product, []string{"internal/pod"}},
	"internal/status":          {product, []string{"internal/pod"}},
	"internal/status/printers": {product, []string{"internal/pod", "internal/status"}},
	// The Kubernetes API: it serves the status store, with the printers'
	// cells for its tables and the generated OpenAPI definitions.
	"internal/kubeapi":        {product, []string{"internal/pod", "internal/status", "internal/status/printers", "internal/kubeapi/openapi", "internal/kubeapi/pki"}},
	"internal/sandbox":        {product, []string{"internal/pod", "internal/logs", "internal/install", "internal/cgroups", "internal/images", "internal/lease", "internal/pause", "internal/podnet/...", "internal/sandbox/...", "internal/devices"}},
	"internal/sandbox/spec":   {product, []string{"internal/pod"}},
	"internal/sandbox/procfs": {product, nil},

	// The trades sandbox drives behind interfaces it declares. Each
	// imports none of sandbox (its pure leaves spec and procfs aside)
	// and none of the others (but lease, a leaf images shares with
	// sandbox). cgroups: the pods' cgroups with both drivers, OOM kills
	// and usage.
	"internal/cgroups": {product, []string{"internal/pod", "internal/sandbox/spec", "internal/sandbox/procfs", "internal/nodeinfo"}},
	// The node's devices: the host's device nodes for privileged
	// containers, and the CDI devices the node's specs name.
	"internal/devices": {product, nil},
	// The pause program: its root, and its body where staticlet is the
	// pause; pauseprog writes the built-in one as machine code.
	"internal/pause":           {product, []string{"internal/install", "internal/pause/pauseprog"}},
	"internal/pause/pauseprog": {product, nil},
	// The pod network: the bridge, veths, nftables rules (netns, which
	// also pins a sandbox's namespaces for sandbox) and addresses (ipam).
	"internal/podnet":       {product, []string{"internal/pod", "internal/podnet/..."}},
	"internal/podnet/ipam":  {product, nil},
	"internal/podnet/netns": {product, nil},
	// The node's images: the store in containerd (pull, registry
	// credentials and mirrors, other namespaces, import) and the import
	// directory, which drives a store through an interface it declares.
	"internal/images":          {product, []string{"internal/pod", "internal/sandbox/spec", "internal/lease", "internal/images/registry"}},
	"internal/images/registry": {product, nil},
	// staticlet's containerd leases, made by sandbox and images.
	"internal/lease": {product, nil},

	// Leaves that know no pods: the container log files (written by the
	// log daemon or driver, read by sandbox and the logs command), the
	// node's log daemon and its forwarder, files put in place for running
	// programs, the logind inhibitor lock.
	"internal/logs":         {product, nil},
	"internal/logd":         {product, []string{"internal/logs", "internal/install"}},
	"internal/install":      {product, nil},
	"internal/nodeshutdown": {product, nil},
	// Disk pressure on the filesystems of the root dir and the logs:
	// statfs against the kubelet's thresholds.
	"internal/diskpressure": {product, nil},
	// What the node object says of the machine: identity, kernel, OS,
	// capacity, primary address, CPU time; files read under a root.
	"internal/nodeinfo": {product, nil},
	// The Kubernetes API's CA, serving and admin certificates under the
	// root dir, and the file recording the API's address.
	"internal/kubeapi/pki": {product, nil},
	// The OpenAPI definitions of the API's types, generated from
	// k8s.io/api: no code of staticlet's own.
	"internal/kubeapi/openapi": {product, nil},
	// The kubelet's config file (run --config), parsed and applied to
	// the variables behind run's flags; diskpressure to check and merge
	// evictionHard.
	"internal/kubeletconfig": {product, []string{"internal/diskpressure"}},
	// The Prometheus metrics: fed by cmd with what the adapters report,
	// and reading the pods' statuses it is handed, so pod alone.
	"internal/metrics": {product, []string{"internal/pod"}},

	// Test helpers.
	// Device nodes and CDI specs of a test vendor.
	"internal/testutil/cditest":    {helper, []string{"internal/testutil/tier"}},
	"internal/testutil/ctrdtest":   {helper, []string{"internal/testutil/testimage", "internal/sandbox/procfs", "internal/testutil/modbuild", "internal/testutil/tier"}},
	"internal/testutil/etcdtest":   {helper, []string{"internal/testutil/testimage", "internal/testutil/modbuild"}},
	"internal/testutil/modbuild":   {helper, nil},
	"internal/testutil/testimage":  {helper, nil},
	"internal/testutil/testvm":     {helper, []string{"internal/testutil/debroot"}},
	"internal/testutil/debroot":    {helper, []string{"internal/testutil/tier"}},
	"internal/testutil/logindtest": {helper, []string{"internal/testutil/tier"}},
	// kubectl and k9s built from the module proxy, and tmux to run k9s in.
	"internal/testutil/kubetools": {helper, []string{"internal/testutil/modbuild", "internal/testutil/tier"}},
	// Which tier of the suite runs (unit: go test -short), and what a
	// test lacking a real dependency does.
	"internal/testutil/tier": {helper, nil},
	// kubeadm's kubelet config file, embedded, for the parser's tests and
	// the end-to-end test of staticlet run --config.
	"internal/testutil/kubeadm": {helper, nil},
	// Reads the metrics in the tests of metrics and cmd.
	"internal/testutil/metricstest": {helper, nil},
	// Runs the built binary against a private containerd for the suites
	// under test/.
	"internal/testutil/harness": {helper, []string{"internal/logd", "internal/status", "internal/podnet/netns", "internal/sandbox/procfs",
		"internal/testutil/ctrdtest", "internal/testutil/etcdtest", "internal/testutil/testimage"}},

	// Tools.
	"internal/testutil/ctrdtest/prebuild": {tool, []string{"internal/testutil/ctrdtest", "internal/testutil/etcdtest", "internal/testutil/kubetools"}},
	"internal/testutil/testimage/mkimage": {tool, []string{"internal/testutil/testimage"}},
	"internal/testutil/archrules":         {tool, nil},

	// The suites that run the built binary (go test only; each package is
	// a doc.go and its tests): end to end against a private containerd,
	// under systemd in nspawn machines, in a QEMU guest, and the
	// benchmarks and the soak. Besides test helpers their tests read the product
	// packages below, for their types and to look behind staticlet.
	"test/e2e":     {tool, []string{"internal/pod", "internal/status", "internal/testutil/kubetools", "internal/logs", "internal/logd", "internal/sandbox/...", "internal/cgroups", "internal/images", "internal/podnet/..."}},
	"test/systemd": {tool, nil},
	"test/vm":      {tool, nil},
	"test/bench":   {tool, []string{"internal/pod", "internal/status", "internal/logs", "internal/logd", "internal/sandbox/..."}},
	"test/soak":    {tool, []string{"internal/sandbox/procfs"}},
}

// listed is a package as `go list -json` describes it.
type listed struct {
	ImportPath   string
	Module       *struct{ Path string }
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// TestImportRules checks the module's import graph against rules.
func TestImportRules(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, problem := range check(pkgs, rules) {
		t.Error(problem)
	}
}

// listModule lists the packages of the module this test belongs to.
func listModule(t *testing.T) []listed {
	t.Helper()
	// go test puts its own go first in PATH. The pattern is relative to
	// this package's directory: the module's root is two levels up.
	cmd := exec.Command("go", "list", "-json=ImportPath,Module,Imports,TestImports,XTestImports", "../../../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// check returns a line for every package of pkgs that has no rule or
// imports what its rule does not allow, and for every row of rs that names
// a package with no row or lets product code import a non-product one.
func check(pkgs []listed, rs map[string]rule) []string {
	var problems []string
	for _, name := range sortedKeys(rs) {
		for _, imp := range rs[name].imports {
			if imp == "..." {
				continue
			}
			r, ok := rs[strings.TrimSuffix(imp, "/...")]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("the rule of %s allows %s, which has no rule", name, imp))
			case rs[name].kind == product && r.kind != product:
				problems = append(problems, fmt.Sprintf("the rule of %s (product) allows %s, a %s", name, imp, r.kind))
			}
		}
	}

	for _, p := range pkgs {
		if p.Module == nil {
			problems = append(problems, fmt.Sprintf("%s is not in a module", p.ImportPath))
			continue
		}
		mod := p.Module.Path + "/"
		name := strings.TrimPrefix(p.ImportPath, mod)
		r, ok := rs[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no rule: add a row for it to rules", name))
			continue
		}
		for _, imp := range p.Imports {
			if r.kind == product && (imp == "testing" || strings.HasPrefix(imp, "testing/")) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which only tests and test helpers may", name, imp))
			}
			dep, inModule := strings.CutPrefix(imp, mod)
			if !inModule {
				continue
			}
			if !allowed(r.imports, dep) {
				problems = append(problems, fmt.Sprintf("%s imports %s; its rule allows %s", name, dep, describe(r.imports)))
			} else if d, ok := rs[dep]; ok && r.kind == product && d.kind != product {
				problems = append(problems, fmt.Sprintf("%s imports %s, a %s, which product code may not", name, dep, d.kind))
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			dep, inModule := strings.CutPrefix(imp, mod)
			if !inModule || dep == name || allowed(r.imports, dep) {
				continue
			}
			if d, ok := rs[dep]; ok && d.kind == helper {
				continue
			}
			problems = append(problems, fmt.Sprintf("the tests of %s import %s; its rule allows %s, and test helpers", name, dep, describe(r.imports)))
		}
	}
	return problems
}

// allowed reports whether pkg matches one of patterns.
func allowed(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if p == "..." || p == pkg {
			return true
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) {
			return true
		}
	}
	return false
}

func describe(patterns []string) string {
	if len(patterns) == 0 {
		return "no package of the module"
	}
	return "only " + strings.Join(patterns, ", ")
}

func sortedKeys(m map[string]rule) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestCheck runs check on small made-up modules, so that each kind of
// breach is seen to be reported.
func TestCheck(t *testing.T) {
	const mod = "example.com/m"
	pkg := func(name string, imports, testImports []string) listed {
		full := func(paths []string) []string {
			var out []string
			for _, p := range paths {
				if strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "cmd/") {
					p = mod + "/" + p
				}
				out = append(out, p)
			}
			return out
		}
		return listed{ImportPath: mod + "/" + name, Module: &struct{ Path string }{mod},
			Imports: full(imports), XTestImports: full(testImports)}
	}
	rs := map[string]rule{
		"cmd/m":          {product, []string{"..."}},
		"internal/a":     {product, nil},
		"internal/b":     {product, []string{"internal/a", "internal/b/..."}},
		"internal/b/sub": {product, []string{"internal/a"}},
		"internal/later": {product, []string{"internal/a"}},
		"internal/atest": {helper, []string{"internal/a"}},
	}
	tests := []struct {
		name string
		pkgs []listed
		rs   map[string]rule // rs when nil
		want []string        // substrings, one problem each
	}{
		{name: "as allowed", pkgs: []listed{
			pkg("cmd/m", []string{"fmt", "internal/a", "internal/b"}, []string{"internal/atest"}),
			pkg("internal/a", []string{"strings"}, []string{"testing", "internal/a", "internal/atest"}),
			pkg("internal/b", []string{"internal/a", "internal/b/sub"}, nil),
			pkg("internal/b/sub", nil, []string{"internal/b/sub"}),
			pkg("internal/atest", []string{"testing", "internal/a"}, nil),
		}},
		{name: "a forbidden import", pkgs: []listed{
			pkg("internal/a", []string{"internal/b"}, nil),
		}, want: []string{"internal/a imports internal/b; its rule allows no package of the module"}},
		{name: "a subpackage not covered", pkgs: []listed{
			pkg("internal/b/sub", []string{"internal/b"}, nil),
		}, want: []string{"internal/b/sub imports internal/b; its rule allows only internal/a"}},
		{name: "product code imports a test helper", pkgs: []listed{
			pkg("cmd/m", []string{"internal/atest"}, nil),
		}, want: []string{"cmd/m imports internal/atest, a test helper"}},
		{name: "product code imports testing", pkgs: []listed{
			pkg("internal/a", []string{"testing/synctest"}, nil),
		}, want: []string{"internal/a imports testing/synctest"}},
		{name: "a test imports past the rule", pkgs: []listed{
			pkg("internal/b/sub", nil, []string{"internal/b"}),
		}, want: []string{"the tests of internal/b/sub import internal/b"}},
		{name: "a package with no rule", pkgs: []listed{
			pkg("internal/new", nil, nil),
		}, want: []string{"internal/new has no rule"}},
		{name: "a rule naming a package with no rule", rs: map[string]rule{
			"internal/a": {product, []string{"internal/gone"}},
		}, want: []string{"the rule of internal/a allows internal/gone, which has no rule"}},
		{name: "a product rule allowing a helper", rs: map[string]rule{
			"internal/a":     {product, []string{"internal/atest"}},
			"internal/atest": {helper, nil},
		}, want: []string{"the rule of internal/a (product) allows internal/atest, a test helper"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rs
			if r == nil {
				r = rs
			}
			got := check(tt.pkgs, r)
			if len(got) != len(tt.want) {
				t.Fatalf("check() = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("check() problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
