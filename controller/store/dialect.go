package store

import (
	"io/fs"
	"strconv"
	"strings"
)

// dialect holds what differs between the SQL databases; everything else is
// the shared implementation in sql.go. Queries are written with ? placeholders
// and rebound for databases that number them.
type dialect struct {
	name string
	// numbered: placeholders are $1, $2, ... instead of ?.
	numbered bool
	// forUpdate is appended to a SELECT that must lock the row it reads for
	// the rest of the transaction (PostgreSQL). SQLite needs none: its write
	// transactions start with BEGIN IMMEDIATE and so exclude each other.
	forUpdate string
	// migrations holds NNNN_name.sql files applied in order at open.
	migrations fs.FS
	// lockMigrations, when set, runs first in the migration transaction so
	// that controllers starting together migrate one at a time.
	lockMigrations string
	// retryable reports errors after which the whole transaction may be run
	// again (busy database, serialization failure, deadlock).
	retryable func(error) bool
	// uniqueViolation names the unique constraint err violates, as
	// "<table>_<column>_key", or "".
	uniqueViolation func(error) string
	// foreignKeyViolation reports a violated foreign key.
	foreignKeyViolation func(error) bool
}

// rebind turns ? placeholders into $N for numbered dialects. Kiln's queries
// contain no ? other than placeholders.
func (d *dialect) rebind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
