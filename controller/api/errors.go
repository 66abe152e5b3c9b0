package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/proto"
)

// Error is an API failure with the status code Ironic would answer and the
// message clients show to operators.
type Error struct {
	Code int
	Msg  string
	// bare selects the WSGI-framework shape Ironic uses before its own code
	// runs (unknown paths, unparseable microversions): {"code","title","description"}.
	bare bool
	// locked marks a 409 for a node a conductor holds: worth waiting out
	// (see updateUnlocked).
	locked bool
}

func (e *Error) Error() string { return e.Msg }

func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, format, args...)
}
func notFound(format string, args ...any) *Error { return errorf(http.StatusNotFound, format, args...) }
func conflict(format string, args ...any) *Error { return errorf(http.StatusConflict, format, args...) }

// notAcceptable is Ironic's answer to a field or verb newer than the request's microversion.
func notAcceptable() *Error { return errorf(http.StatusNotAcceptable, "Request not acceptable.") }

// errorBody renders an error the way Ironic does: the inner document is itself
// JSON, carried as a string in error_message.
func errorBody(e *Error) proto.ErrorBody {
	var inner []byte
	if e.bare {
		inner, _ = json.Marshal(map[string]any{"code": e.Code, "title": http.StatusText(e.Code), "description": e.Msg})
	} else {
		fault := "Client"
		if e.Code >= 500 {
			fault = "Server"
		}
		inner, _ = json.Marshal(proto.Error{FaultString: e.Msg, FaultCode: fault})
	}
	return proto.ErrorBody{ErrorMessage: string(inner)}
}

// handleError is echo's error handler: every failure leaves as an Ironic error body.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var e *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &he):
		e = &Error{Code: he.Code, bare: true}
		if he.Code == http.StatusMethodNotAllowed {
			e.Msg = "The method specified is not allowed for this resource."
		}
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nobody is left to answer.
		s.log.Debug("request abandoned by client", "path", c.Request().URL.Path)
		return
	default:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		e = &Error{Code: http.StatusInternalServerError, Msg: "Internal error: " + err.Error()}
	}
	e = scrubbedError(e)
	if e.Code >= 500 {
		s.log.Error("server error", "path", c.Request().URL.Path, "err", e.Msg)
	} else {
		s.log.Debug("client error", "path", c.Request().URL.Path, "code", e.Code, "err", e.Msg)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(e.Code)
		return
	}
	if err := c.JSON(e.Code, errorBody(e)); err != nil {
		s.log.Warn("write error response", "err", err)
	}
}

// asErr is errors.As, named to keep call sites short.
func asErr(err error, target any) bool { return errors.As(err, target) }
