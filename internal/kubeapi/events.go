package kubeapi

import (
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// eventResources are the events of the store, as core/v1 Events and as
// events.k8s.io/v1 Events, read-only.
func (s *Server) eventResources() []*resource {
	core := s.eventCollection(func(e *v1.Event) runtime.Object { return e }, coreEventFields, coreEventList)
	newer := s.eventCollection(func(e *v1.Event) runtime.Object { return newEvent(e) }, newEventFields, newEventList)
	newer.resource = eventsv1.Resource("events")
	newer.empty = func() runtime.Object {
		return &eventsv1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"}}
	}
	writes := func(request) string {
		return "staticlet records this node's events itself; they are read-only"
	}
	res := func(gv schema.GroupVersion, c *collection) *resource {
		return &resource{
			gv: gv, name: "events", singular: "event", kind: "Event", namespaced: true, shortNames: []string{"ev"},
			get:    func(w http.ResponseWriter, r *http.Request, req request) { s.serveGet(c, w, r, req) },
			list:   func(w http.ResponseWriter, r *http.Request, req request) { s.serveList(c, w, r, req) },
			writes: writes,
		}
	}
	return []*resource{res(v1.SchemeGroupVersion, core), res(eventsv1.SchemeGroupVersion, newer)}
}

// eventCollection serves the store's events in the form as makes of a
// core/v1 Event, with its field selectors and list type.
func (s *Server) eventCollection(as func(*v1.Event) runtime.Object, fieldsOf func(runtime.Object) fields.Set,
	list func([]runtime.Object, string) runtime.Object) *collection {
	return &collection{
		resource: v1.Resource("events"),
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			recorded, rev := s.cfg.Store.EventsAt()
			out := []runtime.Object{}
			for _, e := range status.CoreEvents(recorded, s.cfg.NodeName) {
				if ns == "" || e.Namespace == ns {
					out = append(out, as(&e))
				}
			}
			return out, rev
		},
		since: func(rev uint64) ([]change, error) {
			changes, err := s.cfg.Store.EventsSince(rev)
			if err != nil {
				return nil, err
			}
			out := make([]change, len(changes))
			for i := range changes {
				e := status.CoreEvent(&changes[i].Event, s.cfg.NodeName)
				out[i] = change{typ: watchType(changes[i].Type), obj: as(&e), rev: changes[i].Event.Rev}
			}
			return out, nil
		},
		fields: fieldsOf,
		table:  tableForm{columns: eventColumns(), cells: eventCells},
		empty:  func() runtime.Object { return &v1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}} },
		list:   list,
	}
}

// newEvent is e as events.k8s.io/v1 serves it: the apiserver's conversion
// of an Event the kubelet made with the core API.
func newEvent(e *v1.Event) *eventsv1.Event {
	return &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               e.ObjectMeta,
		EventTime:                e.EventTime,
		ReportingController:      e.ReportingController,
		ReportingInstance:        e.ReportingInstance,
		Action:                   e.Action,
		Reason:                   e.Reason,
		Regarding:                e.InvolvedObject,
		Note:                     e.Message,
		Type:                     e.Type,
		DeprecatedSource:         e.Source,
		DeprecatedFirstTimestamp: e.FirstTimestamp,
		DeprecatedLastTimestamp:  e.LastTimestamp,
		DeprecatedCount:          e.Count,
	}
}

// coreOf is the core/v1 form of an events.k8s.io/v1 Event of newEvent.
func coreOf(e *eventsv1.Event) *v1.Event {
	return &v1.Event{
		ObjectMeta: e.ObjectMeta, InvolvedObject: e.Regarding, Reason: e.Reason, Message: e.Note,
		Source: e.DeprecatedSource, FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp,
		Count: e.DeprecatedCount, Type: e.Type, EventTime: e.EventTime, Action: e.Action,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
	}
}

// coreEventFields are the fields of a core/v1 Event a field selector may
// name, the apiserver's.
func coreEventFields(obj runtime.Object) fields.Set {
	e := obj.(*v1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// newEventFields are the fields of an events.k8s.io/v1 Event a field
// selector may name: the apiserver maps these onto the core ones.
func newEventFields(obj runtime.Object) fields.Set {
	e := obj.(*eventsv1.Event)
	return fields.Set{
		"regarding.kind":            e.Regarding.Kind,
		"regarding.namespace":       e.Regarding.Namespace,
		"regarding.name":            e.Regarding.Name,
		"regarding.uid":             string(e.Regarding.UID),
		"regarding.apiVersion":      e.Regarding.APIVersion,
		"regarding.resourceVersion": e.Regarding.ResourceVersion,
		"regarding.fieldPath":       e.Regarding.FieldPath,
		"reason":                    e.Reason,
		"reportingController":       e.ReportingController,
		"type":                      e.Type,
	}
}

func coreEventList(items []runtime.Object, rev string) runtime.Object {
	list := &v1.EventList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Event{}}
	list.APIVersion, list.Kind = "v1", "EventList"
	for _, obj := range items {
		list.Items = append(list.Items, *obj.(*v1.Event))
	}
	return list
}

func newEventList(items []runtime.Object, rev string) runtime.Object {
	list := &eventsv1.EventList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []eventsv1.Event{}}
	list.APIVersion, list.Kind = "events.k8s.io/v1", "EventList"
	for _, obj := range items {
		list.Items = append(list.Items, *obj.(*eventsv1.Event))
	}
	return list
}

// eventColumns are the columns of the events table, the apiserver's.
func eventColumns() []metav1.TableColumnDefinition {
	doc := v1.Event{}.SwaggerDoc()
	name := stringColumn("Name", metav1.ObjectMeta{}.SwaggerDoc()["name"], 1)
	name.Format = "name"
	return []metav1.TableColumnDefinition{
		stringColumn("Last Seen", doc["lastTimestamp"], 0),
		stringColumn("Type", doc["type"], 0),
		stringColumn("Reason", doc["reason"], 0),
		stringColumn("Object", doc["involvedObject"], 0),
		stringColumn("Subobject", v1.ObjectReference{}.SwaggerDoc()["fieldPath"], 1),
		stringColumn("Source", doc["source"], 1),
		stringColumn("Message", doc["message"], 0),
		stringColumn("First Seen", doc["firstTimestamp"], 1),
		stringColumn("Count", doc["count"], 1),
		name,
	}
}

// eventCells are an event's row in the events table, as the apiserver
// prints it (wide, the client hiding the wide columns).
func eventCells(obj runtime.Object, now time.Time) []any {
	e, ok := obj.(*v1.Event)
	if !ok {
		e = coreOf(obj.(*eventsv1.Event))
	}
	first := printers.Age(e.FirstTimestamp.Time, now)
	if e.FirstTimestamp.IsZero() {
		first = printers.Age(e.EventTime.Time, now)
	}
	last := printers.Age(e.LastTimestamp.Time, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if count == 0 {
		count = 1
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if host := cmpOr(e.Source.Host, e.ReportingInstance); host != "" {
		source += ", " + host
	}
	return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source,
		strings.TrimSpace(e.Message), first, int64(count), e.Name}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
