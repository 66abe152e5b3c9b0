package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// Boot-device requests answer as Ironic's do, synchronously, but the API
// never talks to the BMC itself: it records the request on the node, wakes
// the node's conductor (this process's or a peer's, through the store),
// and waits a bounded time for the answer the conductor records after
// calling the BMC under the node's reservation.

func (s *Server) setBootDevice(c echo.Context) error {
	obj, err := readJSONObject(c, "boot device")
	if err != nil {
		return err
	}
	if err := checkFields(c, "boot device", obj, []string{"boot_device", "persistent"}, nil); err != nil {
		return err
	}
	var req proto.BootDeviceRequest
	if err := decodeInto(obj, &req, "boot device request"); err != nil {
		return err
	}
	res, err := s.managementCall(c, proto.ManagementRequest{Op: proto.OpSetBootDevice, BootDevice: req.BootDevice, Persistent: req.Persistent},
		func(n *proto.Node) error {
			hw, _ := driver.Lookup(n.Driver)
			if !slices.Contains(hw.BootDevices, req.BootDevice) {
				return badRequest("Invalid boot device %q for node %s; supported: %v", req.BootDevice, n.UUID, hw.BootDevices)
			}
			return nil
		})
	if err != nil {
		return err
	}
	if err := managementError(res); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getBootDevice(c echo.Context) error {
	res, err := s.managementCall(c, proto.ManagementRequest{Op: proto.OpGetBootDevice}, nil)
	if err != nil {
		return err
	}
	if err := managementError(res); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, proto.BootDevice{BootDevice: res.BootDevice, Persistent: res.Persistent})
}

// managementError is the API error for a failed request: 400 with the
// BMC's words when it refused what was asked, 500 when it failed.
func managementError(res proto.ManagementResult) error {
	switch {
	case res.Error == "":
		return nil
	case res.Invalid:
		return badRequest("%s", res.Error)
	default:
		return errorf(http.StatusInternalServerError, "%s", res.Error)
	}
}

// managementCall records req on the node (after check, inside the same
// update), wakes the conductor and waits for its answer.
func (s *Server) managementCall(c echo.Context, req proto.ManagementRequest, check func(n *proto.Node) error) (proto.ManagementResult, error) {
	ctx := c.Request().Context()
	req.ID = uuid.NewString()
	n, err := s.recordManagement(c, req, check)
	if err != nil {
		return proto.ManagementResult{}, err
	}
	res, err := s.awaitManagement(ctx, n.UUID, req.ID)
	if err != nil {
		// Withdraw the request unless the conductor has taken it up.
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.store.UpdateNode(wctx, n.UUID, func(n *proto.Node) error {
			flowstate.Update(n, func(s *flowstate.State) {
				if s.ManagementRequest != nil && s.ManagementRequest.ID == req.ID {
					s.ManagementRequest = nil
				}
			})
			return nil
		})
		if errors.Is(err, errNoAnswer) {
			return res, errorf(http.StatusServiceUnavailable,
				"No conductor answered the boot device request for node %s within %s; please retry.", n.UUID, s.conductorWait)
		}
		return res, err
	}
	return res, nil
}

// recordManagement records req on the node (after check, inside the same
// update) and wakes the node's conductor; an earlier request the
// conductor has not answered yet makes it a 409.
func (s *Server) recordManagement(c echo.Context, req proto.ManagementRequest, check func(n *proto.Node) error) (*proto.Node, error) {
	ident := c.Param("node")
	if req.ID == "" {
		req.ID = uuid.NewString()
	}
	req.RequestedAt = time.Now().UTC()
	n, err := s.store.UpdateNode(c.Request().Context(), ident, func(n *proto.Node) error {
		if check != nil {
			if err := check(n); err != nil {
				return err
			}
		}
		fs, _ := flowstate.Read(n, flowstate.PartWork)
		if cur := fs.ManagementRequest; cur != nil && req.RequestedAt.Sub(cur.RequestedAt) < s.conductorWait {
			return conflict("Node %s has a boot device request in progress, please retry after it is completed.", n.UUID)
		}
		fs.ManagementRequest = &req
		flowstate.Write(n, fs, flowstate.PartWork)
		return nil
	})
	if err != nil {
		return nil, s.storeError(err, "Node", ident)
	}
	s.notify(n.UUID)
	return n, nil
}

var errNoAnswer = errors.New("no answer from the conductor")

// awaitManagement polls the node until the conductor recorded the answer
// to request id, within ConductorWait. Polling the store (rather than a
// local event) finds the answer whichever controller's conductor gave it.
func (s *Server) awaitManagement(ctx context.Context, nodeUUID, id string) (proto.ManagementResult, error) {
	deadline := time.NewTimer(s.conductorWait)
	defer deadline.Stop()
	delay := 5 * time.Millisecond
	for {
		n, err := s.store.GetNode(ctx, nodeUUID)
		if err != nil {
			return proto.ManagementResult{}, s.storeError(err, "Node", nodeUUID)
		}
		if fs, _ := flowstate.Read(n, flowstate.PartWork); fs.ManagementResult != nil && fs.ManagementResult.ID == id {
			return *fs.ManagementResult, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return proto.ManagementResult{}, ctx.Err()
		case <-deadline.C:
			t.Stop()
			return proto.ManagementResult{}, errNoAnswer
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}
