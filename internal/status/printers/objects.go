package printers

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/status"
)

// ConfigMaps writes configmaps as kubectl's "get configmaps -A" table
// with the file each comes from: NAMESPACE NAME DATA AGE SOURCE, and with
// wide also KEYS, each key with its value's size in bytes.
func ConfigMaps(w io.Writer, cms []v1.ConfigMap, wide bool, now time.Time) error {
	tw := newTable(w)
	tw.header(objectsHeader("NAMESPACE\tNAME\tDATA\tAGE\tSOURCE", wide))
	for i := range cms {
		cm := &cms[i]
		sizes := configMapSizes(cm)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s", cm.Namespace, cm.Name, len(sizes), age(cm.CreationTimestamp.Time, now), orNone(cm.Annotations[status.AnnotationObjectSource]))
		if wide {
			fmt.Fprintf(tw, "\t%s", orNone(keyList(sizes)))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing configmaps: %w", err)
	}
	return nil
}

// Secrets writes secrets, as the status API serves them (without data),
// as kubectl's "get secrets -A" table with the file each comes from:
// NAMESPACE NAME TYPE DATA AGE SOURCE, and with wide also KEYS, each key
// with its value's size in bytes. Nothing of a value is printed.
func Secrets(w io.Writer, secrets []v1.Secret, wide bool, now time.Time) error {
	tw := newTable(w)
	tw.header(objectsHeader("NAMESPACE\tNAME\tTYPE\tDATA\tAGE\tSOURCE", wide))
	for i := range secrets {
		s := &secrets[i]
		sizes := secretSizes(s)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s", s.Namespace, s.Name, s.Type, len(sizes), age(s.CreationTimestamp.Time, now), orNone(s.Annotations[status.AnnotationObjectSource]))
		if wide {
			fmt.Fprintf(tw, "\t%s", orNone(keyList(sizes)))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing secrets: %w", err)
	}
	return nil
}

// objectsHeader is the header of the ConfigMaps or Secrets table, with
// KEYS when wide.
func objectsHeader(cells string, wide bool) string {
	if wide {
		return cells + "\tKEYS"
	}
	return cells
}

// DescribeConfigMap writes cm the way "kubectl describe configmap" does:
// its metadata, then each value of data under its key, and the size of
// each value of binaryData.
func DescribeConfigMap(w io.Writer, cm *v1.ConfigMap) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	d.objectMeta(cm.Name, cm.Namespace, cm.Labels, cm.Annotations, cm.Immutable)
	d.line(0, "\nData\n====\n")
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		d.line(0, "%s:\n----\n%s\n\n", k, cm.Data[k])
	}
	d.line(0, "\nBinaryData\n====\n")
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		d.line(0, "%s: %d bytes\n", k, len(cm.BinaryData[k]))
	}
	if err := d.tw.Flush(); err != nil {
		return fmt.Errorf("describing configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// DescribeSecret writes s, as the status API serves it (without data),
// the way "kubectl describe secret" does: its metadata and type, then each
// key with the size of its value in bytes, never a value.
func DescribeSecret(w io.Writer, s *v1.Secret) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	ann := maps.Clone(s.Annotations)
	delete(ann, status.AnnotationSecretKeys) // shown as Data below
	d.objectMeta(s.Name, s.Namespace, s.Labels, ann, s.Immutable)
	d.line(0, "\nType:\t%s\n", s.Type)
	d.line(0, "\nData\n====\n")
	sizes := secretSizes(s)
	for _, k := range slices.Sorted(maps.Keys(sizes)) {
		d.line(0, "%s:\t%d bytes\n", k, sizes[k])
	}
	if err := d.tw.Flush(); err != nil {
		return fmt.Errorf("describing secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// objectMeta writes the lines that start the description of a ConfigMap
// or a Secret.
func (d *describer) objectMeta(name, ns string, labels, annotations map[string]string, immutable *bool) {
	d.line(0, "Name:\t%s\n", name)
	d.line(0, "Namespace:\t%s\n", ns)
	d.multiline("Labels", labels, "=", 0)
	d.multiline("Annotations", annotations, ": ", maxAnnotationLen)
	if immutable != nil && *immutable {
		d.line(0, "Immutable:\ttrue\n")
	}
}

// configMapSizes returns each key of cm with its value's size in bytes.
func configMapSizes(cm *v1.ConfigMap) map[string]int {
	sizes := make(map[string]int, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		sizes[k] = len(v)
	}
	for k, v := range cm.BinaryData {
		sizes[k] = len(v)
	}
	return sizes
}

// secretSizes returns each key of s with its value's size in bytes, as
// its staticlet.io/keys annotation says; a Secret with data (not one the
// status API served) counts its data.
func secretSizes(s *v1.Secret) map[string]int {
	if len(s.Data) > 0 {
		sizes := make(map[string]int, len(s.Data))
		for k, v := range s.Data {
			sizes[k] = len(v)
		}
		return sizes
	}
	sizes, err := status.KeySizes(s.Annotations[status.AnnotationSecretKeys])
	if err != nil {
		return map[string]int{}
	}
	return sizes
}

// keyList is "key(size),key(size)", sorted by key.
func keyList(sizes map[string]int) string {
	keys := slices.Sorted(maps.Keys(sizes))
	for i, k := range keys {
		keys[i] = k + "(" + strconv.Itoa(sizes[k]) + ")"
	}
	return strings.Join(keys, ",")
}

// SecretKeyCount is the DATA cell of s: how many keys it has.
func SecretKeyCount(s *v1.Secret) int64 { return int64(len(secretSizes(s))) }
