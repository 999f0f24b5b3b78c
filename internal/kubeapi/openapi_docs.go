package kubeapi

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/staticlet/staticlet/internal/kubeapi/openapi"
)

// openAPIMediaTypes are the media types the operations answer in.
var openAPIMediaTypes = []string{mediaJSON, mediaYAML, mediaProtobuf}

// openAPIInfo is the documents' info: the Kubernetes API and the version
// of it staticlet implements, as the apiserver titles them.
func openAPIInfo() *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{
		Title:   "Kubernetes",
		Version: "v" + kubeMajor + "." + kubeMinor + "." + kubePatch,
	}}
}

// generatedDefinitions are the names of the generated definitions.
func generatedDefinitions() map[string]bool {
	defs := openapi.GetOpenAPIDefinitions(func(string) spec.Ref { return spec.Ref{} })
	names := make(map[string]bool, len(defs))
	for name := range defs {
		names[name] = true
	}
	return names
}

// definitionNames are the definitions ops refer to, each once, in order.
func definitionNames(ops []operation) []string {
	var names []string
	for _, op := range ops {
		for _, n := range []string{op.body, op.response} {
			if n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// openAPIV2 builds the OpenAPI v2 document of every group version.
func (s *Server) openAPIV2() (*spec.Swagger, error) {
	defined := generatedDefinitions()
	var ops []operation
	for _, gv := range s.groupVersions() {
		gvOps, err := s.operations(gv, defined)
		if err != nil {
			return nil, fmt.Errorf("building the OpenAPI v2 document of %s: %w", gv, err)
		}
		ops = append(ops, gvOps...)
	}
	sw, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		Info:              openAPIInfo(),
		GetDefinitions:    openapi.GetOpenAPIDefinitions,
		GetDefinitionName: newDefinitionNamer(s.codecs.scheme).name,
	}, definitionNames(ops)...)
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI v2 definitions: %w", err)
	}
	for _, op := range ops {
		item := sw.Paths.Paths[op.path]
		setV2Operation(&item, op)
		sw.Paths.Paths[op.path] = item
	}
	return sw, nil
}

// setV2Operation adds op to the path item.
func setV2Operation(item *spec.PathItem, op operation) {
	o := &spec.Operation{
		OperationProps: spec.OperationProps{
			Description: op.description,
			ID:          op.id,
			Tags:        []string{openAPITag(op.gv)},
			Produces:    openAPIMediaTypes,
			Schemes:     []string{"https"},
			Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
				200: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: v2Ref(op.response)}},
				401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
			}}},
		},
		VendorExtensible: operationExtensions(op),
	}
	if op.body != "" {
		o.Consumes = openAPIMediaTypes
		o.Parameters = append(o.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
			Name: "body", In: "body", Required: true, Schema: v2Ref(op.body),
		}})
	}
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, spec.Parameter{
			ParamProps:   spec.ParamProps{Name: p.name, In: p.in, Description: p.description, Required: p.in == "path"},
			SimpleSchema: spec.SimpleSchema{Type: p.typ},
			// The apiserver marks its parameters so; clients that read
			// parameters (none of kubectl's) expect it.
			CommonValidations: spec.CommonValidations{UniqueItems: true},
		})
	}
	methods := map[string]**spec.Operation{"get": &item.Get, "post": &item.Post, "put": &item.Put, "patch": &item.Patch, "delete": &item.Delete}
	*methods[op.method] = o
}

func v2Ref(name string) *spec.Schema {
	if name == "" {
		return nil
	}
	return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + common.EscapeJsonPointer(name))}}
}

// operationExtensions are the apiserver's extensions of op.
func operationExtensions(op operation) spec.VendorExtensible {
	return spec.VendorExtensible{Extensions: spec.Extensions{
		extensionAction: op.action,
		extensionGVK:    map[string]any{"group": op.gv.Group, "version": op.gv.Version, "kind": op.kind},
	}}
}

// openAPIV3 builds the OpenAPI v3 document of gv.
func (s *Server) openAPIV3(gv schema.GroupVersion) (*spec3.OpenAPI, error) {
	ops, err := s.operations(gv, generatedDefinitions())
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI v3 document of %s: %w", gv, err)
	}
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
		Info:              openAPIInfo(),
		GetDefinitions:    openapi.GetOpenAPIDefinitions,
		GetDefinitionName: newDefinitionNamer(s.codecs.scheme).name,
	}, definitionNames(ops)...)
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI v3 schemas of %s: %w", gv, err)
	}
	doc := &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       openAPIInfo(),
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
		Components: &spec3.Components{Schemas: schemas},
	}
	for _, op := range ops {
		item := doc.Paths.Paths[op.path]
		if item == nil {
			item = &spec3.Path{}
			doc.Paths.Paths[op.path] = item
		}
		setV3Operation(item, op)
	}
	return doc, nil
}

// setV3Operation adds op to the path item.
func setV3Operation(item *spec3.Path, op operation) {
	o := &spec3.Operation{
		OperationProps: spec3.OperationProps{
			Description: op.description,
			OperationId: op.id,
			Tags:        []string{openAPITag(op.gv)},
			Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
				200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: v3Content(op.response)}},
				401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
			}}},
		},
		VendorExtensible: operationExtensions(op),
	}
	if op.body != "" {
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Required: true, Content: v3Content(op.body)}}
	}
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
			Name: p.name, In: p.in, Description: p.description, Required: p.in == "path",
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{p.typ}, UniqueItems: true}},
		}})
	}
	methods := map[string]**spec3.Operation{"get": &item.Get, "post": &item.Post, "put": &item.Put, "patch": &item.Patch, "delete": &item.Delete}
	*methods[op.method] = o
}

// v3Content is a body of the named definition in each media type; nil
// for none.
func v3Content(name string) map[string]*spec3.MediaType {
	if name == "" {
		return nil
	}
	ref := &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(name))}}
	content := map[string]*spec3.MediaType{}
	for _, mt := range openAPIMediaTypes {
		content[mt] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: ref}}
	}
	return content
}
