package store

import "strings"

// nodeFilterWhere adds the node list filters on migration 0031's generated
// columns (retired, lessee, conductor and a substring of the description)
// and on 0032's node_projects (owner or lessee).
func nodeFilterWhere(q NodeQuery, where []string, args []any) ([]string, []any) {
	if q.Retired != nil {
		where = append(where, "retired = ?")
		args = append(args, *q.Retired)
	}
	for _, f := range []struct{ col, val string }{{"lessee", q.Lessee}, {"conductor", q.Conductor}} {
		if f.val != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.val)
		}
	}
	if q.Project != "" {
		// Migration 0032's node_projects: a seek of (project, node_id),
		// then the nodes by id in list order.
		where = append(where, "id IN (SELECT node_id FROM node_projects WHERE project = ?)")
		args = append(args, q.Project)
	}
	if q.DescriptionContains != "" {
		// LIKE's wildcards in the value are matched as themselves; both
		// sides are lowered by the database, so they fold alike.
		where = append(where, `LOWER(description) LIKE LOWER(?) ESCAPE '\'`)
		args = append(args, "%"+likeEscaper.Replace(q.DescriptionContains)+"%")
	}
	return where, args
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
