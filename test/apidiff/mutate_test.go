package apidiff

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// mutant is one manifest made from a real one by changing one thing.
type mutant struct {
	name     string // base file, field path and what was done
	category string // the kind of change, for the report
	data     []byte
}

// enumKeys are the keys whose string values come from a fixed set: an
// unknown value is one more mutant for each.
var enumKeys = map[string]bool{
	"imagePullPolicy": true, "restartPolicy": true, "dnsPolicy": true, "protocol": true,
	"scheme": true, "type": true, "operator": true, "effect": true, "medium": true,
	"preemptionPolicy": true, "terminationMessagePolicy": true, "mountPropagation": true,
}

// freeText are keys whose values are free text to both validators (a
// command line, an env value): mutating them says nothing.
var freeText = map[string]bool{"command": true, "args": true, "value": true, "description": true}

// loadBases reads the manifests under dir, in name order.
func loadBases(t *testing.T, dir string) map[string]*yaml.Node {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	bases := map[string]*yaml.Node{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		bases[filepath.Base(f)] = doc.Content[0]
	}
	return bases
}

// keyedMaps are the mappings whose keys are data: each key is renamed in
// the ways keyChanges lists.
var keyedMaps = map[string]bool{
	"data": true, "binaryData": true, "stringData": true, "labels": true, "annotations": true,
	"nodeSelector": true, "limits": true, "requests": true,
}

// keyChanges are the new names given to a key of a keyedMaps mapping.
var keyChanges = []scalarChange{
	{"key:empty", "!!str", ""},
	{"key:invalid", "!!str", "bad key!"},
	{"key:dots", "!!str", ".."},
	{"key:slash", "!!str", "a/b"},
	{"key:prefixed", "!!str", "example.com/key"},
	{"key:long", "!!str", strings.Repeat("k", 300)},
}

// mutants returns the mutants of every base manifest, in a fixed order:
// each of its scalars changed in the ways its type allows, each key of its
// data, label and annotation mappings renamed, each of its mapping entries
// removed, and each addition adds gives for its kind.
func mutants(t *testing.T, bases map[string]*yaml.Node, adds func(kind string) []addition) []mutant {
	t.Helper()
	var out []mutant
	for _, file := range sortedKeys(bases) {
		base := bases[file]
		emit := func(path, category string, change func(root *yaml.Node) bool) {
			root := deepCopy(base)
			if !change(root) {
				return
			}
			out = append(out, mutant{name: file + " " + path, category: category, data: encode(t, root)})
		}
		for i, site := range sites(base, "", "") {
			for _, m := range scalarMutations(site) {
				emit(site.path+" := "+strconv.Quote(m.value), m.category, func(root *yaml.Node) bool {
					n := sites(root, "", "")[i].node
					n.Tag, n.Value, n.Style = m.tag, m.value, 0
					return true
				})
			}
			if keyedMaps[site.key] && site.node.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(site.node.Content); j += 2 {
					for _, k := range keyChanges {
						emit(site.path+" key "+strconv.Quote(site.node.Content[j].Value)+" := "+strconv.Quote(k.value), k.category, func(root *yaml.Node) bool {
							kn := sites(root, "", "")[i].node.Content[j]
							kn.Tag, kn.Value, kn.Style = k.tag, k.value, 0
							return true
						})
					}
				}
			}
			if site.parent != nil {
				emit(site.path+" removed", "remove", func(root *yaml.Node) bool {
					s := sites(root, "", "")[i]
					return removeKey(s.parent, s.key)
				})
			}
		}
		kind := ""
		if k := valueOf(base, "kind"); k != nil {
			kind = k.Value
		}
		for _, a := range adds(kind) {
			emit(a.path+" "+a.name, "add:"+a.category, func(root *yaml.Node) bool {
				return apply(t, root, a)
			})
		}
	}
	return out
}

// site is a node of a manifest with its field path; for a mapping value,
// the mapping and key it sits under.
type site struct {
	path   string
	key    string
	node   *yaml.Node
	parent *yaml.Node
}

// sites lists the nodes below n in document order, n itself left out.
func sites(n *yaml.Node, path, key string) []site {
	var out []site
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			p := join(path, k)
			if path == "" && (k == "apiVersion" || k == "kind" || k == "status") {
				continue
			}
			out = append(out, site{path: p, key: k, node: v, parent: n})
			out = append(out, sites(v, p, k)...)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			out = append(out, site{path: p, key: key, node: v})
			out = append(out, sites(v, p, key)...)
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalarChange is one new value for a scalar.
type scalarChange struct {
	category string
	tag      string
	value    string
}

// scalarMutations returns the changes made to a scalar, by its type.
func scalarMutations(s site) []scalarChange {
	n := s.node
	if n.Kind != yaml.ScalarNode || freeText[s.key] {
		return nil
	}
	switch n.ShortTag() {
	case "!!str":
		out := []scalarChange{
			{"string:empty", "!!str", ""},
			{"string:invalid", "!!str", "Not_Valid!"},
			{"string:long", "!!str", strings.Repeat("a", 300)},
			{"string:space", "!!str", " " + n.Value},
			{"string:dash", "!!str", "-" + n.Value},
			{"string:unicode", "!!str", n.Value + "é"},
		}
		if up := strings.ToUpper(n.Value); up != n.Value {
			out = append(out, scalarChange{"string:upper", "!!str", up})
		}
		if strings.HasPrefix(n.Value, "/") {
			out = append(out, scalarChange{"string:relative", "!!str", strings.TrimLeft(n.Value, "/") + "x"})
		}
		if enumKeys[s.key] {
			out = append(out, scalarChange{"enum:unknown", "!!str", "Bogus"})
		}
		return out
	case "!!int":
		return []scalarChange{
			{"number:negative", "!!int", "-1"},
			{"number:zero", "!!int", "0"},
			{"number:huge", "!!int", "2147483648"},
			{"number:fraction", "!!float", "1.5"},
			{"number:whole-float", "!!float", n.Value + ".0"},
			{"number:string", "!!str", n.Value},
			{"number:max-int32", "!!int", "2147483647"},
			{"number:past-int64", "!!int", "9223372036854775808"},
		}
	case "!!bool":
		flip := "true"
		if n.Value == "true" {
			flip = "false"
		}
		return []scalarChange{{"bool:flip", "!!bool", flip}, {"bool:string", "!!str", n.Value}}
	}
	return nil
}

// removeKey removes key from mapping m.
func removeKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return true
		}
	}
	return false
}

// addition sets or appends a YAML snippet at a path of a manifest.
type addition struct {
	category string
	name     string
	path     string // dotted; a number is a list index; after a "|", one key that may hold dots
	appendTo bool   // append the snippet to the list at path (made when missing)
	yaml     string
}

// apply makes the addition in root; false when the path is not there (a
// container index past the end).
func apply(t *testing.T, root *yaml.Node, a addition) bool {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(a.yaml), &doc); err != nil {
		t.Fatalf("addition %s: %v", a.name, err)
	}
	val := doc.Content[0]
	parent, last, dotted := strings.Cut(a.path, "|")
	segs := strings.Split(parent, ".")
	if dotted {
		segs = append(segs, last)
	}
	n := root
	for i, seg := range segs {
		last := i == len(segs)-1
		if idx, err := strconv.Atoi(seg); err == nil {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return false
			}
			n = n.Content[idx]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return false
		}
		child := valueOf(n, seg)
		switch {
		case last && !a.appendTo:
			if child != nil {
				*child = *val
			} else {
				n.Content = append(n.Content, scalar(seg), val)
			}
			return true
		case child == nil && last:
			child = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			n.Content = append(n.Content, scalar(seg), child)
		case child == nil:
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, scalar(seg), child)
		}
		n = child
	}
	if n.Kind != yaml.SequenceNode {
		return false
	}
	n.Content = append(n.Content, val)
	return true
}

func valueOf(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = deepCopy(child)
	}
	if n.Alias != nil {
		c.Alias = deepCopy(n.Alias)
	}
	return &c
}

func encode(t *testing.T, n *yaml.Node) []byte {
	t.Helper()
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(2)
	if err := e.Encode(n); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
