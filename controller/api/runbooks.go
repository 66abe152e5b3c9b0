package api

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// runbooksAPI is /v1/runbooks (1.92): named steps that manual cleaning or
// servicing runs on nodes whose traits include the runbook's name.
var runbooksAPI = resource[proto.Runbook]{
	kind:         "Runbook",
	name:         "runbooks",
	sinceVersion: 92,
	minVersion:   proto.RunbookFieldMinVersion,
	tooOld:       "The API version does not allow runbooks",
	byName:       "name",
	listFields:   []string{"uuid", "name", "links"},
	createFields: []string{"name", "steps", "disable_ramdisk", "extra", "public", "owner", "uuid", "description"},
	required:     []string{"name", "steps"},
	patchable:    []string{"description", "disable_ramdisk", "extra", "name", "owner", "public", "steps"},
	mandatory:    []string{"name", "steps"},
	secret:       []string{"steps"},
	fresh:        func() proto.Runbook { return proto.Runbook{Extra: proto.Dict{}, Traits: []string{}} },
	validate: func(ctx context.Context, r *proto.Runbook) error {
		if r.Extra == nil {
			r.Extra = proto.Dict{}
		}
		if err := checkRunbookName(minorOf(ctx), r.Name); err != nil {
			return err
		}
		if err := checkLen("runbook", "description", r.Description, maxRunbookDescriptionLen); err != nil {
			return err
		}
		if err := checkLen("runbook", "owner", r.Owner, 255); err != nil {
			return err
		}
		if r.Public && r.Owner != nil {
			return badRequest("There cannot be an owner for a public runbook")
		}
		ids := make([][2]string, len(r.Steps))
		for i, s := range r.Steps {
			ids[i] = [2]string{s.Interface, s.Step}
		}
		return checkUserSteps("runbook", ids)
	},
	// Making a runbook public drops its owner, as Ironic does when a patch
	// sets public.
	keep: func(from, to *proto.Runbook) {
		to.Traits = from.Traits // changed through …/traits only
		if to.Public && !from.Public && to.Owner != nil && from.Owner != nil && *to.Owner == *from.Owner {
			to.Owner = nil
		}
	},
	mask: func(r *proto.Runbook) proto.Runbook {
		m := *r
		m.Steps = slices.Clone(r.Steps)
		for i := range m.Steps {
			m.Steps[i].Args = secrets.MaskDict(m.Steps[i].Args)
		}
		return m
	},
	links: func(c echo.Context, r *proto.Runbook, _ map[string]bool) {
		r.Links = links(c, "runbooks/"+r.UUID)
		if r.Traits == nil {
			r.Traits = []string{} // a runbook stored before 1.112's traits
		}
	},
	taken: func(err error, r *proto.Runbook) *Error {
		if errors.Is(err, store.ErrRunbookNameTaken) {
			return conflict("A runbook with name %s already exists.", r.Name)
		}
		return nil
	},
}

// provisionRunbook reads the runbook a provision request names (nil when
// it names none), before the node is locked for the request.
func (s *Server) provisionRunbook(c echo.Context, req *proto.ProvisionRequest) (*proto.Runbook, error) {
	if req.Runbook == "" {
		return nil, nil
	}
	rb := s.steps.runbooks
	if rb == nil || rb.store == nil {
		return nil, errorf(http.StatusServiceUnavailable, "runbooks are not available")
	}
	if req.Target != proto.VerbClean && req.Target != proto.VerbService {
		return nil, badRequest("\"runbooks\" is only valid when setting target provision state to any of ['clean', 'service']")
	}
	if req.Target == proto.VerbClean && len(req.CleanSteps) > 0 {
		return nil, badRequest("Please provide either \"clean_steps\" or a runbook, but not both.")
	}
	if req.Target == proto.VerbService && len(req.ServiceSteps) > 0 {
		return nil, badRequest("Please provide either \"service_steps\" or a runbook, but not both.")
	}
	id, err := rb.lookup(c.Request().Context(), req.Runbook)
	if err != nil {
		return nil, rb.failed(err, req.Runbook)
	}
	r, err := rb.store.Get(c.Request().Context(), id)
	if err != nil {
		return nil, rb.failed(err, req.Runbook)
	}
	return r, nil
}

// applyRunbook turns the request's runbook into its clean or service
// steps, in the runbook's order, once the node is known: Ironic runs a
// runbook only on a node that has its name among the node's traits, or
// from 1.112 (byTraits) one of the runbook's traits.
func applyRunbook(n *proto.Node, r *proto.Runbook, req *proto.ProvisionRequest, byTraits bool) error {
	if r == nil {
		return nil
	}
	if err := runbookApproved(n, r, byTraits); err != nil {
		return err
	}
	ordered := slices.Clone(r.Steps)
	slices.SortStableFunc(ordered, func(a, b proto.RunbookStep) int { return a.Order - b.Order })
	steps := make([]proto.Dict, len(ordered))
	for i, s := range ordered {
		args := s.Args
		if args == nil {
			args = proto.Dict{}
		}
		steps[i] = proto.Dict{"interface": s.Interface, "step": s.Step, "args": args}
	}
	if req.Target == proto.VerbClean {
		req.CleanSteps = steps
	} else {
		req.ServiceSteps = steps
	}
	if r.DisableRamdisk {
		yes := true
		req.DisableRamdisk = &yes
	}
	return nil
}
