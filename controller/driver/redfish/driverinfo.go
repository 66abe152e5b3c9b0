package redfish

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// Info is a node's driver_info for Redfish, under the keys Ironic uses (so
// baremetal-operator's and openstack baremetal's enrollments work as they are).
type Info struct {
	// Endpoint is the service's base URL: scheme://host[:port], from
	// redfish_address ("10.0.0.5", "10.0.0.5:8443", "https://bmc.example").
	Endpoint string
	// SystemID is redfish_system_id, a path (/redfish/v1/Systems/1) or a bare
	// ID; empty selects the only system of the service.
	SystemID string
	Username string
	Password string
	// VerifyCA: redfish_verify_ca true/false, or a CA bundle path (CAFile).
	VerifyCA bool
	CAFile   string
	AuthType string // basic, session or auto (default auto)
}

// ParseInfo reads and checks a node's driver_info.
func ParseInfo(n *proto.Node) (Info, error) {
	di := n.DriverInfo
	str := func(k string) string {
		switch v := di[k].(type) {
		case string:
			return strings.TrimSpace(v)
		case nil:
			return ""
		default:
			return fmt.Sprint(v)
		}
	}
	var in Info
	addr := str("redfish_address")
	if addr == "" {
		return in, fmt.Errorf("driver_info is missing redfish_address")
	}
	ep, err := parseAddress(addr)
	if err != nil {
		return in, err
	}
	in.Endpoint = ep
	in.SystemID = str("redfish_system_id")
	if in.SystemID != "" && !strings.HasPrefix(in.SystemID, "/") && strings.Contains(in.SystemID, "/") {
		return in, fmt.Errorf("driver_info redfish_system_id %q is neither a path (/redfish/v1/Systems/ID) nor a system ID", in.SystemID)
	}
	in.Username = str("redfish_username")
	in.Password = str("redfish_password")
	in.AuthType = strings.ToLower(str("redfish_auth_type"))
	switch in.AuthType {
	case "":
		in.AuthType = AuthAuto
	case AuthBasic, AuthSession, AuthAuto:
	default:
		return in, fmt.Errorf("driver_info redfish_auth_type %q is not one of basic, session, auto", in.AuthType)
	}
	if in.AuthType != AuthBasic && in.Username == "" && in.Password != "" {
		return in, fmt.Errorf("driver_info has redfish_password but no redfish_username")
	}
	in.VerifyCA = true
	switch v := di["redfish_verify_ca"].(type) {
	case nil:
	case bool:
		in.VerifyCA = v
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			in.VerifyCA = b
		} else if strings.HasPrefix(v, "/") {
			in.CAFile = v
		} else {
			return in, fmt.Errorf("driver_info redfish_verify_ca %q is neither a boolean nor an absolute path to a CA bundle", v)
		}
	default:
		return in, fmt.Errorf("driver_info redfish_verify_ca has type %T; want a boolean or a path", v)
	}
	return in, nil
}

// parseAddress makes a base URL of redfish_address; the default scheme is
// https, as on real BMCs.
func parseAddress(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("driver_info redfish_address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("driver_info redfish_address %q: scheme must be http or https", addr)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("driver_info redfish_address %q has no host", addr)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("driver_info redfish_address %q: bad port", addr)
		}
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/redfish/v1" {
		return "", fmt.Errorf("driver_info redfish_address %q: give scheme, host and port only", addr)
	}
	return u.Scheme + "://" + u.Host, nil
}

// systemPath returns the Redfish path of a configured system ID.
func (in Info) systemPath() string {
	if in.SystemID == "" || strings.HasPrefix(in.SystemID, "/") {
		return in.SystemID
	}
	return "/redfish/v1/Systems/" + in.SystemID
}
