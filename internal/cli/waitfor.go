package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/jsonpath"
)

// waitCond is what `staticlet wait --for` asks of a pod, in kubectl's three
// forms: delete, condition=NAME[=STATUS] and jsonpath='{PATH}'[=VALUE].
// Parsing and matching are pure; wait.go asks staticlet.
type waitCond struct {
	// delete: the pod is met when there is none.
	delete bool
	// condition is a condition type and status the pod must have, both
	// compared case-insensitively, as kubectl does.
	condition, status string
	// path, when set, must lead to one value in the pod's JSON: value, or
	// any value when value is empty; expr is the path as given.
	path        *jsonpath.JSONPath
	expr, value string
}

// forUsage is the --for syntax, for help and errors.
const forUsage = "delete, condition=NAME[=VALUE] or jsonpath='{PATH}'[=VALUE]"

// parseFor parses --for as kubectl does: "delete" in any case;
// "condition=Ready" or "condition=Ready=false" (the status defaults to
// true); "jsonpath={.status.phase}=Running", where the braces and the
// leading dot may be left out, quotes around the value are dropped, and
// no value means any value.
func parseFor(s string) (waitCond, error) {
	switch {
	case s == "":
		return waitCond{}, fmt.Errorf("--for is required: %s", forUsage)
	case strings.EqualFold(s, "delete"):
		return waitCond{delete: true}, nil
	case strings.HasPrefix(s, "condition="):
		name, status, hasStatus := strings.Cut(strings.TrimPrefix(s, "condition="), "=")
		if name == "" {
			return waitCond{}, fmt.Errorf("--for=%s: the condition name cannot be empty", s)
		}
		if !hasStatus {
			status = "true"
		} else if status == "" {
			return waitCond{}, fmt.Errorf("--for=%s: the condition value cannot be empty", s)
		}
		return waitCond{condition: name, status: status}, nil
	case strings.HasPrefix(s, "jsonpath="):
		return parseJSONPathFor(strings.TrimPrefix(s, "jsonpath="))
	}
	return waitCond{}, fmt.Errorf("unrecognized condition: %q: use %s", s, forUsage)
}

// parseJSONPathFor parses what follows "jsonpath=".
func parseJSONPathFor(s string) (waitCond, error) {
	expr, value, hasValue := strings.Cut(s, "=")
	if strings.HasPrefix(s, "{") {
		// The braces hold the path, which may hold "=" (a filter such
		// as [?(@.type=="Ready")]); what follows them is the value.
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return waitCond{}, fmt.Errorf("jsonpath %q: unclosed {", s)
		}
		expr, value = s[:end+1], s[end+1:]
		if hasValue = value != ""; hasValue && !strings.HasPrefix(value, "=") {
			return waitCond{}, fmt.Errorf("jsonpath %q: want '{PATH}' or '{PATH}'=VALUE", s)
		}
		value = strings.TrimPrefix(value, "=")
	}
	inner := expr
	if strings.HasPrefix(expr, "{") {
		inner = expr[1 : len(expr)-1]
	}
	inner = strings.TrimPrefix(inner, ".")
	if inner == "" {
		return waitCond{}, errors.New("jsonpath expression cannot be empty")
	}
	if strings.ContainsAny(inner, "{}") {
		return waitCond{}, fmt.Errorf("jsonpath %q: want a path like {.status.phase}", expr)
	}
	value = strings.Trim(value, `'"`)
	if hasValue && value == "" {
		return waitCond{}, errors.New("jsonpath wait value cannot be empty")
	}
	j := jsonpath.New("wait").AllowMissingKeys(true)
	if err := j.Parse("{." + inner + "}"); err != nil {
		return waitCond{}, fmt.Errorf("jsonpath %q: %w", expr, err)
	}
	return waitCond{path: j, expr: expr, value: value}, nil
}

// met reports whether p meets w; p is nil when staticlet has no such pod.
// An error means w can never be met by a pod like p (the path leads to
// several values, or to an object).
func (w waitCond) met(p *v1.Pod) (bool, error) {
	switch {
	case w.delete:
		return p == nil, nil
	case p == nil:
		return false, nil
	case w.path != nil:
		return w.pathMet(p)
	}
	for _, c := range p.Status.Conditions {
		if strings.EqualFold(string(c.Type), w.condition) {
			return strings.EqualFold(string(c.Status), w.status), nil
		}
	}
	return false, nil
}

// pathMet evaluates the path over the pod as JSON, as kubectl does over
// the object the apiserver sends: a missing field is not met, and the one
// value found is compared as text.
func (w waitCond) pathMet(p *v1.Pod) (bool, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	var obj any
	if err := json.Unmarshal(b, &obj); err != nil {
		return false, err
	}
	results, err := w.path.FindResults(obj)
	if err != nil {
		return false, err
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return false, nil
	}
	if len(results) > 1 || len(results[0]) > 1 {
		return false, errors.New("given jsonpath expression matches more than one value")
	}
	if w.value == "" {
		return true, nil
	}
	switch v := results[0][0].Interface().(type) {
	case map[string]any, []any:
		return false, errors.New("jsonpath leads to a nested object or list which is not supported")
	default:
		return strings.TrimSpace(fmt.Sprint(v)) == strings.TrimSpace(w.value), nil
	}
}

// podResources are the names kubectl knows the pod resource by.
var podResources = map[string]bool{"pod": true, "pods": true, "po": true}

// parsePodArgs returns the pod names the arguments of `wait` give, as
// kubectl takes them: "pod/NAME" ("pods/", "po/"), "pod NAME...", or a bare
// NAME. With all, there must be none (but "pod" may stand alone).
func parsePodArgs(args []string, all bool) ([]string, error) {
	if len(args) > 0 && podResources[strings.ToLower(args[0])] {
		if len(args) == 1 && !all {
			return nil, fmt.Errorf("%q names no pod: give pod/NAME, or --all", args[0])
		}
		args = args[1:]
	}
	if all {
		if len(args) > 0 {
			return nil, fmt.Errorf("--all takes no pod names, got %q", args)
		}
		return nil, nil
	}
	if len(args) == 0 {
		return nil, errors.New("name at least one pod (pod/NAME), or give --all")
	}
	names := make([]string, 0, len(args))
	for _, a := range args {
		name := a
		if res, n, ok := strings.Cut(a, "/"); ok {
			if !podResources[strings.ToLower(res)] {
				return nil, fmt.Errorf("%q: staticlet waits for pods only: give pod/NAME, and -n for a namespace", a)
			}
			name = n
		}
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%q: not a pod name: give pod/NAME, and -n for a namespace", a)
		}
		names = append(names, name)
	}
	return names, nil
}
