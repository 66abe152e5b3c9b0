package store

import (
	"errors"

	"github.com/kilnhq/kiln/proto"
)

// ErrTemplateNameTaken: another deploy template has this name.
var ErrTemplateNameTaken = errors.New("a deploy template with this name already exists")

// DeployTemplateResource is how deploy templates are stored (migration
// 0025); names are unique, the conductor finds templates by name.
var DeployTemplateResource = Resource[proto.DeployTemplate]{
	Kind:  "deploy template",
	Table: "deploy_templates",
	Meta: func(d *proto.DeployTemplate) (*string, **proto.Time, **proto.Time) {
		return &d.UUID, &d.CreatedAt, &d.UpdatedAt
	},
	Columns: []Column[proto.DeployTemplate]{
		{Name: "name", Value: func(d *proto.DeployTemplate) any { return d.Name }},
	},
	Sort:    map[string]string{"name": "name"},
	Filters: map[string]string{"name": "name"},
	Unique:  map[string]error{"deploy_templates_name_key": ErrTemplateNameTaken},
	Bare:    func(d *proto.DeployTemplate) { d.Links = nil },
}
