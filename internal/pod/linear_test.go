package pod

import (
	"fmt"
	"strings"
	"testing"
)

// growthPatterns build manifests of growing size n from shapes that make
// decoders slow: deep nesting, many documents, long lines, many keys, many
// problems in one large mapping, merge keys and aliases that expand.
var growthPatterns = []struct {
	name    string
	wantErr string // a part of the error at every size; "" when the manifest is good
	build   func(n int) string
}{
	{"deep nesting", "expected a string, got a mapping", func(n int) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  labels: " + strings.Repeat("{a: ", n) + "b" + strings.Repeat("}", n) + "\n"
	}},
	{"many documents", "", func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\n%s", strings.Replace(webPod, "name: web\n", fmt.Sprintf("name: web%d\n", i), 1))
		}
		return b.String()
	}},
	{"empty documents", "no pods in file", func(n int) string { return strings.Repeat("---\n# nothing\n", n) }},
	{"long line", "", func(n int) string { return webPod + "    args: [\"" + strings.Repeat("x", 100*n) + "\"]\n" }},
	{"many unknown fields", "unknown field", func(n int) string {
		return webPod + repeatf(n, "x%d: 1\n")
	}},
	{"a problem per key of a large mapping", "must be greater than or equal to 0", func(n int) string {
		return webPod + "    resources:\n      limits:\n" + repeatf(n, "        r%d: -1\n")
	}},
	{"list items of another kind", "must be Pod", func(n int) string {
		return "apiVersion: v1\nkind: List\n" + repeatf(n, "x%d: 1\n") + "items:\n" + repeatf(n, "- {apiVersion: v1, kind: Service, metadata: {name: s%d}}\n")
	}},
	{"env naming missing containers", "Not found", func(n int) string {
		return webPod + "    env:\n" + repeatf(n, "    - {name: E%d, valueFrom: {resourceFieldRef: {containerName: nope, resource: limits.cpu}}}\n") +
			repeatf(n, "  - {name: c%d, image: busybox}\n")
	}},
	{"merge keys naming one large mapping", "too deeply aliased", func(n int) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: &l\n" + repeatf(n, "    k%d: v\n") +
			"  annotations:\n    <<: [" + strings.TrimSuffix(strings.Repeat("*l, ", n), ", ") + "]\n" +
			"spec:\n  containers:\n  - name: c\n    image: busybox\n"
	}},
	{"aliases of a long list", "too deeply aliased", func(n int) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n    env: &e\n" +
			repeatf(n, "    - {name: E%d, value: v}\n") + repeatf(n, "  - {name: c%d, image: busybox, env: *e}\n")
	}},
	{"nested merge keys", "too deeply aliased", func(n int) string {
		// Each volume's hostPath merges the one before ten times: 10^n
		// entries from n lines, but for the limits.
		var b strings.Builder
		b.WriteString(webPod + "  volumes:\n  - {name: v0, hostPath: &h0 {path: /x}}\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "  - {name: v%d, hostPath: &h%d {<<: [%s]}}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*h%d, ", i-1), 10), ", "))
		}
		return b.String()
	}},
}

func repeatf(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// TestDecodeLinear feeds Decode each growth pattern at two sizes and checks
// that its work grows no faster than the input: the steps it counts (see
// decode) stay under a fixed number per byte, and so do its allocations. It
// measures work, not time, so it holds on a slow or busy machine. The unit
// tier (go test -short, with -race) takes half the sizes, in the same
// ratio.
func TestDecodeLinear(t *testing.T) {
	const maxStepsPerByte = 8
	small, large := 250, 2000
	if testing.Short() {
		small, large = 125, 1000
	}
	for _, p := range growthPatterns {
		t.Run(p.name, func(t *testing.T) {
			var perByte [2]float64
			for i, n := range []int{small, large} {
				if p.name == "nested merge keys" {
					n = []int{5, 40}[i] // levels, whatever the tier
				}
				data := []byte(p.build(n))
				steps := 0
				_, err := decode("grow.yaml", data, testOpts, &steps)
				if err == nil && p.wantErr != "" || err != nil && (p.wantErr == "" || !strings.Contains(err.Error(), p.wantErr)) {
					t.Errorf("n=%d: Decode error %.200v, want one containing %q", n, err, p.wantErr)
				}
				if steps > maxStepsPerByte*len(data)+1000 {
					t.Errorf("n=%d: %d steps for %d bytes, want at most %d per byte", n, steps, len(data), maxStepsPerByte)
				}
				allocs := testing.AllocsPerRun(1, func() { _, _ = Decode("grow.yaml", data, testOpts) })
				perByte[i] = allocs / float64(len(data))
				t.Logf("n=%d: %d bytes, %d steps, %.0f allocations; %.200v", n, len(data), steps, allocs, err)
			}
			if perByte[1] > 2*perByte[0]+0.01 {
				t.Errorf("allocations per byte grow from %.3f to %.3f with the input: more than linear", perByte[0], perByte[1])
			}
		})
	}
}
