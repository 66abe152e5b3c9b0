package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// apiRefJSON is one of Ironic's API-reference samples, decoded.
func apiRefJSON(t *testing.T, name string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, name)), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// shapeCase is a GET path and the API-reference sample its answer must
// have the shape of.
type shapeCase struct{ path, sample string }

// getShapes GETs each case's path at version, wants 200, and compares the
// answer's shape with the case's sample.
func getShapes(t *testing.T, srv *httptest.Server, version string, cases []shapeCase) {
	t.Helper()
	for _, c := range cases {
		code, got := call(t, srv, "GET", c.path, version, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", c.path, code, got)
		}
		sameShape(t, c.path, apiRefJSON(t, c.sample), got)
	}
}
