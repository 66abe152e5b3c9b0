package store

import (
	"errors"

	"github.com/kilnhq/kiln/proto"
)

// ErrRunbookNameTaken: another runbook has this name.
var ErrRunbookNameTaken = errors.New("a runbook with this name already exists")

// RunbookResource is how runbooks are stored (migration 0025); names are
// unique, provision requests find runbooks by name.
var RunbookResource = Resource[proto.Runbook]{
	Kind:  "runbook",
	Table: "runbooks",
	Meta: func(r *proto.Runbook) (*string, **proto.Time, **proto.Time) {
		return &r.UUID, &r.CreatedAt, &r.UpdatedAt
	},
	Columns: []Column[proto.Runbook]{
		{Name: "name", Value: func(r *proto.Runbook) any { return r.Name }},
		{Name: "owner", Value: func(r *proto.Runbook) any { return nullable(r.Owner) }},
		{Name: "public", Value: func(r *proto.Runbook) any {
			if r.Public {
				return 1
			}
			return 0
		}},
	},
	Sort:    map[string]string{"name": "name"},
	Filters: map[string]string{"name": "name"},
	Unique:  map[string]error{"runbooks_name_key": ErrRunbookNameTaken},
	Bare:    func(r *proto.Runbook) { r.Links = nil },
}
