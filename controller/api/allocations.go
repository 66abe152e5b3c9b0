package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/allocation"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Allocations (1.52): a client asks for a node by resource class, traits,
// candidate nodes and owner; the conductor that owns the allocation claims
// one (controller/conductor/allocations.go) and the allocation goes from
// allocating to active or error. Backfilling (1.58, "node") records an
// allocation for a node already deployed, at once. Deleting an allocation
// frees its node.

const (
	allocationsSince = 52
	// maxAllocationResourceClassLen is Ironic's schema limit.
	maxAllocationResourceClassLen = 80
	// maxCandidateNodes bounds the nodes one request names (each is looked
	// up); Ironic sets no limit, the body limit aside.
	maxCandidateNodes = 1000
)

const ctxBackfill = "kiln.backfill"

// allocationsAPI describes /v1/allocations for s.
func (s *Server) allocationsAPI() *resource[proto.Allocation] {
	return &resource[proto.Allocation]{
		kind:         "Allocation",
		name:         "allocations",
		minVersion:   proto.AllocationFieldMinVersion,
		sinceVersion: allocationsSince, writesTooOld405: true,
		patchSince:   57,
		createFields: []string{"candidate_nodes", "extra", "name", "node", "owner", "resource_class", "traits", "uuid"},
		patchable:    []string{"extra", "name"},
		byName:       "name",
		filters: map[string]filter{
			"node":           {store: "node_uuid", resolve: s.nodeUUIDFilter},
			"resource_class": {store: "resource_class"},
			"state":          {store: "state"},
			"owner":          {store: "owner", minVersion: 60},
		},
		fresh: func() proto.Allocation {
			return proto.Allocation{Extra: proto.Dict{}, Traits: []string{}, CandidateNodes: []string{}}
		},
		prepare: s.prepareAllocation,
		validate: func(_ context.Context, a *proto.Allocation) error {
			if a.Name != nil && validateName(*a.Name) != nil {
				return badRequest("Cannot update allocation with invalid name '%s'", *a.Name)
			}
			if a.Extra == nil {
				a.Extra = proto.Dict{}
			}
			return nil
		},
		keep: func(from, to *proto.Allocation) {
			name, extra := to.Name, to.Extra
			*to = *from
			to.Name, to.Extra = name, extra
		},
		created:  s.allocationCreated,
		deleting: func(c echo.Context, a *proto.Allocation) error { return s.releaseAllocation(c, a) },
		links: func(c echo.Context, a *proto.Allocation, _ map[string]bool) {
			a.Links = links(c, "allocations/"+a.UUID)
		},
		storeError: func(err error, ident string) *Error {
			switch {
			case errors.Is(err, store.ErrDuplicateAllocationName):
				return conflict("An allocation with this name already exists.")
			case errors.Is(err, store.ErrDuplicateUUID):
				return conflict("An allocation with UUID %s already exists.", ident)
			}
			return nil
		},
	}
}

// nodeUUIDFilter reads a list's ?node= (a node's name or UUID): an unknown
// node is a 400, as Ironic answers.
func (s *Server) nodeUUIDFilter(ctx context.Context, ident string) (string, error) {
	n, err := s.store.GetNode(ctx, ident)
	if errors.Is(err, store.ErrNotFound) {
		return "", badRequest("Node %s could not be found.", ident)
	}
	if err != nil {
		return "", err
	}
	return n.UUID, nil
}

// prepareAllocation checks what POST /v1/allocations asks beyond the
// object's fields and completes it: candidate nodes by UUID, the
// backfilled node, the resource class and UUID it implies.
func (s *Server) prepareAllocation(c echo.Context, obj map[string]json.RawMessage, a *proto.Allocation) error {
	ctx := c.Request().Context()
	a.State, a.NodeUUID, a.LastError = proto.AllocationAllocating, nil, nil
	if a.Extra == nil {
		a.Extra = proto.Dict{}
	}
	if a.Name != nil {
		if validateName(*a.Name) != nil {
			return badRequest("Cannot create allocation with invalid name '%s'", *a.Name)
		}
		if found, err := s.allocations.store.List(ctx, store.Query{Filters: map[string]string{"name": *a.Name}, Limit: 1}); err != nil {
			return err
		} else if len(found) > 0 {
			return conflict("An allocation with name %s already exists.", *a.Name)
		}
	}
	var node *proto.Node
	if raw, ok := obj["node"]; ok && string(raw) != "null" {
		if minor(c) < 58 {
			return badRequest("Cannot set node when creating an allocation in this API version")
		}
		var ident string
		if err := json.Unmarshal(raw, &ident); err != nil {
			return badRequest("Schema error for allocation: %s is not of type 'string', 'null'", string(raw))
		}
		n, err := s.store.GetNode(ctx, ident)
		if errors.Is(err, store.ErrNotFound) {
			return badRequest("Node %s could not be found.", ident)
		} else if err != nil {
			return err
		}
		node = n
		c.Set(ctxBackfill, n.UUID)
	}
	if a.ResourceClass == nil || *a.ResourceClass == "" {
		if node == nil {
			return badRequest("The resource_class field is mandatory when not backfilling")
		}
		a.ResourceClass = node.ResourceClass
	} else if len(*a.ResourceClass) > maxAllocationResourceClassLen {
		return badRequest("Schema error for allocation: '%s' is too long", *a.ResourceClass)
	}
	if a.Traits == nil {
		a.Traits = []string{}
	}
	if err := checkTraits("allocation", a.Traits); err != nil {
		return err
	}
	if a.CandidateNodes == nil {
		a.CandidateNodes = []string{}
	}
	if len(a.CandidateNodes) > maxCandidateNodes {
		return badRequest("Too many candidate nodes: %d, at most %d", len(a.CandidateNodes), maxCandidateNodes)
	}
	var missing []string
	for i, ident := range a.CandidateNodes {
		n, err := s.store.GetNode(ctx, ident)
		if errors.Is(err, store.ErrNotFound) {
			missing = append(missing, ident)
			continue
		} else if err != nil {
			return err
		}
		a.CandidateNodes[i] = n.UUID
	}
	if len(missing) > 0 {
		return badRequest("Nodes cannot be found: %s", joinComma(missing))
	}
	if a.UUID == "" && node != nil && node.InstanceUUID != nil {
		// Backfilling without a UUID: the instance's is the allocation's.
		a.UUID = *node.InstanceUUID
	}
	return nil
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// allocationCreated hands a new allocation to the conductors, or, when it
// backfills a node, records it on the node at once (Ironic does that
// synchronously too): a node that does not fit fails the allocation and
// the request.
func (s *Server) allocationCreated(c echo.Context, a *proto.Allocation) (*proto.Allocation, error) {
	node, _ := c.Get(ctxBackfill).(string)
	if node == "" {
		if s.notifyAllocation != nil {
			s.notifyAllocation(a.UUID)
		}
		return a, nil
	}
	ctx := c.Request().Context()
	req := allocation.RequestOf(a)
	_, err := s.updateUnlocked(ctx, node, func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		return allocation.Backfill(n, req)
	})
	if err != nil {
		var assoc *allocation.AssociatedError
		var apiErr *Error
		var answer *Error
		switch {
		case errors.As(err, &assoc):
			answer = conflict("%s", assoc.Error())
		case errors.As(err, &apiErr):
			answer = apiErr
		case errors.Is(err, store.ErrNotFound):
			answer = badRequest("Node %s could not be found.", node)
		default:
			// Ironic's AllocationFailed reaches the client as a 500.
			answer = errorf(http.StatusInternalServerError, "Failed to process allocation %s: %s.", a.UUID, err)
		}
		msg := answer.Msg
		if _, uerr := s.allocations.store.Update(ctx, a.UUID, func(al *proto.Allocation) error {
			al.State, al.LastError = proto.AllocationError, &msg
			return nil
		}); uerr != nil {
			s.log.Warn("mark a failed backfill", "allocation", a.UUID, "err", uerr)
		}
		return nil, answer
	}
	return s.allocations.store.Update(ctx, a.UUID, func(al *proto.Allocation) error {
		al.State, al.NodeUUID, al.LastError = proto.AllocationActive, &node, nil
		return nil
	})
}

// releaseAllocation frees the node of an allocation about to be deleted,
// under the node's lock, where Ironic allows it (not active, not in a
// transition, unless in maintenance).
func (s *Server) releaseAllocation(c echo.Context, a *proto.Allocation) error {
	if a.NodeUUID == nil {
		return nil
	}
	_, err := s.updateUnlocked(c.Request().Context(), *a.NodeUUID, func(n *proto.Node) error {
		if n.Reservation != nil {
			return nodeLocked(n.UUID, *n.Reservation)
		}
		if n.AllocationUUID == nil || *n.AllocationUUID != a.UUID {
			return nil
		}
		if err := allocation.CheckRelease(n, a.UUID); err != nil {
			return conflict("%s", err.Error())
		}
		allocation.Release(n, a.UUID)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// nodeAllocation serves GET and DELETE /v1/nodes/{node}/allocation.
func (s *Server) nodeAllocation(c echo.Context) error {
	if minor(c) < allocationsSince {
		return notFound("The API version does not allow allocations")
	}
	if s.allocationsErr != nil {
		return errorf(http.StatusServiceUnavailable, "allocations are not available: %v", s.allocationsErr)
	}
	ident := c.Param("node")
	n, err := s.store.GetNode(c.Request().Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		if c.Request().Method == http.MethodGet {
			return badRequest("Node %s could not be found.", ident)
		}
		return notFound("Node %s could not be found.", ident)
	} else if err != nil {
		return err
	}
	r := s.allocations
	found, err := r.store.List(c.Request().Context(), store.Query{Filters: map[string]string{"node_uuid": n.UUID}, Limit: 1})
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return notFound("Allocation for node %s was not found", ident)
	}
	if c.Request().Method == http.MethodDelete {
		if err := r.deleting(c, found[0]); err != nil {
			return r.failed(err, found[0].UUID)
		}
		if err := r.store.Delete(c.Request().Context(), found[0].UUID); err != nil {
			return r.failed(err, found[0].UUID)
		}
		return c.NoContent(http.StatusNoContent)
	}
	fields, err := parseFields(c, r.known, r.minVersion)
	if err != nil {
		return err
	}
	return r.send(c, http.StatusOK, found[0], fields)
}

func (s *Server) mountAllocations(e *echo.Echo) {
	s.allocations = s.allocationsAPI()
	var st *store.Resources[proto.Allocation]
	st, s.allocationsErr = store.NewResources(s.store, store.AllocationResource)
	s.allocations.mount(e, st, s.allocationsErr)
	e.GET("/v1/nodes/:node/allocation", s.nodeAllocation)
	e.DELETE("/v1/nodes/:node/allocation", s.nodeAllocation)
}

// orphanAllocation forgets the node of the allocation that held n, just
// deleted (possible only in maintenance), as Ironic orphans it: the
// allocation stays, with node_uuid null.
func (s *Server) orphanAllocation(ctx context.Context, n *proto.Node) {
	if n.AllocationUUID == nil || s.allocationsErr != nil {
		return
	}
	_, err := s.allocations.store.Update(ctx, *n.AllocationUUID, func(a *proto.Allocation) error {
		if a.NodeUUID != nil && *a.NodeUUID == n.UUID {
			a.NodeUUID = nil
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("orphan the allocation of a deleted node", "node", n.UUID, "allocation", *n.AllocationUUID, "err", err)
	}
}

// forgetAllocation deletes allocation id, which a node update ended (its
// instance_uuid removed), if it still names node.
func (s *Server) forgetAllocation(ctx context.Context, id, node string) {
	if id == "" || s.allocationsErr != nil {
		return
	}
	a, err := s.allocations.store.Get(ctx, id)
	if err == nil && (a.NodeUUID == nil || *a.NodeUUID == node) {
		err = s.allocations.store.Delete(ctx, id)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("delete the allocation of a node whose instance was removed", "node", node, "allocation", id, "err", err)
	}
}
