// Package openapi holds the OpenAPI definitions of the Kubernetes types the
// API serves: GetOpenAPIDefinitions, generated into zz_generated.openapi.go
// by openapi-gen (k8s.io/kube-openapi, a tool in go.mod) from the packages
// named on the go:generate line below, as the apiserver's are generated
// from k8s.io/api. It has no code of its own and nothing to run; kubeapi
// builds its /openapi/v2 and /openapi/v3 documents from it.
//
// Run `make generate` after adding a package the API serves types of, or
// after moving the k8s.io modules to another version: the package's test
// fails while the file differs from what the generator writes.
package openapi

//go:generate go tool openapi-gen --output-dir . --output-pkg github.com/staticlet/staticlet/internal/kubeapi/openapi --output-file zz_generated.openapi.go --report-filename /dev/null k8s.io/api/coordination/v1 k8s.io/api/core/v1 k8s.io/api/events/v1 k8s.io/api/authorization/v1 k8s.io/api/authentication/v1 k8s.io/metrics/pkg/apis/metrics/v1beta1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/version
