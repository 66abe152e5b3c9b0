package secrets

import (
	"regexp"
)

var (
	// tokenParam is a query parameter or form field carrying the agent's
	// token (agent_token=, as the agent API takes it), or a JSON member
	// "agent_token": "...", up to the next separator.
	tokenParam = regexp.MustCompile(`(?i)(agent_token=)[^&\s"'<>#]*|("agent_token"\s*:\s*")[^"]*`)
	// userinfo is the credentials part of a URL, scheme://user:pass@ or
	// scheme://token@, up to the @ that ends it (no / ? # or space before).
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#@\s"'<>]+)@`)
)

// Scrub returns s with agent tokens and URL credentials replaced by Masked:
// agent_token=<value> (and a JSON "agent_token" member) and the userinfo of
// any URL. Call it on every URL or error text before it is stored
// (last_error, history) or logged.
func Scrub(s string) string {
	s = tokenParam.ReplaceAllStringFunc(s, func(m string) string {
		sub := tokenParam.FindStringSubmatch(m)
		if sub[1] != "" {
			return sub[1] + Masked
		}
		return sub[2] + Masked
	})
	return userinfo.ReplaceAllString(s, "${1}"+Masked+"@")
}
