package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// agent is a node whose ramdisk would heartbeat: deployed to wait
// call-back, in maintenance (so that neither Kiln nor Ironic acts on the
// heartbeat: Ironic's allow_provisioning_in_maintenance default records it
// and takes no step, and neither times the deploy out), with the agent
// token its lookup returned.
type agent struct {
	uuid, token, callback string
}

// heartbeat is the body ironic-python-agent sends.
func (a agent) heartbeat() string {
	b, _ := json.Marshal(map[string]string{"callback_url": a.callback, "agent_token": a.token, "agent_version": "9.4.1"})
	return string(b)
}

// imageContent is the deploy image apibench serves: endpoints check that
// image_source answers before they deploy (Ironic sends a HEAD).
var imageContent = bytes.Repeat([]byte("apibench"), 512)

func imageServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "apibench.img", time.Time{}, bytes.NewReader(imageContent))
	}))
}

// prepareAgents enrolls n nodes, named for this run so that reruns on the
// same endpoint do not collide, deploys them to wait call-back, sets
// maintenance and looks each up for its token.
func (c *client) prepareAgents(base string, n int, image string) ([]agent, error) {
	ctx := context.Background()
	sum := sha256.Sum256(imageContent)
	hexSum := hex.EncodeToString(sum[:])
	run := time.Now().UTC().Format("150405")
	agents := make([]agent, 0, n)
	for i := range n {
		body, _ := json.Marshal(map[string]any{
			"driver": "fake-hardware", "name": fmt.Sprintf("apibench-hb-%s-%02d", run, i),
			"deploy_interface": "direct", "automated_clean": false,
			"instance_info": map[string]any{"image_source": image, "image_checksum": hexSum,
				"image_os_hash_algo": "sha256", "image_os_hash_value": hexSum},
		})
		code, b, err := c.call(ctx, "POST", base+"/v1/nodes", string(body))
		if err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("create node: %d %s (%v)", code, b, err)
		}
		var created struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal(b, &created); err != nil {
			return nil, err
		}
		port := fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:%02x:%s:%s:%02x"}`, created.UUID, 1+i>>8, run[2:4], run[4:6], i&0xff)
		if code, b, err := c.call(ctx, "POST", base+"/v1/ports", port); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("create port: %d %s (%v)", code, b, err)
		}
		agents = append(agents, agent{uuid: created.UUID, callback: fmt.Sprintf("http://192.0.2.%d:9999", i%250+1)})
	}
	for _, step := range [][2]string{{"manage", "manageable"}, {"provide", "available"}, {"active", "wait call-back"}} {
		for _, a := range agents {
			body := fmt.Sprintf(`{"target":%q}`, step[0])
			if code, b, err := c.call(ctx, "PUT", base+"/v1/nodes/"+a.uuid+"/states/provision", body); err != nil || code != http.StatusAccepted {
				return nil, fmt.Errorf("%s %s: %d %s (%v)", step[0], a.uuid, code, b, err)
			}
		}
		for _, a := range agents {
			if err := c.waitState(ctx, base, a.uuid, step[1]); err != nil {
				return nil, err
			}
		}
	}
	for i, a := range agents {
		// The lookup first: Ironic finds no node in maintenance.
		code, b, err := c.call(ctx, "GET", base+"/v1/lookup?node_uuid="+a.uuid, "")
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("lookup %s: %d %s (%v)", a.uuid, code, b, err)
		}
		var lookup struct {
			Config struct {
				AgentToken string `json:"agent_token"`
			} `json:"config"`
		}
		if err := json.Unmarshal(b, &lookup); err != nil || lookup.Config.AgentToken == "" || strings.Trim(lookup.Config.AgentToken, "*") == "" {
			return nil, fmt.Errorf("lookup %s gave no token: %s", a.uuid, b)
		}
		agents[i].token = lookup.Config.AgentToken
		if code, b, err := c.call(ctx, "PUT", base+"/v1/nodes/"+a.uuid+"/maintenance", `{"reason":"apibench heartbeats"}`); err != nil || code != http.StatusAccepted {
			return nil, fmt.Errorf("maintenance %s: %d %s (%v)", a.uuid, code, b, err)
		}
	}
	return agents, nil
}

// waitState polls the node until it reaches want; a failed state or two
// minutes end it with an error.
func (c *client) waitState(ctx context.Context, base, uuid, want string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, b, err := c.call(ctx, "GET", base+"/v1/nodes/"+uuid+"?fields=provision_state,last_error", "")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("get %s: %d %s (%v)", uuid, code, b, err)
		}
		var n struct {
			ProvisionState string  `json:"provision_state"`
			LastError      *string `json:"last_error"`
		}
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		switch {
		case n.ProvisionState == want:
			return nil
		case strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "error":
			return fmt.Errorf("node %s is %s, not %s: %s", uuid, n.ProvisionState, want, b)
		case time.Now().After(deadline):
			return fmt.Errorf("node %s still %s, not %s, after two minutes", uuid, n.ProvisionState, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call sends one request and returns the status and body.
func (c *client) call(ctx context.Context, method, url, body string) (int, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}
