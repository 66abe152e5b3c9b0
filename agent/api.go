package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/proto"
	"github.com/labstack/echo/v4"
)

const agentMediaType = "application/vnd.openstack.ironic-python-agent.v1+json"

// Handler returns the command API (IPA's :9999 API).
func (a *Agent) Handler() http.Handler { return a.handler() }

func (a *Agent) handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		code := http.StatusInternalServerError
		msg := err.Error()
		var he *echo.HTTPError
		var re *RESTError
		switch {
		case errors.As(err, &re):
			code, msg = re.Status, re.Error()
		case errors.As(err, &he):
			code = he.Code
			if s, ok := he.Message.(string); ok {
				msg = s
			}
		}
		fc := "Client"
		if code >= 500 {
			fc = "Server"
			a.log.Error("command API internal error", "err", err)
		}
		if !c.Response().Committed {
			_ = c.JSON(code, proto.AgentFault{Faultcode: fc, Faultstring: msg})
		}
	}
	e.GET("/", a.apiRoot)
	e.GET("/v1", a.apiV1)
	e.GET("/v1/", a.apiV1)
	for _, p := range []string{"/v1", ""} {
		e.GET(p+"/status", a.apiStatus)
		e.GET(p+"/commands", a.apiListCommands)
		e.GET(p+"/commands/", a.apiListCommands)
		e.GET(p+"/commands/:id", a.apiGetCommand)
		e.POST(p+"/commands", a.apiRunCommand)
		e.POST(p+"/commands/", a.apiRunCommand)
	}
	return e
}

func link(c echo.Context, rel, resource string, bookmark bool) proto.AgentLink {
	root := c.Scheme() + "://" + c.Request().Host
	if rel == "describedby" {
		return proto.AgentLink{Href: "https://docs.openstack.org/ironic-python-agent", Rel: rel, Type: "text/html"}
	}
	if bookmark || rel == "bookmark" {
		return proto.AgentLink{Href: root + "/" + resource, Rel: rel}
	}
	return proto.AgentLink{Href: root + "/v1/" + resource, Rel: rel}
}

func v1Doc(c echo.Context) proto.AgentAPIVersion {
	return proto.AgentAPIVersion{ID: "v1", Links: []proto.AgentLink{link(c, "self", "v1", true), link(c, "describedby", "", true)}}
}

func (a *Agent) apiRoot(c echo.Context) error {
	return c.JSON(http.StatusOK, proto.AgentRoot{
		Name:           "OpenStack Ironic Python Agent API",
		Description:    "Ironic Python Agent is a provisioning agent for OpenStack Ironic (kiln-agent)",
		Versions:       []proto.AgentAPIVersion{v1Doc(c)},
		DefaultVersion: v1Doc(c),
	})
}

func (a *Agent) apiV1(c echo.Context) error {
	v := v1Doc(c)
	return c.JSON(http.StatusOK, proto.AgentV1{
		ID: v.ID, Links: v.Links,
		Commands:   []proto.AgentLink{link(c, "self", "commands", false), link(c, "bookmark", "commands", false)},
		Status:     []proto.AgentLink{link(c, "self", "status", false), link(c, "bookmark", "status", false)},
		MediaTypes: []proto.AgentMediaType{{Base: "application/json", Type: agentMediaType}},
	})
}

func (a *Agent) apiStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, proto.AgentStatus{
		StartedAt: float64(a.started.UnixNano()) / 1e9,
		Version:   Version,
	})
}

// maxCommandBody bounds a command request; a config drive (≤ 64 MiB in
// Ironic) travels base64-encoded inside prepare_image's params.
const maxCommandBody = 96 << 20

var errTokenInvalid = &RESTError{Status: http.StatusUnauthorized, Message: "Token invalid."}

// checkToken guards POST /v1/commands/: a valid agent_token, always.
func (a *Agent) checkToken(c echo.Context) error {
	if !a.validToken(c.QueryParam("agent_token")) {
		return errTokenInvalid
	}
	return nil
}

// checkReadToken guards the command status reads as IPA does: Ironic up to
// 2024.1 polls GET /v1/commands/ without agent_token, so a token-less read is
// allowed until a read carrying the valid token has been seen; from then on
// every read must carry it. A read with a wrong token is always refused and,
// unlike IPA, does not lock token-less reads out, so that a stranger cannot
// stop an older conductor from polling.
func (a *Agent) checkReadToken(c echo.Context) error {
	tok := c.QueryParam("agent_token")
	if tok == "" {
		a.mu.Lock()
		locked := a.tokenReads
		a.mu.Unlock()
		if locked {
			return errTokenInvalid
		}
		return nil
	}
	if !a.validToken(tok) {
		return errTokenInvalid
	}
	a.mu.Lock()
	if !a.tokenReads {
		a.tokenReads = true
		a.log.Info("controller reads command status with the agent token; token-less reads now refused")
	}
	a.mu.Unlock()
	return nil
}

func (a *Agent) apiListCommands(c echo.Context) error {
	if err := a.checkReadToken(c); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, proto.CommandList{Commands: a.Commands()})
}

func wantWait(c echo.Context) bool { return strings.EqualFold(c.QueryParam("wait"), "true") }

func (a *Agent) apiGetCommand(c echo.Context) error {
	if err := a.checkReadToken(c); err != nil {
		return err
	}
	cmd := a.command(c.Param("id"))
	if cmd == nil {
		return &RESTError{Status: http.StatusNotFound, Message: "Not found", Details: "Command with id " + c.Param("id") + " not found."}
	}
	if wantWait(c) {
		select {
		case <-cmd.Done():
		case <-c.Request().Context().Done():
			return c.Request().Context().Err()
		}
	}
	return c.JSON(http.StatusOK, cmd.Result())
}

// errTooLarge answers a command body over maxCommandBody.
var errTooLarge = &RESTError{Status: http.StatusRequestEntityTooLarge, Message: "Request Entity Too Large",
	Details: fmt.Sprintf("a command request may not exceed %d MiB", maxCommandBody>>20)}

// apiRunCommand checks the token before it reads a byte of the body, then
// refuses an over-large body with 413 without reading past the limit.
func (a *Agent) apiRunCommand(c echo.Context) error {
	if err := a.checkToken(c); err != nil {
		return err
	}
	if c.Request().ContentLength > maxCommandBody {
		return errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, maxCommandBody+1))
	if err != nil {
		return &RESTError{Status: http.StatusBadRequest, Message: "Missing or invalid name or params", Details: err.Error()}
	}
	if len(b) > maxCommandBody {
		return errTooLarge
	}
	var req proto.CommandRequest
	if err := json.Unmarshal(b, &req); err != nil || req.Name == "" || len(req.Params) == 0 || req.Params[0] != '{' {
		return &RESTError{Status: http.StatusBadRequest, Message: "Missing or invalid name or params"}
	}
	cmd, err := a.Execute(req.Name, req.Params)
	if err != nil {
		return err
	}
	if wantWait(c) {
		select {
		case <-cmd.Done():
		case <-c.Request().Context().Done():
			return c.Request().Context().Err()
		}
	}
	return c.JSON(http.StatusOK, cmd.Result())
}
