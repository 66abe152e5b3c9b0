package main

import (
	"context"

	// Hardware types offered by `kiln serve`; each registers itself in init.
	_ "github.com/kilnhq/kiln/controller/driver/ipmi"
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
	"github.com/kilnhq/kiln/controller/driver/redfish"
)

// shutdownDrivers logs out of the BMC sessions the drivers keep open; serve
// calls it once the API and the conductor have stopped.
func shutdownDrivers(ctx context.Context) error { return redfish.Shutdown(ctx) }
