package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestFaultString(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error_message": "{\"faultstring\": \"Node nope could not be found.\", \"faultcode\": \"Client\", \"debuginfo\": null}"}`, "Node nope could not be found."},
		{`{"error_message": "{\"code\": 404, \"title\": \"Not Found\", \"description\": \"The resource could not be found.\"}"}`, "The resource could not be found."},
		{`{"error_message": "{\"code\": 405, \"title\": \"Method Not Allowed\"}"}`, "Method Not Allowed"},
		{`{"error_message": {"faultstring": "as an object"}}`, "as an object"},
		{"<html>bad gateway</html>\n", "<html>bad gateway</html>"},
		{``, ``},
	} {
		if got := faultString([]byte(tc.body)); got != tc.want {
			t.Errorf("faultString(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func FuzzFaultString(f *testing.F) {
	f.Add([]byte(`{"error_message": "{\"faultstring\": \"x\"}"}`))
	f.Add([]byte(`{"error_message": 1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) { _ = faultString(b) })
}

func TestNewNormalizesEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:6385": "http://h:6385", "http://h:6385/": "http://h:6385", "http://h:6385/v1": "http://h:6385",
		"http://h:6385/v1/": "http://h:6385", " https://h/kiln/v1/ ": "https://h/kiln",
	} {
		c, err := New(in, Options{})
		if err != nil || c.Endpoint() != want {
			t.Errorf("New(%q) = %v, %v; want %s", in, c, err, want)
		}
	}
	for _, bad := range []string{"", "h:6385", "://x"} {
		if _, err := New(bad, Options{}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// The stream parser reads multi-line data, comments, "lost" notices, and
// reports a stream that ends.
func TestEventsParsing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "pw" {
			t.Errorf("basic auth = %q %q %v", u, p, ok)
		}
		if got := r.URL.Query()["node"]; fmt.Sprint(got) != "[a b]" {
			t.Errorf("node filter = %v", got)
		}
		fmt.Fprint(w, ": hello\n\nevent: node\ndata: {\"uuid\":\"u1\",\ndata: \"provision_state\":\"active\"}\n\nevent: lost\ndata: {\"dropped\": 3}\n\n")
	}))
	defer srv.Close()
	c, _ := New(srv.URL, Options{Username: "admin", Password: "pw"})
	var got []string
	err := c.Events(context.Background(), []string{"a", "b"}, func(m StreamMessage) error {
		got = append(got, fmt.Sprintf("%s:%s:%s:%d", m.Kind, m.Event.UUID, m.Event.ProvisionState, m.Dropped))
		return nil
	})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("end of stream: %v, want an error", err)
	}
	if fmt.Sprint(got) != "[node:u1:active:0 lost:::3]" {
		t.Errorf("messages: %v", got)
	}
}
