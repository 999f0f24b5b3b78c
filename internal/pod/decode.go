package pod

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// Options says where manifests are decoded: the node they run on and the
// source they came from.
type Options struct {
	// NodeName is this node's name; it is appended to every pod name and set
	// as spec.nodeName. Required.
	NodeName string
	// SourceKind is SourceFile or SourceHTTP; empty means SourceFile.
	SourceKind string
	// Seen is when the source was read, recorded in AnnotationSeen.
	Seen time.Time
	// AllowEmptyList makes a PodList or List with no items (and no other
	// pods) mean "no pods" rather than an error. A URL source sets it: an
	// empty list is how a server says its pods are all gone, while an empty
	// body stays an error.
	AllowEmptyList bool
	// ReadData reads what a Secret's staticlet.io/secret-files and
	// staticlet.io/secret-credentials annotations name, when set; when
	// nil, those keys are checked but left empty.
	ReadData func(DataSource) ([]byte, error)
}

// Manifest is what one manifest file defines: its pods, and the
// ConfigMaps and Secrets beside them.
type Manifest struct {
	Pods    []*Pod
	Objects []*Object
}

// Decode turns one manifest file into the pods it defines, as DecodeFile
// does, leaving out the ConfigMaps and Secrets it may define beside them.
func Decode(path string, data []byte, opts Options) ([]*Pod, error) {
	m, err := DecodeFile(path, data, opts)
	if err != nil {
		return nil, err
	}
	return m.Pods, nil
}

// DecodeFile turns one manifest file into the pods, ConfigMaps and
// Secrets it defines: pods defaulted, validated and with their static pod
// identity (see the package's identity rules in identity.go), objects
// validated as the apiserver validates them. path names the file in
// errors and in Source, and takes part in pods' UIDs; it is used exactly
// as given.
//
// A file holds a Pod, a PodList, a List of Pods, a ConfigMap, a Secret,
// or several of those as YAML documents separated by "---"; JSON works
// too. Decoding is strict: an unknown field, a value of the wrong type or
// a duplicate field is an error. The file is taken whole: if any part of
// it is invalid, DecodeFile returns nothing and an ErrorList with every
// problem found, each with its field path and, when known, its line. No
// message quotes a value of a Secret.
//
// DecodeFile takes time linear in the size of data, whatever it holds.
func DecodeFile(path string, data []byte, opts Options) (*Manifest, error) {
	var steps int
	return decode(path, data, opts, &steps)
}

// decode is DecodeFile, counting in steps the work whose amount the input
// decides: the nodes and mapping entries of the schema walk, and the
// mapping entries indexed and path segments followed to find lines. A test
// checks that steps grow linearly with the input, whatever it holds; the
// YAML libraries and validation have their own checks and tests.
func decode(path string, data []byte, opts Options, steps *int) (*Manifest, error) {
	if opts.NodeName == "" {
		return nil, fmt.Errorf("decoding %s: no node name given", path)
	}
	if opts.SourceKind == "" {
		opts.SourceKind = SourceFile
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	if !utf8.Valid(data) {
		bad := len(data)
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				bad = i
				break
			}
			i += size
		}
		line := 1 + bytes.Count(data[:bad], []byte("\n"))
		return nil, ErrorList{{File: path, Line: line, Msg: "not UTF-8 text (a binary file, or another encoding?)"}}
	}

	var (
		errs    ErrorList
		m       Manifest
		lines   = map[Key]int{}
		objects = map[ObjectKey]int{}
		lists   bool // a document was a list, even an empty one
	)
	for _, doc := range splitDocuments(data) {
		decoded, derrs := decodeDocument(path, doc, steps)
		errs = append(errs, derrs...)
		lists = lists || decoded != nil && len(decoded) == 0
		for _, d := range decoded {
			if d.obj != nil {
				errs = append(errs, addObject(&m, d, path, opts, objects)...)
				continue
			}
			p, problems := prepare(d.pod, path, opts)
			errs = append(errs, d.errors(path, problems)...)
			if p == nil {
				continue
			}
			line := d.line("metadata.name")
			if first, dup := lines[p.Key()]; dup {
				errs = append(errs, &Error{File: path, Line: line, Field: d.prefix + "metadata.name", Msg: "pod " + p.Key().String() + " is defined twice in this file" + firstAt(first)})
				continue
			}
			lines[p.Key()] = line
			m.Pods = append(m.Pods, p)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(m.Pods) == 0 && len(m.Objects) == 0 && !(opts.AllowEmptyList && lists) {
		return nil, ErrorList{{File: path, Msg: "no pods in file"}}
	}
	return &m, nil
}

// addObject prepares the ConfigMap or Secret d and adds it to m, unless
// it is invalid or defined twice; first holds the line of each object
// already added.
func addObject(m *Manifest, d decodedPod, path string, opts Options, first map[ObjectKey]int) ErrorList {
	o, problems := prepareObject(d.obj, path, opts)
	if errs := d.errors(path, problems); len(errs) > 0 {
		return errs
	}
	line := d.line("metadata.name")
	if at, dup := first[o.Key()]; dup {
		return ErrorList{{File: path, Line: line, Field: "metadata.name", Msg: fmt.Sprintf("%s %s/%s is defined twice in this file%s", o.Kind(), o.Key().Namespace, o.Key().Name, firstAt(at))}}
	}
	first[o.Key()] = line
	o.Line = d.line("")
	m.Objects = append(m.Objects, o)
	return nil
}

// errors places the problems found in d in the file.
func (d *decodedPod) errors(path string, problems []problem) ErrorList {
	var errs ErrorList
	for _, pr := range problems {
		errs = append(errs, &Error{File: path, Line: d.line(pr.field), Field: d.prefix + pr.field, Msg: pr.msg})
	}
	return errs
}

// firstAt is " (first at line N)", or nothing when the line is unknown.
func firstAt(line int) string {
	if line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (first at line %d)", line)
}

// document is one YAML document of a file.
type document struct {
	offset int // lines of the file before the document's first line
	data   []byte
}

// splitDocuments splits a YAML stream at its "---" lines. Each part starts
// with its marker line, the marker blanked so that text after it stays in
// place, and keeps its line offset so that errors name lines of the file.
func splitDocuments(data []byte) []document {
	buf := bytes.Clone(data)
	var docs []document
	start, first := 0, 0 // byte offset and line index of the current document
	for pos, line := 0, 0; pos < len(buf); line++ {
		end := len(buf)
		if i := bytes.IndexByte(buf[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		if isSeparator(buf[pos:end]) {
			docs = append(docs, document{offset: first, data: buf[start:pos]})
			copy(buf[pos:], "   ")
			start, first = pos, line
		}
		pos = end
	}
	return append(docs, document{offset: first, data: buf[start:]})
}

// isSeparator reports whether line is a YAML document start marker.
func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || strings.ContainsRune(" \t\r\n", rune(line[3]))
}

// decodedPod is one pod, or one ConfigMap or Secret, decoded from a
// document, with what is needed to place errors found in it later.
type decodedPod struct {
	pod    *v1.Pod
	obj    *Object    // instead of pod: a ConfigMap or a Secret
	node   *yaml.Node // the pod's node, nil when the YAML tree is unavailable
	prefix string     // field path of the pod in its document ("items[2]." in a list)
	offset int
	lines  *lineIndex // shared by the pods of a document
}

// line returns the file line of the field at path (relative to the pod), or
// 0 when unknown.
func (d *decodedPod) line(path string) int {
	if d.node == nil {
		return 0
	}
	return d.offset + d.lines.lineOf(d.node, path)
}

// podDoc is a Pod as decoded from a manifest; its Status shadows the Pod's
// so that whatever a manifest holds there is ignored.
type podDoc struct {
	v1.Pod
	Status json.RawMessage `json:"status,omitempty"`
}

// podListDoc is a PodList or a List of Pods.
type podListDoc struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []podDoc `json:"items"`
}

// decodeDocument decodes the Pods of one document strictly. A document with
// nothing in it gives neither pods nor errors; a list with no items gives a
// non-nil empty slice, so that Decode can tell the two apart.
// steps counts the work, as for decode.
func decodeDocument(file string, doc document, steps *int) ([]decodedPod, ErrorList) {
	if bytes.IndexByte(doc.data, '\t') >= 0 && json.Valid(doc.data) {
		// Tabs in valid JSON are whitespace between tokens (a tab in a string
		// is escaped), but YAML does not allow them everywhere JSON does.
		doc.data = bytes.ReplaceAll(doc.data, []byte("\t"), []byte(" "))
	}
	// The JSON comes from the same YAML library the kubelet and kubectl use,
	// so values mean what they would mean there. The node tree is only for
	// the schema check and line numbers.
	// Duplicate keys are left to the schema check, which names them better
	// and, unlike the library's strict mode, lets keys override merged ones.
	js, jsErr := sigsyaml.YAMLToJSON(doc.data)
	var root yaml.Node
	treeErr := yaml.Unmarshal(doc.data, &root)
	if treeErr != nil && jsErr == nil {
		_, jsErr = sigsyaml.YAMLToJSONStrict(doc.data)
	}
	if jsErr != nil && treeErr != nil {
		return nil, ErrorList{syntaxError(file, doc, jsErr)}
	}
	var top *yaml.Node
	if treeErr == nil && root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		top = root.Content[0]
	}
	if jsErr == nil && bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil // only comments, or nothing
	}
	if jsErr != nil && top == nil {
		return nil, ErrorList{syntaxError(file, doc, jsErr)}
	}

	lines := newLineIndex(steps)
	at := func(path string) int {
		if top == nil {
			return 0
		}
		return doc.offset + lines.lineOf(top, path)
	}
	var h struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if top != nil && top.Kind != yaml.MappingNode || top == nil && json.Unmarshal(js, &h) != nil {
		return nil, ErrorList{{File: file, Line: at(""), Msg: "expected a Pod, PodList or List object"}}
	}
	if top != nil {
		h.APIVersion, h.Kind = scalarOf(top, "apiVersion"), scalarOf(top, "kind")
	}
	var errs ErrorList
	if h.APIVersion != "v1" {
		errs = append(errs, &Error{File: file, Line: at("apiVersion"), Field: "apiVersion", Msg: fmt.Sprintf("must be v1, got %s", show(h.APIVersion))})
	}
	kind, _ := h.Kind.(string)
	switch kind {
	case "Pod", "PodList", "List", KindConfigMap, KindSecret:
	default:
		errs = append(errs, &Error{File: file, Line: at("kind"), Field: "kind", Msg: fmt.Sprintf("must be Pod, PodList, List, ConfigMap or Secret, got %s", show(h.Kind))})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if (kind == "PodList" || kind == "List") && top != nil {
		errs = checkItems(file, top, kind, at)
		if len(errs) > 0 {
			return nil, errs
		}
	}

	if top != nil {
		sc := newSchemaChecker(file, doc.offset, len(doc.data))
		switch kind {
		case "Pod":
			sc.check(top, typePod, "")
		case KindConfigMap:
			sc.check(top, typeConfigMap, "")
		case KindSecret:
			sc.redact = true
			sc.check(top, typeSecret, "")
		default:
			sc.check(top, typePodList, "")
		}
		*steps += sc.nodes
		if len(sc.errs) > 0 {
			return nil, sc.errs
		}
	}
	if jsErr != nil {
		return nil, ErrorList{syntaxError(file, doc, jsErr)}
	}

	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	switch kind {
	case KindConfigMap, KindSecret:
		d, err := decodeObject(dec, kind)
		if err != nil {
			return nil, ErrorList{jsonError(file, err)}
		}
		d.node, d.offset, d.lines = top, doc.offset, lines
		return []decodedPod{d}, nil
	}
	if kind == "Pod" {
		var p podDoc
		if err := dec.Decode(&p); err != nil {
			return nil, ErrorList{jsonError(file, err)}
		}
		return []decodedPod{{pod: &p.Pod, node: top, offset: doc.offset, lines: lines}}, nil
	}
	var l podListDoc
	if err := dec.Decode(&l); err != nil {
		return nil, ErrorList{jsonError(file, err)}
	}
	var items *yaml.Node
	if top != nil {
		items = valueOf(top, "items")
	}
	pods := make([]decodedPod, len(l.Items))
	for i := range l.Items {
		pods[i] = decodedPod{pod: &l.Items[i].Pod, prefix: "items[" + strconv.Itoa(i) + "].", offset: doc.offset, lines: lines}
		if items != nil && items.Kind == yaml.SequenceNode && i < len(items.Content) {
			pods[i].node = items.Content[i]
		}
	}
	return pods, nil
}

// checkItems checks that the items of a list are v1 Pods: a List may hold
// anything, and an item of another kind would otherwise be judged against the
// Pod schema. A PodList's items may leave apiVersion and kind out. at gives
// the file line of a field path.
func checkItems(file string, top *yaml.Node, kind string, at func(path string) int) ErrorList {
	items := valueOf(top, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		return nil // the schema check reports it
	}
	var errs ErrorList
	for i, item := range items.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		p := "items[" + strconv.Itoa(i) + "]"
		av, k := scalarOf(item, "apiVersion"), scalarOf(item, "kind")
		if k != "Pod" && (kind == "List" || k != nil) {
			errs = append(errs, &Error{File: file, Line: at(p + ".kind"), Field: p + ".kind", Msg: fmt.Sprintf("must be Pod, got %s", show(k))})
			continue
		}
		if av != "v1" && (kind == "List" || av != nil) {
			errs = append(errs, &Error{File: file, Line: at(p + ".apiVersion"), Field: p + ".apiVersion", Msg: fmt.Sprintf("must be v1, got %s", show(av))})
		}
	}
	return errs
}

// valueOf returns the value of key in mapping n, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

// scalarOf returns the string value of key in mapping n; nil when the key is
// absent; the node's description when it is not a string.
func scalarOf(n *yaml.Node, key string) any {
	v := valueOf(n, key)
	switch {
	case v == nil:
		return nil
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str":
		return v.Value
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
		return nil
	default:
		return describe(v)
	}
}

// show formats a header value for a message.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprint(v)
	}
}

var (
	yamlLineRe   = regexp.MustCompile(`line (\d+): `)
	yamlPrefixRe = regexp.MustCompile(`^(error converting YAML to JSON: )?(yaml: )?(unmarshal errors:\s*)?`)
)

// syntaxError turns a YAML library error in doc into an Error with the file
// line. The library can name the line after the last one, when the document
// ends in the middle of something: that is the document's last line.
func syntaxError(file string, doc document, err error) *Error {
	msg := strings.TrimSpace(err.Error())
	msg = yamlPrefixRe.ReplaceAllString(msg, "")
	line := 0
	if m := yamlLineRe.FindStringSubmatchIndex(msg); m != nil {
		line, _ = strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[0]] + msg[m[1]:]
		line = doc.offset + min(line, 1+bytes.Count(doc.data, []byte("\n")))
	}
	msg = strings.Join(strings.Fields(msg), " ")
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg}
}

// jsonError turns an error of the strict JSON decode into an Error. The
// schema check catches nearly everything first, with lines; this is the
// fallback for what it leaves to the decoder.
func jsonError(file string, err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &Error{File: file, Field: te.Field, Msg: fmt.Sprintf("expected %s, got %s", te.Type, te.Value)}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if f, err := strconv.Unquote(name); err == nil {
			return &Error{File: file, Field: f, Msg: "unknown field"}
		}
	}
	return &Error{File: file, Msg: msg}
}
