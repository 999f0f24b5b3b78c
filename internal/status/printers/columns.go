package printers

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/liggitt/tabwriter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clip "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// customColumns prints kubectl's -o custom-columns: a table whose
// columns are given as HEADER:JSONPATH, one row per object, the values a
// path finds joined by commas, <none> when it finds nothing. The printer
// is kubectl's (k8s.io/kubectl/pkg/cmd/get), which staticlet does not
// import: that package alone would double staticlet's binary. The paths
// are evaluated by client-go's jsonpath, as there.
type customColumns struct {
	headers []string
	paths   []*jsonpath.JSONPath
	// noHeaders leaves out the header line; printed is set once it is
	// out, so that a watch prints it once.
	noHeaders, printed bool
}

// newCustomColumns parses the template of format custom-columns
// ("NAME:.metadata.name,IP:.status.podIP") or custom-columns-file (a
// file of two lines: the headers, then the paths, separated by spaces;
// kubectl prints such a table with its header whatever --no-headers says).
func newCustomColumns(format, template string, noHeaders bool) (*customColumns, error) {
	if template == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	var headers, specs []string
	if format == "custom-columns-file" {
		var err error
		if headers, specs, err = readColumnsFile(template); err != nil {
			return nil, err
		}
		noHeaders = false
	} else {
		for _, col := range strings.Split(template, ",") {
			header, spec, ok := strings.Cut(col, ":")
			if !ok {
				return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", col)
			}
			headers, specs = append(headers, header), append(specs, spec)
		}
	}
	c := &customColumns{headers: headers, noHeaders: noHeaders}
	for i, spec := range specs {
		expr, err := relaxedJSONPath(spec)
		if err != nil {
			return nil, err
		}
		p := jsonpath.New(fmt.Sprintf("column%d", i)).AllowMissingKeys(true)
		if err := p.Parse(expr); err != nil {
			return nil, err
		}
		c.paths = append(c.paths, p)
	}
	return c, nil
}

// readColumnsFile reads the headers and paths of a custom-columns-file.
func readColumnsFile(path string) (headers, specs []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading template %s, %w", path, err)
	}
	const want = "Expected format is one line of space separated headers, one line of space separated column specs."
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return nil, nil, fmt.Errorf("invalid template, missing header line. %s", want)
	}
	first := sc.Text()
	if !sc.Scan() {
		return nil, nil, fmt.Errorf("invalid template, missing spec line. %s", want)
	}
	headers, specs = strings.Fields(first), strings.Fields(sc.Text())
	if len(headers) != len(specs) {
		return nil, nil, fmt.Errorf("number of headers (%d) and field specifications (%d) don't match", len(headers), len(specs))
	}
	return headers, specs, nil
}

// relaxedPath is the forms of a column's path kubectl takes: with or
// without the braces, with or without the leading dot.
var relaxedPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPath turns a column's path (metadata.name, .metadata.name,
// {metadata.name}) into a jsonpath template: {.metadata.name}.
func relaxedJSONPath(spec string) (string, error) {
	if spec == "" {
		return "", nil
	}
	m := relaxedPath.FindStringSubmatch(spec)
	if m == nil {
		return "", fmt.Errorf("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'")
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}", nil
}

// PrintObj prints obj's row, or a row for each item of a list, after the
// header the first time. It aligns the columns with kubectl's tabwriter,
// or with w when w is one (a watch's, which keeps its widths).
func (c *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	tw, ok := w.(*tabwriter.Writer)
	if !ok {
		tw = clip.GetNewTabWriter(w)
		defer tw.Flush()
	}
	if !c.noHeaders && !c.printed {
		fmt.Fprintln(tw, strings.Join(c.headers, "\t"))
	}
	c.printed = true
	var items []map[string]any
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			items = append(items, o.Items[i].Object)
		}
	case *unstructured.Unstructured:
		items = append(items, o.Object)
	default:
		return fmt.Errorf("custom-columns: cannot print %T", obj)
	}
	for _, item := range items {
		if err := c.row(tw, item); err != nil {
			return err
		}
	}
	return nil
}

// row prints the row of one object.
func (c *customColumns) row(w io.Writer, obj map[string]any) error {
	cells := make([]string, len(c.paths))
	for i, p := range c.paths {
		results, err := p.FindResults(obj)
		if err != nil {
			return err
		}
		var values []string
		for _, r := range results {
			for _, v := range r {
				values = append(values, clip.EscapeTerminal(fmt.Sprint(v.Interface())))
			}
		}
		if len(values) == 0 {
			values = []string{none}
		}
		cells[i] = strings.Join(values, ",")
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
	return nil
}
