package pod

import (
	"strings"
	"testing"
)

// validateCase is one manifest given to Decode and what validation must
// say of it.
type validateCase struct {
	name string
	// rule names the apiserver check the case mirrors (the function of
	// k8s.io/kubernetes pkg/apis/core/validation and what it enforces), or
	// the kubelet's, or says that the rule is staticlet's own.
	rule     string
	manifest string
	wantErr  []string // substrings of the error, each with its field path; none means valid
}

// runValidateCases decodes each case's manifest and checks the outcome.
func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("test.yaml", []byte(tc.manifest), testOpts)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode(%q) (%s): %v", tc.manifest, tc.rule, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode(%q) succeeded, want an error (%s)", tc.manifest, tc.rule)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Decode error =\n%v\nwant it to contain %q (%s)", err, want, tc.rule)
				}
			}
		})
	}
}
