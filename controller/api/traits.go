package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/traits"
	"github.com/kilnhq/kiln/proto"
)

// Node traits (microversion 1.37): /v1/nodes/{node}/traits lists, replaces
// and clears a node's traits, /v1/nodes/{node}/traits/{trait} adds or removes
// one. Changes take the node as a PATCH does, refused while a conductor
// holds it.

const traitsSince = 37

// msgTraitsPut is Ironic's answer to a PUT that is neither one trait without
// a body nor the whole list in one.
const msgTraitsPut = "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, " +
	"or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body."

func (s *Server) mountTraits(e *echo.Echo) {
	e.GET("/v1/nodes/:node/traits", s.listTraits)
	e.PUT("/v1/nodes/:node/traits", s.replaceTraits)
	e.DELETE("/v1/nodes/:node/traits", s.clearTraits)
	e.PUT("/v1/nodes/:node/traits/:trait", s.addTrait)
	e.DELETE("/v1/nodes/:node/traits/:trait", s.removeTrait)
}

// traitsGate answers requests older than 1.37 as Ironic does: the route
// does not exist for them.
func traitsGate(c echo.Context) error {
	if minor(c) < traitsSince {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	return nil
}

func (s *Server) listTraits(c echo.Context) error {
	if err := traitsGate(c); err != nil {
		return err
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]string{"traits": traits.Normalize(n.Traits)})
}

// setTraits changes the node's traits to what fn makes of them, under the
// node's lock, within Ironic's limit.
func (s *Server) setTraits(c echo.Context, fn func(n *proto.Node) ([]string, error)) (*proto.Node, error) {
	ident := c.Param("node")
	n, err := s.updateUnlocked(c.Request().Context(), ident, func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		ts, err := fn(n)
		if err != nil {
			return err
		}
		ts = traits.Normalize(ts)
		if len(ts) > traits.MaxPerNode {
			return badRequest("Could not modify traits for node %s as it would exceed the maximum number of traits per node (%d vs. %d)",
				n.UUID, len(ts), traits.MaxPerNode)
		}
		n.Traits = ts
		return nil
	})
	if err != nil {
		return nil, s.storeError(err, "Node", ident)
	}
	return n, nil
}

// checkTraits validates each trait as Ironic's schema does, naming the
// parameter that carried it.
func checkTraits(param string, ts []string) error {
	for _, t := range ts {
		if err := traits.Check(t); err != nil {
			return badRequest("Schema error for %s: %s", param, err)
		}
	}
	return nil
}

func (s *Server) replaceTraits(c echo.Context) error {
	if err := traitsGate(c); err != nil {
		return err
	}
	ts, err := readTraitsBody(c, msgTraitsPut)
	if err != nil {
		return err
	}
	if _, err := s.setTraits(c, func(*proto.Node) ([]string, error) { return ts, nil }); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) addTrait(c echo.Context) error {
	if err := traitsGate(c); err != nil {
		return err
	}
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
	if _, err := s.setTraits(c, func(n *proto.Node) ([]string, error) { return append(slices.Clone(n.Traits), trait), nil }); err != nil {
		return err
	}
	c.Response().Header().Set("Location", baseURL(c)+"/v1/nodes/"+c.Param("node")+"/traits/"+trait)
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) clearTraits(c echo.Context) error {
	if err := traitsGate(c); err != nil {
		return err
	}
	if _, err := s.setTraits(c, func(*proto.Node) ([]string, error) { return nil, nil }); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) removeTrait(c echo.Context) error {
	if err := traitsGate(c); err != nil {
		return err
	}
	trait := c.Param("trait")
	_, err := s.setTraits(c, func(n *proto.Node) ([]string, error) {
		i := slices.Index(n.Traits, trait)
		if i < 0 {
			return nil, notFound("Node %s doesn't have a trait '%s'", n.UUID, trait)
		}
		return slices.Delete(slices.Clone(n.Traits), i, i+1), nil
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// readTraitsBody reads a PUT …/traits body, {"traits": [...]}, as Ironic
// checks it for nodes and runbooks alike; missing names the resource's
// message for an empty body or one without "traits".
func readTraitsBody(c echo.Context, missing string) ([]string, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, bodyReadError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("%s", missing)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, badRequest("Invalid JSON in traits request body: expected an object with a list of traits")
	}
	for k := range obj {
		if k != "traits" {
			return nil, badRequest("Schema error for body: Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	raw, ok := obj["traits"]
	if !ok {
		return nil, badRequest("%s", missing)
	}
	var ts []string
	if err := json.Unmarshal(raw, &ts); err != nil {
		return nil, badRequest("Schema error for body: %s is not of type 'array' of strings", string(raw))
	}
	if err := checkTraits("body", ts); err != nil {
		return nil, err
	}
	return ts, nil
}
