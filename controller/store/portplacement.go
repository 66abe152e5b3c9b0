package store

// portPlacementWhere adds the filters on a port's node's conductor group
// and shard: columns of the port that triggers copy from its node
// (migration 0030), so that the list seeks their index; and on a substring
// of its description (0031's generated column), matched walking the list.
func portPlacementWhere(q PortQuery, where []string, args []any) ([]string, []any) {
	for _, f := range []struct {
		col  string
		vals []string
	}{{"node_conductor_group", q.ConductorGroups}, {"node_shard", q.Shards}} {
		if len(f.vals) == 0 {
			continue
		}
		where = append(where, f.col+" IN ("+placeholders(len(f.vals))+")")
		for _, v := range f.vals {
			args = append(args, v)
		}
	}
	if q.DescriptionContains != "" {
		where = append(where, `LOWER(description) LIKE LOWER(?) ESCAPE '\'`)
		args = append(args, "%"+likeEscaper.Replace(q.DescriptionContains)+"%")
	}
	return where, args
}
