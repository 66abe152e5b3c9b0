package api

import (
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
)

// urgentWrites marks a route's store writes urgent (store.Urgent): an
// agent's lookup and heartbeat are what its next command waits on, so on
// SQLite they go before queued writes that can wait.
func urgentWrites(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(store.Urgent(r.Context())))
		return next(c)
	}
}
