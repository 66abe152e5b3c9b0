package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/traits"
	"github.com/kilnhq/kiln/proto"
)

// Runbook traits (microversion 1.112): the node traits that approve a
// runbook for a node, replacing 1.92's rule that the runbook's name be one
// of the node's traits; /v1/runbooks/{id}/traits lists, replaces and
// clears them, /v1/runbooks/{id}/traits/{trait} adds or removes one. From
// 1.112 a runbook's name need not be a trait, only a name a URL can carry.

const (
	runbookTraitsSince       = 112
	maxRunbookDescriptionLen = 255
	maxRunbookNameLen        = 255
)

// msgRunbookTraitsPut is Ironic's answer to a PUT that is neither one
// trait without a body nor the whole list in one.
const msgRunbookTraitsPut = "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, " +
	"or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body."

// runbookNameRE is Ironic's runbook name from 1.112: RFC 3986 unreserved
// characters, so that a URL can name the runbook.
var runbookNameRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)

// checkRunbookName checks a runbook's name as Ironic does at microversion
// m: a valid trait below 1.112, a URL-safe name from it.
func checkRunbookName(m int, name string) error {
	if m < runbookTraitsSince {
		return checkTraitName("runbook", name)
	}
	if name == "" || len(name) > maxRunbookNameLen || !runbookNameRE.MatchString(name) {
		return badRequest("Schema error for runbook: '%s' does not match '%s'", name, runbookNameRE.String())
	}
	return nil
}

// runbookApproved is Ironic's check that a runbook may run on node n:
// from 1.112 (byTraits) the node has one of the runbook's traits, which
// must not be empty; before, the node has the runbook's name as a trait.
func runbookApproved(n *proto.Node, r *proto.Runbook, byTraits bool) error {
	if !byTraits {
		if !slices.Contains(n.Traits, r.Name) {
			return badRequest("This runbook has not been approved for use on this node %s. Please ask an administrator to add it to your node traits.", n.UUID)
		}
		return nil
	}
	if len(r.Traits) == 0 {
		return badRequest("Runbook %s has no traits configured. Please ask an administrator to add traits to the runbook.", r.UUID)
	}
	for _, t := range r.Traits {
		if slices.Contains(n.Traits, t) {
			return nil
		}
	}
	quoted := make([]string, len(r.Traits))
	for i, t := range traits.Normalize(r.Traits) {
		quoted[i] = "'" + t + "'"
	}
	return badRequest("This runbook has not been approved for use on this node %s. The node does not have any of the runbook's traits [%s]. Please ask an administrator to add a matching trait to your node.",
		n.UUID, strings.Join(quoted, ", "))
}

func (s *Server) mountRunbookTraits(e *echo.Echo) {
	e.GET("/v1/runbooks/:id/traits", s.runbookTraits(s.listRunbookTraits))
	e.PUT("/v1/runbooks/:id/traits", s.runbookTraits(s.replaceRunbookTraits))
	e.DELETE("/v1/runbooks/:id/traits", s.runbookTraits(s.clearRunbookTraits))
	e.PUT("/v1/runbooks/:id/traits/:trait", s.runbookTraits(s.addRunbookTraits))
	e.DELETE("/v1/runbooks/:id/traits/:trait", s.runbookTraits(s.removeRunbookTrait))
}

// runbookTraits gates a handler: below 1.112 the routes do not exist (404
// as Ironic answers), and the runbook must (404 otherwise).
func (s *Server) runbookTraits(h func(c echo.Context, rb *resource[proto.Runbook], id string) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		if minor(c) < runbookTraitsSince {
			return notFound("The API version does not allow runbook traits")
		}
		rb := s.steps.runbooks
		if rb == nil || rb.store == nil {
			return errorf(http.StatusServiceUnavailable, "runbooks are not available")
		}
		id, err := rb.ident(c)
		if err != nil {
			return err
		}
		if _, err := rb.store.Get(c.Request().Context(), id); err != nil {
			return rb.failed(err, c.Param("id"))
		}
		return h(c, rb, id)
	}
}

func (s *Server) listRunbookTraits(c echo.Context, rb *resource[proto.Runbook], id string) error {
	r, err := rb.store.Get(c.Request().Context(), id)
	if err != nil {
		return rb.failed(err, c.Param("id"))
	}
	return c.JSON(http.StatusOK, map[string][]string{"traits": traits.Normalize(r.Traits)})
}

// setRunbookTraits changes the runbook's traits to what fn makes of
// them, within Ironic's limit of traits.
func setRunbookTraits(c echo.Context, rb *resource[proto.Runbook], id string, fn func(old []string) []string) error {
	_, err := rb.store.Update(c.Request().Context(), id, func(r *proto.Runbook) error {
		ts := traits.Normalize(fn(slices.Clone(r.Traits)))
		if len(ts) > traits.MaxPerNode {
			return badRequest("Could not modify traits for runbook %s as it would exceed the maximum number of traits (%d vs. %d)",
				r.UUID, len(ts), traits.MaxPerNode)
		}
		if ts == nil {
			ts = []string{}
		}
		r.Traits = ts
		return nil
	})
	if err != nil {
		return rb.failed(err, c.Param("id"))
	}
	return nil
}

func (s *Server) replaceRunbookTraits(c echo.Context, rb *resource[proto.Runbook], id string) error {
	ts, err := readTraitsBody(c, msgRunbookTraitsPut)
	if err != nil {
		return err
	}
	if err := setRunbookTraits(c, rb, id, func([]string) []string { return ts }); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) addRunbookTraits(c echo.Context, rb *resource[proto.Runbook], id string) error {
	trait := c.Param("trait")
	if err := checkTraits("trait", []string{trait}); err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return bodyReadError(err)
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && !bytes.Equal(b, []byte("null")) && !bytes.Equal(b, []byte("{}")) {
		return badRequest("No body should be provided when adding a trait")
	}
	if err := setRunbookTraits(c, rb, id, func(old []string) []string { return append(old, trait) }); err != nil {
		return err
	}
	c.Response().Header().Set("Location", fmt.Sprintf("%s/v1/runbooks/%s/traits/%s", baseURL(c), c.Param("id"), trait))
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) clearRunbookTraits(c echo.Context, rb *resource[proto.Runbook], id string) error {
	if err := setRunbookTraits(c, rb, id, func([]string) []string { return nil }); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// removeRunbookTrait removes one trait; one the runbook lacks is no error,
// as in Ironic.
func (s *Server) removeRunbookTrait(c echo.Context, rb *resource[proto.Runbook], id string) error {
	trait := c.Param("trait")
	if len(trait) > 255 {
		return badRequest("Invalid trait: at most 255 characters")
	}
	if err := setRunbookTraits(c, rb, id, func(old []string) []string {
		return slices.DeleteFunc(old, func(t string) bool { return t == trait })
	}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
