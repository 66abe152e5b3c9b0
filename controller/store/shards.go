package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// Shard is one entry of GET /v1/shards: a shard name and how many nodes
// are in it ("None" for the nodes in no shard, as Ironic names them).
type Shard struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// shardWhere adds the shard and parent/child filters of q (microversions
// 1.82 and 1.83) to a node list's WHERE clause.
func shardWhere(q NodeQuery, where []string, args []any) ([]string, []any) {
	if len(q.Shards) > 0 {
		where = append(where, "shard IN ("+placeholders(len(q.Shards))+")")
		for _, s := range q.Shards {
			args = append(args, s)
		}
	}
	if q.Sharded != nil {
		if *q.Sharded {
			where = append(where, "shard IS NOT NULL")
		} else {
			where = append(where, "shard IS NULL")
		}
	}
	if q.ParentNode != "" {
		where = append(where, "parent_node = ?")
		args = append(args, q.ParentNode)
	}
	if q.NoChildren {
		where = append(where, "parent_node IS NULL")
	}
	return where, args
}

// Shards counts the nodes of each shard, largest first (then by name, so
// the order is stable). st must be an SQL store (or wrap one).
func Shards(ctx context.Context, st Store) ([]Shard, error) {
	s, err := sqlOf(st)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.rdb, "SELECT shard, COUNT(*) FROM nodes GROUP BY shard")
	if err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	defer rows.Close()
	out := []Shard{}
	for rows.Next() {
		var name sql.NullString
		var sh Shard
		if err := rows.Scan(&name, &sh.Count); err != nil {
			return nil, fmt.Errorf("list shards: %w", err)
		}
		sh.Name = "None"
		if name.Valid {
			sh.Name = name.String
		}
		out = append(out, sh)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return strings.Compare(out[i].Name, out[j].Name) < 0
	})
	return out, nil
}

// Children lists the UUIDs of the nodes whose parent_node is parent, in
// creation order.
func Children(ctx context.Context, st Store, parent string) ([]string, error) {
	s, err := sqlOf(st)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.rdb, "SELECT uuid FROM nodes WHERE parent_node = ? ORDER BY id", parent)
	if err != nil {
		return nil, fmt.Errorf("list children of %s: %w", parent, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("list children of %s: %w", parent, err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// sqlOf finds the SQL store under any wrappers.
func sqlOf(st Store) (*sqlStore, error) {
	for {
		w, ok := st.(Unwrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	s, ok := st.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("store %T is not an SQL store", st)
	}
	return s, nil
}
