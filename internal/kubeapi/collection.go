package kubeapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/staticlet/staticlet/internal/status"
)

// collection serves the objects of one resource from the store: get, list
// and watch, in the object's own form, as a Table, or as metadata only.
type collection struct {
	resource schema.GroupResource
	// snapshot returns every object (of namespace ns, unless ns is "")
	// and the store revision they are the state at.
	snapshot func(ns string) ([]runtime.Object, uint64)
	// since returns the changes after revision rev, oldest first, or an
	// error wrapping status.ErrRevisionGone when they are no longer known.
	// Nil makes a watch send every change it sees as the state of the
	// moment (diffing snapshots); a resumed watch then sends the objects
	// changed after its revision, by their resourceVersions, as MODIFIED,
	// but cannot tell of deletions before it began.
	since func(rev uint64) ([]change, error)
	// refresh, when not 0, is how often a watch reads the objects again:
	// those that change with time rather than with the store (the node's
	// Lease), which wakes watches of the others.
	refresh time.Duration
	// fields are the fields a field selector may name, beyond
	// metadata.name and metadata.namespace.
	fields func(obj runtime.Object) fields.Set
	// table is the server-side Table form of the objects.
	table tableForm
	// empty returns a new object of the collection's type, for bookmarks.
	empty func() runtime.Object
	// list wraps items in the resource's list type.
	list func(items []runtime.Object, rev string) runtime.Object
}

// change is one change of an object of a collection.
type change struct {
	typ watch.EventType
	obj runtime.Object
	rev uint64
}

// storeChanges are the changes of one of the store's histories as a
// collection's.
func storeChanges[T runtime.Object](changes []status.Change[T], err error) ([]change, error) {
	if err != nil {
		return nil, err
	}
	out := make([]change, len(changes))
	for i, c := range changes {
		out[i] = change{typ: watchType(c.Type), obj: c.Object, rev: c.Rev}
	}
	return out, nil
}

// tableForm is how a collection prints as a Table: its columns and each
// object's cells.
type tableForm struct {
	columns []metav1.TableColumnDefinition
	cells   func(obj runtime.Object, now time.Time) []any
}

// selectors are a request's label and field selectors.
type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelectors(r *http.Request) (selectors, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return selectors{}, apierrors.NewBadRequest("invalid labelSelector: " + err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return selectors{}, apierrors.NewBadRequest("invalid fieldSelector: " + err.Error())
	}
	return selectors{labels: ls, fields: fs}, nil
}

// matches reports whether obj, of namespace ns when ns is not "", is
// selected.
func (c *collection) matches(obj runtime.Object, ns string, sel selectors) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if ns != "" && m.GetNamespace() != ns {
		return false
	}
	if !sel.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	set := fields.Set{"metadata.name": m.GetName()}
	if m.GetNamespace() != "" {
		set["metadata.namespace"] = m.GetNamespace()
	}
	if c.fields != nil {
		for k, v := range c.fields(obj) {
			set[k] = v
		}
	}
	return sel.fields.Matches(set)
}

// checkFields refuses a field selector that names a field the
// collection does not have, as the apiserver does.
func (c *collection) checkFields(sel fields.Selector) error {
	known := fields.Set{"metadata.name": "", "metadata.namespace": ""}
	if c.fields != nil {
		for k := range c.fields(c.empty()) {
			known[k] = ""
		}
	}
	for _, r := range sel.Requirements() {
		if _, ok := known[r.Field]; !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
		}
	}
	return nil
}

// serveGet serves one object by namespace and name.
func (s *Server) serveGet(c *collection, w http.ResponseWriter, r *http.Request, req request) {
	t, ok := negotiate(r.Header.Get("Accept"), asTable, asPartial)
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	objs, _ := c.snapshot(req.namespace)
	for _, obj := range objs {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetName() != req.name {
			continue
		}
		switch t.as {
		case asTable:
			s.writeObject(w, r, http.StatusOK, t, s.toTable(c, r, []runtime.Object{obj}, m.GetResourceVersion()))
		case asPartial:
			s.writeObject(w, r, http.StatusOK, t, partialMetadata(obj))
		default:
			s.writeObject(w, r, http.StatusOK, t, obj)
		}
		return
	}
	s.writeStatus(w, r, apierrors.NewNotFound(c.resource, req.name))
}

// serveList serves a list or, with watch=true, a watch.
func (s *Server) serveList(c *collection, w http.ResponseWriter, r *http.Request, req request) {
	sel, err := parseSelectors(r)
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	if err := c.checkFields(sel.fields); err != nil {
		s.writeStatus(w, r, err)
		return
	}
	if req.verb == verbWatch {
		s.serveWatch(c, w, r, req, sel)
		return
	}
	t, ok := negotiate(r.Header.Get("Accept"), asTable, asPartialList)
	if !ok {
		s.writeStatus(w, r, notAcceptable(r.Header.Get("Accept")))
		return
	}
	objs, rev := c.snapshot(req.namespace)
	var items []runtime.Object
	for _, obj := range objs {
		if c.matches(obj, req.namespace, sel) {
			items = append(items, obj)
		}
	}
	rv := strconv.FormatUint(rev, 10)
	switch t.as {
	case asTable:
		s.writeObject(w, r, http.StatusOK, t, s.toTable(c, r, items, rv))
	case asPartialList:
		list := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		list.APIVersion, list.Kind = "meta.k8s.io/v1", "PartialObjectMetadataList"
		for _, obj := range items {
			list.Items = append(list.Items, *partialMetadata(obj))
		}
		s.writeObject(w, r, http.StatusOK, t, list)
	default:
		s.writeObject(w, r, http.StatusOK, t, c.list(items, rv))
	}
}

// toTable is the Table of objs, with each row's object as the request's
// includeObject asks: its metadata (the default), all of it, or none.
func (s *Server) toTable(c *collection, r *http.Request, objs []runtime.Object, rv string) *metav1.Table {
	now := time.Now()
	table := &metav1.Table{ColumnDefinitions: c.table.columns, ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	table.APIVersion, table.Kind = "meta.k8s.io/v1", "Table"
	include := metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))
	for _, obj := range objs {
		row := metav1.TableRow{Cells: c.table.cells(obj, now)}
		switch include {
		case metav1.IncludeNone:
		case metav1.IncludeObject:
			row.Object = runtime.RawExtension{Object: s.codecs.typed(obj)}
		default:
			row.Object = runtime.RawExtension{Object: partialMetadata(obj)}
		}
		table.Rows = append(table.Rows, row)
	}
	if table.Rows == nil {
		table.Rows = []metav1.TableRow{}
	}
	return table
}

// partialMetadata is obj's metadata as a PartialObjectMetadata.
func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	if m, err := meta.Accessor(obj); err == nil {
		p.ObjectMeta = metav1.ObjectMeta{
			Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp(),
			DeletionTimestamp: m.GetDeletionTimestamp(), Labels: m.GetLabels(),
			Annotations: m.GetAnnotations(), OwnerReferences: m.GetOwnerReferences(),
			Generation: m.GetGeneration(),
		}
	}
	p.APIVersion, p.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
	return p
}

// nameColumn is the first column of every Table, as the apiserver
// describes it.
// stringColumn is a Table column of strings; priority 1 puts it in the
// wide form only.
func stringColumn(name, desc string, priority int32) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc, Priority: priority}
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{
		Name: "Name", Type: "string", Format: "name",
		Description: "Name must be unique within a namespace. Cannot be updated.",
	}
}

// ageColumn is the AGE column.
func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{
		Name: "Age", Type: "string",
		Description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
	}
}
