package pod

import (
	"strconv"
	"strings"
)

// Error is one problem found in a manifest: where it is (the file as given to
// Decode, the line when known, the field path in Kubernetes notation such as
// spec.containers[0].image) and what is wrong.
type Error struct {
	File  string
	Line  int    // 1-based line in the file; 0 when unknown
	Field string // field path; empty for problems of the whole document
	Msg   string
}

// Error returns "<file>:<line>: <field>: <msg>", leaving out the line when it
// is unknown and the field when there is none.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one manifest file, in file order.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the errors, so that errors.As finds an *Error in the list.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
