// Package standard links in the hardware types a Kiln controller offers:
// importing it registers each of them (fake-hardware is built into package
// driver). A new hardware type is a package of its own and one line here.
package standard

import (
	// Hardware types and interfaces; each registers itself in init.
	_ "github.com/kilnhq/kiln/controller/driver/idrac"
	_ "github.com/kilnhq/kiln/controller/driver/ipmi"
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
	_ "github.com/kilnhq/kiln/controller/driver/redfish"
)
