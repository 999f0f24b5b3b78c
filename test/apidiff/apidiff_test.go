package apidiff

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

const node = "node1"

// stricter lists where staticlet may refuse what the apiserver accepts:
// only where the pod could not run anyway. A refusal is allowed when each
// of its errors matches an entry (field and message patterns). README.md
// lists the same reasons.
var stricter = []struct {
	field, msg *regexp.Regexp
	reason     string
}{
	{
		regexp.MustCompile(``),
		regexp.MustCompile(`not supported by staticlet`),
		"a feature staticlet does not have (an image volume, a restart policy of one container): refused with the reason rather than a pod that never starts",
	},
	{
		regexp.MustCompile(``),
		regexp.MustCompile(`need(s)? an apiserver`),
		"it needs an apiserver, which a static pod's kubelet refuses too",
	},
	{
		regexp.MustCompile(`^spec\.os\.name$`),
		regexp.MustCompile(`staticlet runs Linux containers`),
		"a Windows pod: the kubelet on a Linux node rejects it at admission",
	},
	{
		regexp.MustCompile(`^spec\.volumes\[\d+\]\.emptyDir\.medium$`),
		regexp.MustCompile(`Unsupported value|no resource request for huge pages|multiple huge page sizes`),
		"an emptyDir medium the kubelet cannot set up: one it does not know, or huge pages of a size the pod does not request",
	},
	{
		regexp.MustCompile(`\.resourceFieldRef\.containerName$`),
		regexp.MustCompile(`Not found`),
		"a resourceFieldRef naming a container the pod lacks: the kubelet fails the container (CreateContainerConfigError) on every start",
	},
	{
		regexp.MustCompile(`\.ports\[\d+\]\.hostIP$`),
		regexp.MustCompile(`must be an IP address to publish the hostPort on`),
		"a published hostPort with a hostIP that is not an address: the kubelet's portmap plugin leaves the port unpublished",
	},
}

// staticletDoc judges a manifest with staticlet's own decoding, which
// takes pods, ConfigMaps and Secrets.
func staticletDoc(data []byte) verdict {
	var v verdict
	_, err := pod.DecodeFile("mutant.yaml", data, pod.Options{NodeName: node, Seen: time.Unix(0, 0)})
	if err == nil {
		return v
	}
	var list pod.ErrorList
	if !errors.As(err, &list) {
		v.add("", err.Error())
		return v
	}
	for _, e := range list {
		v.add(e.Field, e.Msg)
	}
	return v
}

// allowed returns the reason staticlet's refusal is allowed, or "".
func allowed(v verdict) string {
	var reason string
	for i := range v.fields {
		ok := false
		for _, s := range stricter {
			if s.field.MatchString(v.fields[i]) && s.msg.MatchString(v.msgs[i]) {
				ok, reason = true, s.reason
				break
			}
		}
		if !ok {
			return ""
		}
	}
	return reason
}

// tally counts the outcomes of one category of mutants.
type tally struct {
	total, agree                   int
	acceptedInvalid, rejectedValid int // staticlet too lax; too strict without a reason
	allowedStricter                int
	bothRejected, fieldsMatch      int
}

// TestPodsAgainstAPIServer compares staticlet's verdict on every mutant
// of the real static pods under testdata/pods with the apiserver's, and
// fails on any pod staticlet accepts that the apiserver rejects, and on
// any it rejects that the apiserver accepts without an entry in stricter.
func TestPodsAgainstAPIServer(t *testing.T) {
	compare(t, "testdata/pods", func(string) []addition { return additions() })
}

// TestObjectsAgainstAPIServer does the same for ConfigMaps and Secrets,
// against the apiserver's ValidateConfigMap and ValidateSecret.
func TestObjectsAgainstAPIServer(t *testing.T) {
	compare(t, "testdata/objects", objectAdditions)
}

// compare judges the bases under dir and their mutants both ways, fails
// on each disagreement that is not allowed, and logs the figures.
func compare(t *testing.T, dir string, adds func(kind string) []addition) {
	start := time.Now()
	bases := loadBases(t, dir)
	for name, base := range bases {
		data := encode(t, base)
		if v := staticletDoc(data); v.rejected {
			t.Fatalf("base %s: staticlet %s", name, v)
		}
		if v := apiserverDoc(data, node); v.rejected {
			t.Fatalf("base %s: apiserver %s", name, v)
		}
	}
	ms := mutants(t, bases, adds)
	tallies := map[string]*tally{}
	var all tally
	for _, m := range ms {
		s, a := staticletDoc(m.data), apiserverDoc(m.data, node)
		cat := m.category
		if i := strings.IndexByte(cat, ':'); i >= 0 && !strings.HasPrefix(cat, "add:") {
			cat = cat[:i]
		}
		tl := tallies[cat]
		if tl == nil {
			tl = &tally{}
			tallies[cat] = tl
		}
		tl.count(s, a)
		all.count(s, a)
		switch {
		case !s.rejected && a.rejected:
			t.Errorf("accepted by staticlet, rejected by the apiserver: %s (%s)\n  apiserver %s", m.name, m.category, a)
		case s.rejected && !a.rejected && allowed(s) == "":
			t.Errorf("rejected by staticlet, accepted by the apiserver: %s (%s)\n  staticlet %s", m.name, m.category, s)
		case s.rejected && !a.rejected && testing.Verbose():
			t.Logf("stricter, allowed: %s: %s\n  staticlet %s", m.name, allowed(s), short(s))
		case s.rejected && a.rejected && !fieldsMeet(s.fields, a.fields) && testing.Verbose():
			t.Logf("fields differ: %s\n  staticlet %s\n  apiserver %s", m.name, short(s), short(a))
		}
	}
	t.Logf("%d mutants of %d manifests in %v", len(ms), len(bases), time.Since(start).Round(time.Millisecond))
	t.Logf("%-24s %6s %6s %7s %8s %8s %8s %8s %9s", "category", "total", "agree", "agree%", "lax", "strict", "allowed", "+allowed", "fields")
	for _, cat := range sortedKeys(tallies) {
		logTally(t, cat, tallies[cat])
	}
	logTally(t, "all", &all)
}

// count adds one mutant's verdicts: s staticlet's, a the apiserver's.
func (x *tally) count(s, a verdict) {
	x.total++
	switch {
	case s.rejected == a.rejected:
		x.agree++
	case a.rejected:
		x.acceptedInvalid++
	case allowed(s) != "":
		x.allowedStricter++
	default:
		x.rejectedValid++
	}
	if s.rejected && a.rejected {
		x.bothRejected++
		if fieldsMeet(s.fields, a.fields) {
			x.fieldsMatch++
		}
	}
}

// short is a verdict cut to a line's length, for the log.
func short(v verdict) string {
	s := v.String()
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

func logTally(t *testing.T, name string, x *tally) {
	t.Helper()
	fields := "-"
	if x.bothRejected > 0 {
		fields = fmt.Sprintf("%d/%d", x.fieldsMatch, x.bothRejected)
	}
	pct := func(n int) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(x.total)) }
	t.Logf("%-24s %6d %6d %7s %8d %8d %8d %8s %9s", name, x.total, x.agree, pct(x.agree),
		x.acceptedInvalid, x.rejectedValid, x.allowedStricter, pct(x.agree+x.allowedStricter), fields)
}

// fieldsMeet reports whether the two validators name a common field, or
// one names a field within another's (staticlet may name the value where
// the apiserver names the list holding it, and the other way round). Map
// keys are compared in either notation (annotations[k], annotations.k),
// and where the apiserver leaves out an index staticlet gives, the paths
// are compared without indexes. A decoding error of the apiserver's
// (no field) meets any of staticlet's.
func fieldsMeet(s, a []string) bool {
	if len(a) == 1 && a[0] == "" {
		return len(s) > 0
	}
	for _, f := range s {
		for _, g := range a {
			f, g := normalize(f), normalize(g)
			if f == g || f != "" && g != "" && (within(f, g) || within(g, f)) {
				return true
			}
			f, g = indexes.ReplaceAllString(f, ""), indexes.ReplaceAllString(g, "")
			if f != "" && g != "" && (within(f, g) || within(g, f)) {
				return true
			}
		}
	}
	return false
}

var (
	mapKey  = regexp.MustCompile(`\[([^\]]*[^\]0-9][^\]]*)\]`)
	indexes = regexp.MustCompile(`\[\d+\]`)
)

// normalize writes the keys of a field path's maps with dots.
func normalize(f string) string { return mapKey.ReplaceAllString(f, ".$1") }

// within reports whether path f is g or below it.
func within(f, g string) bool {
	return strings.HasPrefix(f, g) && (len(f) == len(g) || f[len(g)] == '.' || f[len(g)] == '[')
}
