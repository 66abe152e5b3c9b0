package api_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
)

// TestIronicEndpointsServedOrListed checks every endpoint of Ironic's API
// reference (testdata/ironic-apiref/endpoints.txt) against Kiln's router:
// each is either served or listed, with why, in docs/api.md's table of
// endpoints Kiln does not serve yet; and nothing listed there is served
// (when an endpoint arrives, its row goes).
func TestIronicEndpointsServedOrListed(t *testing.T) {
	srv := api.New(api.Config{})
	served := map[string]bool{}
	for _, r := range srv.Echo().Routes() {
		served[r.Method+" "+routeShape(r.Path)] = true
	}
	listed := missingInDocs(t)
	f, err := os.Open("testdata/ironic-apiref/endpoints.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	count := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		count++
		method, path, _ := strings.Cut(line, " ")
		shape := routeShape(path)
		methods := []string{method}
		if method == "METHOD" {
			methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
		}
		isServed := true
		for _, m := range methods {
			isServed = isServed && served[m+" "+shape]
		}
		switch {
		case !isServed && !listed[line]:
			t.Errorf("%s: not served and not in docs/api.md's list of endpoints Kiln does not serve", line)
		case isServed && listed[line]:
			t.Errorf("%s: served, but docs/api.md lists it as not served: remove its row", line)
		}
	}
	if count < 100 {
		t.Fatalf("only %d endpoints read from the API reference list", count)
	}
	for l := range listed {
		if !slices.Contains(readLines(t, "testdata/ironic-apiref/endpoints.txt"), l) {
			t.Errorf("docs/api.md lists %q, which is not an endpoint of Ironic's API reference", l)
		}
	}
}

// routeShape reduces a path to its shape: query dropped, every parameter
// segment ({name}, :name, {a}@{b}) one "*", no trailing slash but the
// root's. Ironic's reference names one route in the singular by mistake
// (DELETE /v1/volume/connector/{id}; Ironic serves …/connectors/{id}).
func routeShape(p string) string {
	p, _, _ = strings.Cut(p, "?")
	p = strings.Replace(p, "/v1/volume/connector/", "/v1/volume/connectors/", 1)
	p = strings.Replace(p, "/v1/volume/target/", "/v1/volume/targets/", 1)
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "{") {
			segs[i] = "*"
		}
	}
	p = strings.Join(segs, "/")
	if len(p) > 1 && strings.HasSuffix(p, "/") && p != "/v1/" {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

var missingRow = regexp.MustCompile("^\\| `([A-Z]+ /[^`]*)` \\|")

// missingInDocs reads the endpoints docs/api.md lists as not served.
func missingInDocs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	in := false
	for _, l := range readLines(t, "../../docs/api.md") {
		if strings.HasPrefix(l, "## ") {
			in = strings.HasPrefix(l, "## Ironic endpoints Kiln does not serve yet")
			continue
		}
		if m := missingRow.FindStringSubmatch(l); in && m != nil {
			out[m[1]] = true
		}
	}
	return out
}

func readLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
