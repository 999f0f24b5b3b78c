package cli

import (
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/staticlet/staticlet/internal/status/printers"
)

// outputFlags are kubectl's output flags of a get command: -o, --template,
// --allow-missing-template-keys and, for a command with a table,
// --no-headers.
type outputFlags struct {
	printers.Output
	formats printers.Formats
}

// add gives cmd the flags, for the formats it takes besides the template
// formats; table says it prints a table (so --no-headers and
// custom-columns' header apply).
func (f *outputFlags) add(cmd *cobra.Command, formats printers.Formats, table bool) {
	f.formats = formats
	named := slices.DeleteFunc(slices.Clone(formats.Own), func(s string) bool { return s == "" })
	if formats.Names {
		named = append(named, printers.FormatName)
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.Format, "output", "o", "", "output format: "+strings.Join(named, ", ")+
		", jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, jsonpath-file=FILE, go-template=TEMPLATE (or template=), go-template-file=FILE (or templatefile=), custom-columns=HEADER:PATH,..., custom-columns-file=FILE, as kubectl's")
	fl.StringVar(&f.Template, "template", "", "the template (or its file, for -o ...-file) of -o jsonpath, go-template or custom-columns given without '='; alone, it means -o go-template")
	fl.BoolVar(&f.AllowMissingKeys, "allow-missing-template-keys", true, "with -o jsonpath or go-template, go on past a missing field or map key instead of failing")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return formats.All(), cobra.ShellCompDirectiveNoFileComp
	})
	if table {
		fl.BoolVar(&f.NoHeaders, "no-headers", false, "print the table (or -o custom-columns) without its header line")
	}
}

// printer checks -o and returns the kubectl printer it asks for; nil
// when it asks for one of the command's own forms.
func (f *outputFlags) printer() (*printers.Printer, error) {
	return f.Output.Printer(f.formats)
}

// kubeFormats are the formats of a command that prints Kubernetes
// objects: its table (wide too when wide), json, yaml and name.
func kubeFormats(wide bool) printers.Formats {
	own := []string{"", printers.FormatJSON, printers.FormatYAML}
	if wide {
		own = append(own, printers.FormatWide)
	}
	return printers.Formats{Own: own, Names: true}
}

// documentFormats are the formats of a command whose answer is a
// document of the status API: its table, json and yaml.
func documentFormats() printers.Formats {
	return printers.Formats{Own: []string{"", printers.FormatJSON, printers.FormatYAML}}
}

// printKube prints what a get command found of kind (a core/v1 kind):
// items, or the one object named (named set), through p when -o asks
// for one of kubectl's printers, else as JSON or YAML (raw: the object
// named or the command's list) or as the command's table.
func printKube[T any](w io.Writer, f *outputFlags, p *printers.Printer, kind string, items []T, named bool, raw any,
	table func(w io.Writer, wide bool) error) error {
	switch {
	case p != nil && named && len(items) == 1:
		return p.Object(w, kind, &items[0])
	case p != nil:
		return printers.List(p, w, kind, items)
	case f.Raw() != "":
		return printers.Object(w, raw, f.Raw())
	}
	_, wide := f.Table()
	return table(f.Writer(w), wide)
}

// printDocument prints doc, the status API's answer to a get command,
// through p, as JSON or YAML, or as the command's table.
func printDocument(w io.Writer, f *outputFlags, p *printers.Printer, doc any, table func(w io.Writer) error) error {
	switch {
	case p != nil:
		return p.Document(w, doc)
	case f.Raw() != "":
		return printers.Object(w, doc, f.Raw())
	}
	return table(f.Writer(w))
}
