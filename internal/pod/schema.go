package pod

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The schema check walks the YAML node tree beside the Go type it will be
// decoded into, before the real decode. It exists for the messages: the JSON
// decoder names neither the line nor the list index of an unknown field or a
// wrong type, the node tree has both. It reports only what the decoder would
// also reject; anything it cannot judge it leaves to the decoder.

// The walk is bounded, so that aliases expanding into a huge tree (a
// "billion laughs" document) or merge keys naming one large mapping many
// times cost time linear in the document: it visits at most nodesPerByte
// nodes and mapping entries per byte of the document, and never more than
// maxNodes. Real manifests need about one for every ten bytes; the rest
// allows for aliases that repeat parts of a document. The YAML library has
// limits of its own and rejects most such documents too.
const (
	maxNodes     = 1 << 20
	nodesPerByte = 4
	minNodes     = 256 // the budget of a tiny document
)

// Types whose JSON form is decided by their own UnmarshalJSON.
var (
	typeQuantity  = reflect.TypeFor[resource.Quantity]()
	typeIntOrStr  = reflect.TypeFor[intstr.IntOrString]()
	typeTime      = reflect.TypeFor[metav1.Time]()
	typePod       = reflect.TypeFor[v1.Pod]()
	typePodList   = reflect.TypeFor[v1.PodList]() // both PodList and List documents
	typeConfigMap = reflect.TypeFor[v1.ConfigMap]()
	typeSecret    = reflect.TypeFor[v1.Secret]()
	typeUnmarshal = reflect.TypeFor[json.Unmarshaler]()
)

// isYAML11Bool reports whether a plain scalar is a boolean in YAML 1.1
// (which the decoder follows) but a string in YAML 1.2 (which the node tree
// follows).
func isYAML11Bool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"on", "On", "ON", "off", "Off", "OFF":
		return true
	}
	return false
}

// structField is one JSON-visible field of a struct type.
type structField struct {
	typ reflect.Type
}

// schemaChecker holds the state of one walk: the errors found so far, the
// work done and a cache of struct field tables.
type schemaChecker struct {
	file   string
	offset int // lines of the file before the document
	errs   ErrorList
	nodes  int // nodes and mapping entries visited
	budget int // the most nodes may reach
	fields map[reflect.Type]map[string]structField
	// redact keeps values out of the messages (a Secret's document):
	// they name what a value is, never what it says.
	redact bool
}

// newSchemaChecker returns a checker for a document of size bytes.
func newSchemaChecker(file string, offset, size int) *schemaChecker {
	return &schemaChecker{
		file: file, offset: offset,
		budget: min(maxNodes, minNodes+nodesPerByte*size),
		fields: map[reflect.Type]map[string]structField{},
	}
}

// visit counts one node or mapping entry against the budget and reports
// whether the walk may go on; the first time it may not, it records why.
func (c *schemaChecker) visit(n *yaml.Node, path string) bool {
	c.nodes++
	if c.nodes <= c.budget {
		return true
	}
	if c.nodes == c.budget+1 {
		c.errorf(n, path, "document too large or too deeply aliased: its aliases and merge keys expand it beyond %d nodes", c.budget)
	}
	return false
}

func (c *schemaChecker) errorf(n *yaml.Node, path, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: c.offset + n.Line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// check walks n against t; path is n's field path.
func (c *schemaChecker) check(n *yaml.Node, t reflect.Type, path string) {
	if !c.visit(n, path) {
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias != nil {
			c.check(n.Alias, t, path)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // null decodes to the zero value of anything
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == typeQuantity:
		c.checkQuantity(n, path)
		return
	case t == typeIntOrStr:
		// A whole number written as a float (8080.0) turns into an integer
		// on the way to JSON, as for an integer field.
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || tag != "!!int" && tag != "!!str" && !(tag == "!!float" && wholeFloat(n.Value, 32)) {
			c.errorf(n, path, "expected an integer or a string, got %s", c.describe(n))
		}
		return
	case t == typeTime:
		if n.Kind != yaml.ScalarNode {
			c.errorf(n, path, "expected a timestamp, got %s", c.describe(n))
		}
		return
	case reflect.PointerTo(t).Implements(typeUnmarshal):
		return // its own format; the decoder judges it
	}
	switch t.Kind() {
	case reflect.Struct:
		c.checkStruct(n, t, path)
	case reflect.Map:
		c.checkMap(n, t, path)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: base64 text
			c.checkScalar(n, reflect.TypeFor[string](), path)
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
				if _, err := base64.StdEncoding.DecodeString(n.Value); err != nil {
					c.errorf(n, path, "expected base64 text: %v", err)
				}
			}
			return
		}
		if n.Kind != yaml.SequenceNode {
			c.errorf(n, path, "expected a list, got %s", c.describe(n))
			return
		}
		for i, item := range n.Content {
			c.check(item, t.Elem(), path+"["+strconv.Itoa(i)+"]")
		}
	case reflect.Interface:
		// anything goes
	default:
		c.checkScalar(n, t, path)
	}
}

func (c *schemaChecker) checkQuantity(n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode {
		c.errorf(n, path, "expected a quantity such as 100m or 1Gi, got %s", c.describe(n))
		return
	}
	// The decoder trims spaces around a quantity, as the apiserver's does.
	if _, err := resource.ParseQuantity(strings.TrimSpace(n.Value)); err != nil {
		c.errorf(n, path, "invalid quantity %q: %v", n.Value, err)
	}
}

// checkScalar judges a scalar against a basic kind the way the JSON decoder
// will after the YAML is turned into JSON: a number or a boolean is no string
// (the kubelet and kubectl reject env value: 123 the same way).
func (c *schemaChecker) checkScalar(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.ScalarNode {
		c.errorf(n, path, "expected %s, got %s", kindName(t), c.describe(n))
		return
	}
	tag := n.ShortTag()
	plain := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
	switch t.Kind() {
	case reflect.String:
		switch {
		case tag == "!!int" || tag == "!!float" || tag == "!!bool":
			c.errorf(n, path, "expected a string, got %s (quote it)", c.describe(n))
		case plain && isYAML11Bool(n.Value):
			// YAML 1.1, which the decoder follows, reads yes/no/on/off as booleans.
			c.errorf(n, path, "expected a string, got boolean %s (quote it)", c.value(n))
		}
	case reflect.Bool:
		if tag != "!!bool" && !(tag == "!!str" && plain && isYAML11Bool(n.Value)) {
			c.errorf(n, path, "expected a boolean, got %s", c.describe(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch tag {
		case "!!int":
			if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); errors.Is(err, strconv.ErrRange) {
				c.errorf(n, path, "%s is out of range for a %d-bit integer", c.value(n), t.Bits())
			}
		case "!!float":
			// The YAML to JSON step writes a whole number (8080.0, 1e3)
			// as an integer, which the decoder takes; anything else it
			// refuses, without the line or the index given here.
			if !wholeFloat(n.Value, t.Bits()) {
				c.errorf(n, path, "expected an integer, got %s", c.describe(n))
			}
		default:
			c.errorf(n, path, "expected an integer, got %s", c.describe(n))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch tag {
		case "!!int":
			if _, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); errors.Is(err, strconv.ErrRange) {
				c.errorf(n, path, "%s is out of range for an unsigned %d-bit integer", c.value(n), t.Bits())
			}
		case "!!float":
			if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err != nil || f < 0 || !wholeFloat(n.Value, t.Bits()+1) {
				c.errorf(n, path, "expected an unsigned integer, got %s", c.describe(n))
			}
		default:
			c.errorf(n, path, "expected an unsigned integer, got %s", c.describe(n))
		}
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			c.errorf(n, path, "expected a number, got %s", c.describe(n))
		}
	}
}

// wholeFloat reports whether a YAML float is a whole number that fits a
// signed integer of the given bits.
func wholeFloat(v string, bits int) bool {
	f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64)
	if err != nil || f != math.Trunc(f) {
		return false // also .inf and .nan, which ParseFloat does not take
	}
	limit := math.Ldexp(1, bits-1)
	return f >= -limit && f < limit
}

func (c *schemaChecker) checkMap(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		c.errorf(n, path, "expected a mapping, got %s", c.describe(n))
		return
	}
	seen := map[string]bool{}
	c.eachPair(n, path, func(k, v *yaml.Node) {
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, path, "expected a string key, got %s", c.describe(k))
			return
		}
		p := path + "[" + k.Value + "]"
		if seen[k.Value] {
			c.errorf(k, p, "duplicate key")
			return
		}
		seen[k.Value] = true
		c.check(v, t.Elem(), p)
	})
}

func (c *schemaChecker) checkStruct(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		c.errorf(n, path, "expected a mapping, got %s", c.describe(n))
		return
	}
	fields := c.fieldsOf(t)
	seen := map[string]bool{}
	c.eachPair(n, path, func(k, v *yaml.Node) {
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, path, "expected a field name, got %s", c.describe(k))
			return
		}
		p := joinField(path, k.Value)
		if seen[k.Value] {
			c.errorf(k, p, "duplicate field")
			return
		}
		seen[k.Value] = true
		f, ok := fields[k.Value]
		if !ok {
			c.errorf(k, p, "unknown field")
			return
		}
		if t == typePod && k.Value == "status" {
			return // status is the runtime's to write; whatever a manifest holds there is ignored
		}
		c.check(v, f.typ, p)
	})
}

// eachPair calls fn for each key and value of mapping n, then for those of
// the mappings it merges (<<: *anchor) whose keys it does not set itself:
// keys given in place override merged ones. Every entry counts against the
// budget, also a merged one that is overridden. path is n's field path.
func (c *schemaChecker) eachPair(n *yaml.Node, path string, fn func(k, v *yaml.Node)) {
	own := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !c.visit(k, path) {
			return
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		own[k.Value] = true
		fn(k, v)
	}
	for _, m := range merges {
		c.eachMerged(m, path, func(k, v *yaml.Node) {
			if !own[k.Value] {
				own[k.Value] = true
				fn(k, v)
			}
		})
	}
}

func (c *schemaChecker) eachMerged(v *yaml.Node, path string, fn func(k, v *yaml.Node)) {
	if !c.visit(v, path) {
		return
	}
	switch {
	case v.Kind == yaml.AliasNode && v.Alias != nil:
		c.eachMerged(v.Alias, path, fn)
	case v.Kind == yaml.MappingNode:
		c.eachPair(v, path, fn)
	case v.Kind == yaml.SequenceNode:
		for _, m := range v.Content {
			c.eachMerged(m, path, fn)
		}
	}
}

// fieldsOf returns the JSON fields of struct type t, with inline and
// embedded structs flattened as encoding/json does.
func (c *schemaChecker) fieldsOf(t reflect.Type) map[string]structField {
	if fs, ok := c.fields[t]; ok {
		return fs
	}
	fs := map[string]structField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := strings.Contains(","+opts+",", ",inline,")
		if (f.Anonymous && name == "") || inline {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range c.fieldsOf(ft) {
					if _, shadowed := fs[k]; !shadowed {
						fs[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs[name] = structField{typ: f.Type}
	}
	c.fields[t] = fs
	return fs
}

// joinField appends a field name to a path.
func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// describe is describe, without the value when the checker redacts.
func (c *schemaChecker) describe(n *yaml.Node) string {
	if !c.redact || n.Kind != yaml.ScalarNode {
		return describe(n)
	}
	switch n.ShortTag() {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	}
	return "a string"
}

// value is scalar n's text for a message, or "(value hidden)" when the
// checker redacts.
func (c *schemaChecker) value(n *yaml.Node) string {
	if c.redact {
		return "(value hidden)"
	}
	return n.Value
}

// describe names a node for a message: its kind and, for a scalar, its value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		switch n.ShortTag() {
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!bool":
			return "boolean " + v
		case "!!null":
			return "null"
		default:
			return "string " + strconv.Quote(v)
		}
	}
	return "nothing"
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "an integer"
	}
}

// lineIndex finds the lines of field paths in YAML trees. It indexes the
// keys of a mapping the first time a path goes through it, so that the
// lines of many problems (one per key of a large mapping, one per item of a
// long list) cost time linear in the document rather than quadratic.
type lineIndex struct {
	keys  map[*yaml.Node]map[string]int // mapping -> key -> index of its value in Content
	steps *int                          // counts mapping entries indexed and path segments followed
}

func newLineIndex(steps *int) *lineIndex {
	return &lineIndex{keys: map[*yaml.Node]map[string]int{}, steps: steps}
}

// lineOf returns the line of the node that path (in Kubernetes notation,
// relative to root) points at, or of its deepest existing ancestor when the
// field itself is absent (a missing image is reported on its container).
func (x *lineIndex) lineOf(root *yaml.Node, path string) int {
	n, line := root, root.Line
	for _, seg := range splitPath(path) {
		(*x.steps)++
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next, at *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			if i, ok := x.index(n)[seg]; ok {
				at, next = n.Content[i-1], n.Content[i]
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				at, next = n.Content[i], n.Content[i]
			}
		}
		if next == nil {
			break
		}
		n, line = next, at.Line
	}
	return line
}

// index returns the keys of mapping n; of a key given twice, the last.
func (x *lineIndex) index(n *yaml.Node) map[string]int {
	if m, ok := x.keys[n]; ok {
		return m
	}
	m := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		(*x.steps)++
		m[n.Content[i].Value] = i + 1
	}
	x.keys[n] = m
	return m
}

// splitPath splits "spec.containers[0].env[FOO]" into its segments.
func splitPath(path string) []string {
	var segs []string
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(segs, path[1:])
			}
			segs = append(segs, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, path[:end])
			path = path[end:]
		}
	}
	return segs
}
