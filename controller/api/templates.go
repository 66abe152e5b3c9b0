package api

import (
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// stepResources are the described resources of deploy templates,
// runbooks and volume connectors and targets.
type stepResources struct {
	templates  *resource[proto.DeployTemplate]
	runbooks   *resource[proto.Runbook]
	connectors *resource[proto.VolumeConnector]
	targets    *resource[proto.VolumeTarget]
}

// mountStepResources routes deploy templates, runbooks and volume.
func (s *Server) mountStepResources(e *echo.Echo) {
	dt := deployTemplatesAPI
	s.steps.templates = &dt
	st, err := store.NewResources(s.store, store.DeployTemplateResource)
	dt.mount(e, st, err)

	rb := runbooksAPI
	s.steps.runbooks = &rb
	rbStore, err := store.NewResources(s.store, store.RunbookResource)
	rb.mount(e, rbStore, err)
	s.mountRunbookTraits(e)

	s.mountVolume(e)
}
