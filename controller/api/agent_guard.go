package api

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/ratelimit"
	"github.com/kilnhq/kiln/proto"
)

// Lookup hardening (issue 12). Ironic hands the agent token to the first
// caller of /v1/lookup; Kiln keeps that protocol and narrows it: a node whose
// boot media carry the token never gets one by lookup, unauthenticated agent
// calls are rate-limited per source address and logged with it, and the
// address that claimed a token is recorded in the node's history.

// DefaultAgentLimit is the per-address limit on /v1/lookup and
// /v1/continue_inspection: far above what an agent needs (IPA looks up
// every few seconds until it is found), far below what guessing MAC
// addresses needs.
var DefaultAgentLimit = ratelimit.Config{Rate: 2, Burst: 20}

func agentLimiter(l *ratelimit.Limiter) *ratelimit.Limiter {
	if l != nil {
		return l
	}
	return ratelimit.New(DefaultAgentLimit)
}

// sourceAddr is the request's peer address. Forwarding headers are not
// trusted: anyone could set them to dodge the limit.
func sourceAddr(c echo.Context) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.Request().RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(c.Request().RemoteAddr)
	return a.Unmap()
}

// guardAgentCall logs an unauthenticated agent call with its source and
// refuses it with 429 when the source exceeded its rate. Loopback callers
// are not limited: they run on the controller's host (tests, an agent
// reaching Kiln through a local port forward), not on the provisioning
// network the limit is for.
func (s *Server) guardAgentCall(c echo.Context, endpoint string) error {
	src := sourceAddr(c)
	if !src.IsLoopback() {
		v := s.agentLimit.Allow(src)
		if !v.Allowed {
			if v.FirstRefusal {
				s.log.Warn("agent endpoint rate limit reached; refusing this source until its rate drops", "endpoint", endpoint, "source", src.String())
			}
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(v.RetryAfter.Seconds()))))
			return errorf(http.StatusTooManyRequests, "Too many %s requests from %s; retry later.", endpoint, src)
		}
	}
	s.log.Info("agent call", "endpoint", endpoint, "source", src.String(), "query", c.QueryString())
	return nil
}

// tokenOnBootMedia reports whether the node's agent gets its token from its
// boot media (virtual media, a per-node ramdisk): then no lookup may hand
// one out, whoever asks, even before the conductor has stored it.
func tokenOnBootMedia(n *proto.Node) bool {
	if fs, _ := flowstate.Read(n, flowstate.PartAgent); fs.Agent.TokenPregenerated {
		return true
	}
	ifs, err := driver.Resolve(n)
	if err != nil {
		return false
	}
	carrier, ok := ifs.Boot.(driver.AgentTokenCarrier)
	return ok && carrier.CarriesAgentToken(n)
}

// recordTokenClaim notes in the node's history which address received its
// agent token, so that an operator can tell a stranger's claim from the
// machine's own.
func (s *Server) recordTokenClaim(c echo.Context, nodeUUID, endpoint string) {
	src := sourceAddr(c)
	s.log.Info("agent token issued", "node", nodeUUID, "endpoint", endpoint, "source", src.String())
	s.history(c, nodeUUID, "INFO", fmt.Sprintf("Agent token issued by %s to %s", endpoint, src))
}
