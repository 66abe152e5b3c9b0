package agent

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestAPITokenRules walks IPA's token rules for the command API in order: the
// steps of one table share one agent, because a read with the valid token
// changes what later token-less reads get.
func TestAPITokenRules(t *testing.T) {
	e := newAPIEnv(t, nil)
	_, ran, _ := e.run(t, "standby.sync", nil, true)
	succeeded(t, ran, "sync")
	cmdPath := "/v1/commands/" + ran.ID
	syncBody := `{"name":"standby.sync","params":{}}`
	for i, s := range []struct {
		name   string
		method string
		path   string
		body   string
		code   int
	}{
		// Open endpoints, never guarded.
		{"root", "GET", "/", "", 200},
		{"v1 doc", "GET", "/v1/", "", 200},
		{"status", "GET", "/v1/status", "", 200},
		{"status unversioned", "GET", "/status", "", 200},
		// Ironic ≤ 2024.1 polls without a token: allowed until a tokened read.
		{"list without token", "GET", "/v1/commands/", "", 200},
		{"list unversioned without token", "GET", "/commands/", "", 200},
		{"get without token", "GET", cmdPath, "", 200},
		{"get wait without token", "GET", cmdPath + "?wait=true", "", 200},
		{"list with empty token", "GET", "/v1/commands/?agent_token=", "", 200},
		// A wrong token is refused and does not lock token-less reads out.
		{"list with wrong token", "GET", "/v1/commands/?agent_token=wrong", "", 401},
		{"get with wrong token", "GET", cmdPath + "?agent_token=wrong", "", 401},
		{"list without token after a wrong one", "GET", "/v1/commands/", "", 200},
		// Running a command always needs the token (Ironic always sends it).
		{"run without token", "POST", "/v1/commands/", syncBody, 401},
		{"run with wrong token", "POST", "/v1/commands/?agent_token=wrong", syncBody, 401},
		{"run with token", "POST", "/v1/commands/?wait=true&agent_token=" + testToken, syncBody, 200},
		// A token on a POST does not lock reads (Ironic 2023.1 sends one there only).
		{"list without token after tokened run", "GET", "/v1/commands/", "", 200},
		// The first read with the valid token locks token-less reads out.
		{"list with token", "GET", "/v1/commands/?agent_token=" + testToken, "", 200},
		{"list without token after lockout", "GET", "/v1/commands/", "", 401},
		{"get without token after lockout", "GET", cmdPath, "", 401},
		{"get wait without token after lockout", "GET", cmdPath + "?wait=true", "", 401},
		{"get with token after lockout", "GET", cmdPath + "?wait=true&agent_token=" + testToken, "", 200},
		{"unversioned list with token", "GET", "/commands/?agent_token=" + testToken, "", 200},
		{"status stays open after lockout", "GET", "/v1/status", "", 200},
	} {
		var rd io.Reader
		if s.body != "" {
			rd = strings.NewReader(s.body)
		}
		req, _ := http.NewRequest(s.method, e.srv.URL+s.path, rd)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.code {
			t.Fatalf("step %d %s: %s %s = %d %s, want %d", i, s.name, s.method, s.path, resp.StatusCode, b, s.code)
		}
		if s.code == 401 && !bytes.Contains(b, []byte(`"faultstring":"Token invalid."`)) {
			t.Fatalf("step %d %s: 401 body %s lacks IPA's faultstring", i, s.name, b)
		}
	}
}

// countingReader counts the bytes the server read of a request body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestAPIRunCommandBody: the token is checked before the body is read, and a
// body over the limit is a 413 in IPA's error shape, with or without a
// Content-Length, and starts nothing.
func TestAPIRunCommandBody(t *testing.T) {
	e := newAPIEnv(t, nil)
	huge := `{"name":"standby.sync","params":{"pad":"` + strings.Repeat("x", maxCommandBody) + `"}}`
	for _, c := range []struct {
		name    string
		token   string
		body    string
		chunked bool
		code    int
		fault   string
	}{
		{"no token, invalid body", "", "not json", false, 401, "Token invalid."},
		{"wrong token, invalid body", "wrong", "{", false, 401, "Token invalid."},
		{"no token, huge body", "", huge, false, 401, "Token invalid."},
		{"huge body with length", testToken, huge, false, 413, "Request Entity Too Large"},
		{"huge body chunked", testToken, huge, true, 413, "Request Entity Too Large"},
		{"invalid body with token", testToken, "not json", false, 400, "Missing or invalid name or params"},
		{"body at the limit", testToken, `{"name":"standby.sync","params":{"pad":"` + strings.Repeat("x", maxCommandBody-len(`{"name":"standby.sync","params":{"pad":""}}`)) + `"}}`, false, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Over real HTTP: the status and the error shape.
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/commands/?wait=true&agent_token="+c.token, strings.NewReader(c.body))
			if c.chunked {
				req.ContentLength = -1
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Fatalf("status %d %.200s, want %d", resp.StatusCode, b, c.code)
			}
			// In process: how much of the body the handler read.
			if c.code == 200 {
				return
			}
			cr := &countingReader{r: strings.NewReader(c.body)}
			hreq := httptest.NewRequest("POST", "/v1/commands/?agent_token="+c.token, cr)
			if c.chunked {
				hreq.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			e.a.Handler().ServeHTTP(rec, hreq)
			if rec.Code != c.code {
				t.Fatalf("in process: status %d, want %d", rec.Code, c.code)
			}
			if !bytes.Contains(b, []byte(`"faultcode":"Client"`)) || !bytes.Contains(b, []byte(c.fault)) {
				t.Fatalf("body %.300s is not IPA's {faultcode: Client, faultstring: %q}", b, c.fault)
			}
			if c.code == 401 && cr.n != 0 {
				t.Fatalf("refused request had %d body bytes read; the token must be checked first", cr.n)
			}
			if c.code == 413 && cr.n > maxCommandBody+1 {
				t.Fatalf("413 after reading %d bytes: the limit must stop the read", cr.n)
			}
		})
	}
	var list proto.CommandList
	e.call(t, "GET", "/v1/commands/?agent_token="+testToken, nil, &list)
	if len(list.Commands) != 1 {
		t.Fatalf("want only the request at the limit recorded, got %d: %+v", len(list.Commands), list.Commands)
	}
}
