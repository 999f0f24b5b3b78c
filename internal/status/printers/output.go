package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/liggitt/tabwriter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	clip "k8s.io/cli-runtime/pkg/printers"
)

// Output is how a get command prints, from kubectl's output flags: -o,
// --template, --no-headers and --allow-missing-template-keys.
type Output struct {
	// Format is -o as given: "" or "wide" for the command's table, json,
	// yaml, name, or a template format with its template after "="
	// (jsonpath={.items[*].metadata.name}).
	Format string
	// Template is --template: the template (or its file) of a template
	// format given without "=". With no -o, it implies go-template, as
	// in kubectl.
	Template string
	// NoHeaders leaves out the header line of the tables (the command's
	// own and -o custom-columns).
	NoHeaders bool
	// AllowMissingKeys lets a template print nothing for a missing field
	// instead of failing: kubectl's --allow-missing-template-keys, true
	// by default there.
	AllowMissingKeys bool
}

// Format names kubectl's get commands take.
const (
	FormatWide = "wide"
	FormatJSON = "json"
	FormatYAML = "yaml"
	FormatName = "name"
)

// templateFormats are the formats that take a template (or a file of
// one) after "=" or in --template.
func templateFormats() []string {
	return []string{
		"custom-columns", "custom-columns-file",
		"go-template", "go-template-file", "template", "templatefile",
		"jsonpath", "jsonpath-as-json", "jsonpath-file",
	}
}

// format splits o's format into its name and its template: -o
// jsonpath={.a} is "jsonpath" and "{.a}"; --template, when given, is
// the template and -o the name, as kubectl reads them.
func (o Output) format() (name, template string) {
	name = o.Format
	if name == "" && o.Template != "" {
		name = "go-template"
	}
	if o.Template != "" {
		return name, o.Template
	}
	for _, f := range templateFormats() {
		if t, ok := strings.CutPrefix(name, f+"="); ok {
			return f, t
		}
	}
	return name, ""
}

// Table reports whether o asks for the command's own table, and wide
// whether for its wide form.
func (o Output) Table() (table, wide bool) {
	name, _ := o.format()
	return name == "" || name == FormatWide, name == FormatWide
}

// Raw is "json" or "yaml" when o asks for one of them, else "".
func (o Output) Raw() string {
	if name, _ := o.format(); name == FormatJSON || name == FormatYAML {
		return name
	}
	return ""
}

// Writer is w for the command's own tables: with NoHeaders, a writer
// that has them leave out their header lines.
func (o Output) Writer(w io.Writer) io.Writer {
	if o.NoHeaders {
		return headless{w}
	}
	return w
}

// headless marks a writer whose tables are printed without header lines,
// as kubectl's --no-headers: newTable sees it.
type headless struct{ io.Writer }

// Formats is what a command takes for -o: its own (wide, json, yaml,
// each where it has it), name when it prints Kubernetes objects, and
// every template format.
type Formats struct {
	Own   []string
	Names bool
}

// All lists every format, sorted, as kubectl's error lists them.
func (f Formats) All() []string {
	all := append(slices.Clone(f.Own), templateFormats()...)
	if f.Names {
		all = append(all, FormatName)
	}
	all = slices.DeleteFunc(all, func(s string) bool { return s == "" })
	slices.Sort(all)
	return all
}

// Printer returns the printer of a format that cli-runtime's printers
// (and custom-columns) print; nil when o asks for one of the command's
// own forms (its table, wide, json, yaml), which it prints itself. An
// unknown format, a template missing or failing to parse, is an error
// worded as kubectl's.
func (o Output) Printer(f Formats) (*Printer, error) {
	name, template := o.format()
	if name == "" || slices.Contains(f.Own, name) {
		return nil, nil
	}
	unknown := fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s",
		o.Format, strings.Join(f.All(), ","))
	if name == FormatName {
		if !f.Names {
			return nil, unknown
		}
		return &Printer{p: &clip.NamePrinter{ShortOutput: true}, kube: true}, nil
	}
	if !slices.Contains(templateFormats(), name) {
		return nil, unknown
	}
	if strings.HasPrefix(name, "custom-columns") {
		p, err := newCustomColumns(name, template, o.NoHeaders)
		if err != nil {
			return nil, err
		}
		return &Printer{p: p, kube: f.Names}, nil
	}
	if template == "" {
		return nil, fmt.Errorf("template format specified but no template given")
	}
	if strings.HasSuffix(name, "-file") || name == "templatefile" {
		b, err := os.ReadFile(template)
		if err != nil {
			return nil, fmt.Errorf("error reading --template %s, %w", template, err)
		}
		template = string(b)
	}
	p, err := templatePrinter(name, template, o.AllowMissingKeys)
	if err != nil {
		return nil, err
	}
	return &Printer{p: p, kube: f.Names}, nil
}

// templatePrinter parses template for a jsonpath or go-template format.
func templatePrinter(name, template string, allowMissing bool) (clip.ResourcePrinter, error) {
	if strings.HasPrefix(name, "jsonpath") {
		p, err := clip.NewJSONPathPrinter(template)
		if err != nil {
			return nil, fmt.Errorf("error parsing jsonpath %s, %w", template, err)
		}
		p.AllowMissingKeys(allowMissing)
		p.EnableJSONOutput(name == "jsonpath-as-json")
		return p, nil
	}
	p, err := clip.NewGoTemplatePrinter([]byte(template))
	if err != nil {
		return nil, fmt.Errorf("error parsing template %s, %w", template, err)
	}
	p.AllowMissingKeys(allowMissing)
	return p, nil
}

// Printer prints objects through one of kubectl's printers (name,
// jsonpath, go-template, custom-columns) as kubectl get prints them: the
// objects of a list in a v1 List, one object asked for by name alone.
// It remembers whether it printed custom-columns' header: use it from
// one goroutine.
type Printer struct {
	p clip.ResourcePrinter
	// kube is set when the objects are Kubernetes objects, which get
	// their apiVersion and kind; others are printed as their JSON.
	kube bool
}

// List prints items, each of kind (a core/v1 kind such as "Pod"; "" for
// documents that are not Kubernetes objects), as a v1 List.
func List[T any](p *Printer, w io.Writer, kind string, items []T) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
	}}
	for i := range items {
		u, err := p.unstructured(kind, &items[i])
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *u)
	}
	return p.print(w, list)
}

// Object prints obj, of kind as for List, by itself.
func (p *Printer) Object(w io.Writer, kind string, obj any) error {
	u, err := p.unstructured(kind, obj)
	if err != nil {
		return err
	}
	return p.print(w, u)
}

// Document prints doc, what -o json prints for a command whose answer
// is not a Kubernetes object: an object as it is, an array as the items
// of a v1 List.
func (p *Printer) Document(w io.Writer, doc any) error {
	m, err := toMap(doc)
	if err != nil {
		return err
	}
	if items, ok := m["items"].([]any); ok && m["kind"] == "List" {
		list := &unstructured.UnstructuredList{Object: m}
		delete(m, "items")
		for _, it := range items {
			obj, _ := it.(map[string]any)
			list.Items = append(list.Items, unstructured.Unstructured{Object: obj})
		}
		return p.print(w, list)
	}
	return p.print(w, &unstructured.Unstructured{Object: m})
}

// WatchEvent prints a watch event of type typ about obj, of kind as for
// List, as kubectl's --output-watch-events does: the event, or with -o
// name the object's name.
func (p *Printer) WatchEvent(w io.Writer, typ, kind string, obj any) error {
	u, err := p.unstructured(kind, obj)
	if err != nil {
		return err
	}
	if _, ok := p.p.(*clip.NamePrinter); ok {
		return p.print(w, u)
	}
	ev := map[string]any{"type": typ, "object": u.Object}
	return p.print(w, &unstructured.Unstructured{Object: ev})
}

// watchWriter is the writer a watch prints through a Printer: kubectl
// aligns what each change prints with a tabwriter that keeps its column
// widths, flushed after each.
func watchWriter(w io.Writer) *tabwriter.Writer {
	return clip.GetNewTabWriter(w)
}

func (p *Printer) print(w io.Writer, obj runtime.Object) error {
	return p.p.PrintObj(obj, w)
}

// unstructured is obj as kubectl's client has it: decoded from its JSON,
// with apiVersion v1 and kind when it is a Kubernetes object.
func (p *Printer) unstructured(kind string, obj any) (*unstructured.Unstructured, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if p.kube && kind != "" {
		u.SetAPIVersion("v1")
		u.SetKind(kind)
	}
	return u, nil
}

// toMap is obj's JSON decoded as the apimachinery decodes unstructured
// objects (whole numbers as int64), so that templates print them as
// kubectl does.
func toMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T for printing: %w", obj, err)
	}
	if len(b) > 0 && b[0] == '[' {
		b = append(append([]byte(`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":`), b...), '}')
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding %T for printing: %w", obj, err)
	}
	return m, nil
}
