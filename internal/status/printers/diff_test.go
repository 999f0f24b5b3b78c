package printers

import (
	"strings"
	"testing"
)

func TestDiffUnified(t *testing.T) {
	lines := func(s ...string) string { return strings.Join(s, "\n") + "\n" }
	long := lines("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12")
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", long, long, ""},
		{"one line changed", long, strings.Replace(long, "6\n", "six\n", 1),
			lines("--- a", "+++ b", "@@ -3,7 +3,7 @@", " 3", " 4", " 5", "-6", "+six", " 7", " 8", " 9")},
		{"two hunks", long, strings.Replace(strings.Replace(long, "1\n", "one\n", 1), "12\n", "twelve\n", 1),
			lines("--- a", "+++ b", "@@ -1,4 +1,4 @@", "-1", "+one", " 2", " 3", " 4", "@@ -9,4 +9,4 @@", " 9", " 10", " 11", "-12", "+twelve")},
		{"changes close together share a hunk", long, strings.Replace(strings.Replace(long, "3\n", "three\n", 1), "8\n", "eight\n", 1),
			lines("--- a", "+++ b", "@@ -1,11 +1,11 @@", " 1", " 2", "-3", "+three", " 4", " 5", " 6", " 7", "-8", "+eight", " 9", " 10", " 11")},
		{"added at the end", lines("a", "b"), lines("a", "b", "c"),
			lines("--- a", "+++ b", "@@ -1,2 +1,3 @@", " a", " b", "+c")},
		{"from nothing", "", lines("a"),
			lines("--- a", "+++ b", "@@ -0,0 +1 @@", "+a")},
		{"to nothing", lines("a", "b"), "",
			lines("--- a", "+++ b", "@@ -1,2 +0,0 @@", "-a", "-b")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Unified(&b, "a", "b", tc.a, tc.b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("Unified =\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
