package store

import (
	"strings"
	"testing"
)

// TestPointReadPlans: the reads of a node by UUID or name that the hot
// routes make (a node get, an agent heartbeat) each seek one row by an
// index: no scan, no sort.
func TestPointReadPlans(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	for _, col := range []string{"uuid", "name"} {
		for what, query := range map[string]string{
			"GetNodeView": nodeViewQuery(col),
			"AgentOf":     agentViewQuery(col),
		} {
			plan := explainSQLite(t, st, query, []any{"x"})
			if !strings.Contains(plan, "SEARCH nodes USING INDEX") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("%s by %s:\n%s\n%s", what, col, query, plan)
			}
		}
	}
}
