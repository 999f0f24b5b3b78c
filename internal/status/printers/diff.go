package printers

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// diffContext is how many unchanged lines a hunk shows around a change,
// as `diff -u` does.
const diffContext = 3

// edit is one line of an edit script: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	text string
}

// Unified writes the line difference from text a (named aName) to text b
// (bName) in the unified format of `diff -u`: the two header lines, then
// hunks with three lines of context. It writes nothing when the texts are
// equal. The script is a longest common subsequence of the lines, after the
// common head and tail are set apart, so its cost is the product of the
// lengths of the changed middles only.
func Unified(w io.Writer, aName, bName, a, b string) error {
	if a == b {
		return nil
	}
	eds := lineEdits(splitLines(a), splitLines(b))
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "--- %s\n+++ %s\n", aName, bName)
	// aAt and bAt are the lines of a and b before each edit.
	aAt, bAt := make([]int, len(eds)+1), make([]int, len(eds)+1)
	for i, e := range eds {
		aAt[i+1], bAt[i+1] = aAt[i], bAt[i]
		if e.op != '+' {
			aAt[i+1]++
		}
		if e.op != '-' {
			bAt[i+1]++
		}
	}
	for i := 0; i < len(eds); {
		for i < len(eds) && eds[i].op == ' ' {
			i++
		}
		if i == len(eds) {
			break
		}
		start, end := max(0, i-diffContext), i
		// Take in the changes that follow within twice the context: one
		// hunk shows them with the lines between.
		for {
			for end < len(eds) && eds[end].op != ' ' {
				end++
			}
			next := end
			for next < len(eds) && eds[next].op == ' ' {
				next++
			}
			if next == len(eds) || next-end > 2*diffContext {
				break
			}
			end = next
		}
		stop := min(len(eds), end+diffContext)
		fmt.Fprintf(bw, "@@ -%s +%s @@\n", hunkRange(aAt[start], aAt[stop]-aAt[start]), hunkRange(bAt[start], bAt[stop]-bAt[start]))
		for _, e := range eds[start:stop] {
			fmt.Fprintf(bw, "%c%s\n", e.op, e.text)
		}
		i = stop
	}
	return bw.Flush()
}

// hunkRange is one side of a hunk header: the first line (1-based; the
// line before, for an empty range) and the count, left out when 1.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}

// splitLines splits s into lines, without their line ends.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineEdits returns an edit script from a to b.
func lineEdits(a, b []string) []edit {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var out []edit
	for _, l := range a[:head] {
		out = append(out, edit{' ', l})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	// lcs[i][j] is the length of a longest common subsequence of ma[i:]
	// and mb[j:].
	lcs := make([][]int, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			out = append(out, edit{' ', ma[i]})
			i++
			j++
		case j == len(mb) || i < len(ma) && lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, edit{'-', ma[i]})
			i++
		default:
			out = append(out, edit{'+', mb[j]})
			j++
		}
	}
	for _, l := range a[len(a)-tail:] {
		out = append(out, edit{' ', l})
	}
	return out
}
