package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
)

// urgentWrites marks the request's context urgent for the handler; other
// routes' contexts stay ordinary.
func TestUrgentWritesMarksTheRequest(t *testing.T) {
	e := echo.New()
	seen := map[string]bool{}
	h := func(c echo.Context) error {
		seen[c.Path()] = store.IsUrgent(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	}
	e.POST("/v1/heartbeat/:node", h, urgentWrites)
	e.GET("/v1/nodes", h)
	for _, r := range []*http.Request{httptest.NewRequest(http.MethodPost, "/v1/heartbeat/n1", nil), httptest.NewRequest(http.MethodGet, "/v1/nodes", nil)} {
		e.ServeHTTP(httptest.NewRecorder(), r)
	}
	if !seen["/v1/heartbeat/:node"] || seen["/v1/nodes"] {
		t.Errorf("urgent by route %v; want the heartbeat's only", seen)
	}
	if len(seen) != 2 {
		t.Fatalf("handler ran for %d routes; want 2", len(seen))
	}
}
