package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// requestAt is an echo context for a GET of target at microversion 1.minor.
func requestAt(target string, minor int) echo.Context {
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, target, nil), httptest.NewRecorder())
	c.Set(ctxMinor, minor)
	return c
}

// TestResourceListQuery: a described resource's filters become store
// filters only from their microversion, after their check.
func TestResourceListQuery(t *testing.T) {
	r := resource[proto.Chassis]{filters: map[string]filter{
		"owner": {store: "owner", minVersion: 50},
		"size": {store: "size_col", check: func(s string) (string, error) {
			if s != "big" && s != "small" {
				return "", badRequest("Invalid size %s", s)
			}
			return strings.ToUpper(s), nil
		}},
	}}
	for _, c := range []struct {
		query string
		minor int
		want  map[string]string
		code  int
	}{
		{"", 95, nil, 0},
		{"owner=me", 95, map[string]string{"owner": "me"}, 0},
		{"owner=me", 49, nil, http.StatusNotAcceptable},
		{"size=big", 1, map[string]string{"size_col": "BIG"}, 0},
		{"size=huge", 95, nil, http.StatusBadRequest},
		{"owner=me&size=small&other=x", 50, map[string]string{"owner": "me", "size_col": "SMALL"}, 0},
	} {
		t.Run(fmt.Sprintf("%s@1.%d", c.query, c.minor), func(t *testing.T) {
			got, err := r.listQuery(requestAt("/v1/x?"+c.query, c.minor))
			var apiErr *Error
			switch {
			case c.code != 0 && (!errors.As(err, &apiErr) || apiErr.Code != c.code):
				t.Fatalf("error %v, want a %d", err, c.code)
			case c.code == 0 && err != nil:
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("filters %v, want %v", got, c.want)
			}
		})
	}
}

// TestResourceIdent: only a canonical UUID names an object; anything
// else is a 400 naming what was received.
func TestResourceIdent(t *testing.T) {
	var r resource[proto.Chassis]
	for _, c := range []struct{ in, want string }{
		{"1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"},
		{"1BE26C0B-03F2-4D2E-AE87-C02D7F33C123", "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"},
		{"1be26c0b03f24d2eae87c02d7f33c123", ""},
		{"rack1", ""},
		{"urn:uuid:1be26c0b-03f2-4d2e-ae87-c02d7f33c123", ""},
	} {
		ctx := requestAt("/", 95)
		ctx.SetParamNames("id")
		ctx.SetParamValues(c.in)
		got, err := r.ident(ctx)
		if c.want == "" {
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || !strings.Contains(apiErr.Msg, c.in) {
				t.Errorf("ident(%q) = %q, %v; want a 400 naming it", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ident(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestResourceMountGates: a collection newer than the request is a 404,
// and one whose store could not be built answers 503 saying why, while
// the rest of the router works.
func TestResourceMountGates(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = (&Server{log: slog.New(slog.DiscardHandler)}).handleError
	r := chassisAPI
	r.name, r.sinceVersion = "widgets", 60
	r.mount(e, nil, errors.New("no SQL store"))
	e.GET("/ok", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	for _, c := range []struct {
		minor int
		path  string
		code  int
		msg   string
	}{
		{59, "/v1/widgets", http.StatusNotFound, "could not be found"},
		{60, "/v1/widgets", http.StatusServiceUnavailable, "widgets are not available: no SQL store"},
		{95, "/v1/widgets/detail", http.StatusServiceUnavailable, "no SQL store"},
		{95, "/ok", http.StatusNoContent, ""},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		ctx := e.NewContext(req, rec)
		ctx.Set(ctxMinor, c.minor)
		e.Router().Find(http.MethodGet, c.path, ctx)
		if err := ctx.Handler()(ctx); err != nil {
			e.HTTPErrorHandler(err, ctx)
		}
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.msg) {
			t.Errorf("GET %s at 1.%d: %d %s, want %d with %q", c.path, c.minor, rec.Code, rec.Body, c.code, c.msg)
		}
	}
}

// TestResourceFieldGating mounts a resource whose description field is
// newer (1.60) than its collection and checks the generic handlers: the
// field is hidden below 1.60 in every answer, and sending it (create,
// patch, fields=) below 1.60 is a 406 that changes nothing.
func TestResourceFieldGating(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Config{Store: st, Conductor: "c1"})
	r := chassisAPI
	r.name = "gated"
	r.minVersion = map[string]int{"description": 60}
	rs, err := store.NewResources(st, store.ChassisResource)
	r.mount(s.echo, rs, err)
	srv := httptest.NewServer(s)
	defer srv.Close()
	do := func(method, path, version, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := do("POST", "/v1/gated", "1.59", `{"description":"x"}`); code != http.StatusNotAcceptable {
		t.Fatalf("create with a newer field: %d %s", code, b)
	}
	code, b := do("POST", "/v1/gated", "1.60", `{"uuid":"1be26c0b-03f2-4d2e-ae87-c02d7f33c123","description":"x"}`)
	if code != http.StatusCreated || !strings.Contains(b, `"description":"x"`) {
		t.Fatalf("create at 1.60: %d %s", code, b)
	}
	id := "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"GET", "/v1/gated/" + id, "", http.StatusOK},
		{"GET", "/v1/gated", "", http.StatusOK},
		{"GET", "/v1/gated/detail", "", http.StatusOK},
		{"GET", "/v1/gated?fields=description", "", http.StatusNotAcceptable},
		{"PATCH", "/v1/gated/" + id, `[{"op":"replace","path":"/description","value":"y"}]`, http.StatusNotAcceptable},
		{"PATCH", "/v1/gated/" + id, `[{"op":"add","path":"/extra/k","value":"v"}]`, http.StatusOK},
	} {
		code, b := do(c.method, c.path, "1.59", c.body)
		if code != c.code {
			t.Errorf("%s %s at 1.59: %d, want %d: %s", c.method, c.path, code, c.code, b)
		}
		if strings.Contains(b, "description") && code < 300 {
			t.Errorf("%s %s at 1.59 shows the newer field: %s", c.method, c.path, b)
		}
	}
	if _, b := do("GET", "/v1/gated/"+id, "1.60", ""); !strings.Contains(b, `"description":"x"`) || !strings.Contains(b, `"k":"v"`) {
		t.Errorf("at 1.60 after the refused patch: %s", b)
	}
}
