package printers

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/status"
)

// Images writes the images as a table: NAME ID SIZE SOURCE LAST-USED
// KEPT, the ID shortened to 12 hex digits as crictl does, LAST-USED the
// time since a container last used the image (relative to now), KEPT why
// garbage collection keeps it; then, if some import file failed, those
// files under FILE ERROR.
func Images(w io.Writer, list *status.ImageList, now time.Time) error {
	tw := newTable(w)
	tw.header("NAME\tID\tSIZE\tSOURCE\tLAST-USED\tKEPT")
	for _, img := range list.Images {
		lastUsed := "never"
		if !img.LastUsed.IsZero() {
			lastUsed = age(img.LastUsed, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", img.Name, shortDigest(img.ID), humanSize(img.Size), sourceText(img.Source),
			lastUsed, orNone(strings.Join(img.Kept, ",")))
	}
	var failed []status.ImportFile
	for _, f := range list.Imports {
		if f.Error != "" {
			failed = append(failed, f)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintln(tw)
		tw.header("FILE\tERROR")
		for _, f := range failed {
			fmt.Fprintf(tw, "%s\t%s\n", filepath.Base(f.Path), strings.Join(strings.Fields(f.Error), " "))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing images: %w", err)
	}
	return nil
}

func shortDigest(d string) string {
	_, hex, ok := strings.Cut(d, ":")
	if !ok {
		hex = d
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return orNone(hex)
}

func sourceText(src string) string {
	switch {
	case src == status.SourcePull:
		return "pulled"
	case strings.HasPrefix(src, status.SourceImportPrefix):
		return "imported from " + strings.TrimPrefix(src, status.SourceImportPrefix)
	case strings.HasPrefix(src, status.SourceNamespacePrefix):
		return "taken from containerd namespace " + strings.TrimPrefix(src, status.SourceNamespacePrefix)
	}
	return orNone(src)
}

// humanSize writes n bytes in decimal units with three significant digits,
// as crictl and docker do ("4.26MB").
func humanSize(n int64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	f := float64(n)
	i := 0
	for f >= 999.5 && i < len(units)-1 { // 999.5 would print as 1e+03
		f /= 1000
		i++
	}
	return fmt.Sprintf("%.3g%s", f, units[i])
}
