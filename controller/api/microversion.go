package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// The microversion range Kiln serves: Ironic's up to 1.115 (docs/api.md
// lists what each version added). Metal3's baremetal-operator refuses
// servers whose maximum is below 1.89 and pins 1.110 when offered it.
const (
	MinMinor     = 1
	MaxMinor     = 115
	DefaultMinor = 1
)

// versionString renders minor as "1.N".
func versionString(minor int) string { return "1." + strconv.Itoa(minor) }

// versionError is a microversion the request asked for that Kiln cannot serve.
type versionError struct {
	msg string
}

func (e *versionError) Error() string { return e.msg }

// parseMicroversion reads the requested microversion from either header Ironic
// clients send. "OpenStack-API-Version: baremetal 1.N" wins over the legacy
// "X-OpenStack-Ironic-API-Version: 1.N"; "latest" means MaxMinor; no header
// means DefaultMinor. Anything else, or a version outside [MinMinor, MaxMinor],
// is an error the caller answers with 406.
func parseMicroversion(h http.Header) (int, error) {
	if v := h.Get(proto.HeaderOpenStackAPIVersion); v != "" {
		service, ver, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(service, "baremetal") {
			return parseVersionValue(strings.TrimSpace(ver), proto.HeaderOpenStackAPIVersion)
		}
		// A header meant for another service says nothing about ours.
	}
	if v := h.Get(proto.HeaderIronicAPIVersion); v != "" {
		return parseVersionValue(strings.TrimSpace(v), proto.HeaderIronicAPIVersion)
	}
	return DefaultMinor, nil
}

func parseVersionValue(v, header string) (int, error) {
	if strings.EqualFold(v, "latest") {
		return MaxMinor, nil
	}
	major, minor, ok := strings.Cut(v, ".")
	if !ok || major != "1" || minor == "" || len(minor) > 4 {
		return 0, &versionError{fmt.Sprintf("Invalid value for %s header", header)}
	}
	n, err := strconv.Atoi(minor)
	if err != nil || n < 0 || (len(minor) > 1 && minor[0] == '0') {
		return 0, &versionError{fmt.Sprintf("Invalid value for %s header", header)}
	}
	if n < MinMinor || n > MaxMinor {
		return 0, &versionError{fmt.Sprintf("Version %s was requested but the minor version is not supported by this service. The supported version range is: [%s, %s].",
			v, versionString(MinMinor), versionString(MaxMinor))}
	}
	return n, nil
}
