package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/proto"
)

// ErrInvalidParameter marks a driver error caused by what was asked rather
// than by the hardware failing (a boot device the BMC does not allow): the
// API answers it with 400 and the driver's words.
var ErrInvalidParameter = errors.New("invalid parameter")

// invalidParameter keeps err's text and makes it match ErrInvalidParameter.
type invalidParameter struct{ err error }

func (e invalidParameter) Error() string   { return e.err.Error() }
func (e invalidParameter) Unwrap() []error { return []error{e.err, ErrInvalidParameter} }

// InvalidParameter marks err as the caller's mistake (see ErrInvalidParameter).
func InvalidParameter(err error) error {
	if err == nil {
		return nil
	}
	return invalidParameter{err}
}

// InvalidParameterf is InvalidParameter(fmt.Errorf(format, args...)).
func InvalidParameterf(format string, args ...any) error {
	return InvalidParameter(fmt.Errorf(format, args...))
}

// BootDeviceState is what the BMC says the machine boots from next.
type BootDeviceState struct {
	Device     string // "" when no override is set (the machine's own order)
	Persistent bool
}

// BootDeviceReader is implemented by management interfaces that can read
// the current boot device back from the BMC (GET …/management/boot_device).
type BootDeviceReader interface {
	ReadBootDevice(ctx context.Context, n *proto.Node) (BootDeviceState, error)
}
