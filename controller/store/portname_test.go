package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/proto"
)

func TestPortNames(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openT(t, dsn, Options{})
		n := mustCreate(t, s, newNode("n1"))
		mk := func(mac string, name *string) *proto.Port {
			return &proto.Port{UUID: uuid.NewString(), Address: mac, NodeUUID: n.UUID, Name: name, Extra: proto.Dict{}}
		}
		pb := mk("52:54:00:00:00:01", ptr("b"))
		pa := mk("52:54:00:00:00:02", ptr("a"))
		pn := mk("52:54:00:00:00:03", nil)
		for _, p := range []*proto.Port{pb, pa, pn} {
			if err := s.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreatePort(ctx, mk("52:54:00:00:00:04", ptr("a"))); !errors.Is(err, ErrDuplicatePortName) {
			t.Fatalf("second port named a: %v, want ErrDuplicatePortName", err)
		}
		_, err := s.UpdatePort(ctx, pb.UUID, func(p *proto.Port) error { p.Name = ptr("a"); return nil })
		if !errors.Is(err, ErrDuplicatePortName) {
			t.Fatalf("rename to a taken name: %v, want ErrDuplicatePortName", err)
		}
		if got, _ := s.GetPort(ctx, pb.UUID); got == nil || got.Name == nil || *got.Name != "b" {
			t.Fatalf("refused rename changed the port: %+v", got)
		}
		for _, tc := range []struct {
			q    PortQuery
			want []string
		}{
			{PortQuery{Name: "a"}, []string{pa.UUID}},
			{PortQuery{Name: "zz"}, nil},
			{PortQuery{SortKey: "name"}, []string{pn.UUID, pa.UUID, pb.UUID}},
			{PortQuery{SortKey: "name", SortDir: "desc"}, []string{pb.UUID, pa.UUID, pn.UUID}},
			{PortQuery{SortKey: "name", Marker: pa.UUID}, []string{pb.UUID}},
		} {
			got, err := s.ListPorts(ctx, tc.q)
			if err != nil {
				t.Fatalf("ListPorts(%+v): %v", tc.q, err)
			}
			var uuids []string
			for _, p := range got {
				uuids = append(uuids, p.UUID)
			}
			if strings.Join(uuids, ",") != strings.Join(tc.want, ",") {
				t.Errorf("ListPorts(%+v) = %v, want %v", tc.q, uuids, tc.want)
			}
		}
	})
}

// TestPortNameMigrationKeepsDuplicates rewinds a database to before 0012,
// gives two ports the same name as older Kiln allowed, and checks that the
// migration keeps the oldest port's name and moves the other's into extra.
func TestPortNameMigrationKeepsDuplicates(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := mustCreate(t, s, newNode("n1"))
		first := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:01:01", NodeUUID: n.UUID, Name: ptr("dup"), Extra: proto.Dict{"k": "v"}}
		second := &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:01:02", NodeUUID: n.UUID, Name: ptr("other"), Extra: proto.Dict{"k": "w"}}
		for _, p := range []*proto.Port{first, second} {
			if err := s.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()

		driver, path, index, rename := "sqlite", strings.TrimPrefix(dsn, "sqlite://"), "ports_name",
			`UPDATE ports SET doc = json_set(doc, '$.name', 'dup')`
		if strings.HasPrefix(dsn, "postgres") {
			driver, path, index, rename = "pgx", dsn, "ports_name_key",
				`UPDATE ports SET doc = jsonb_set(doc::jsonb, '{name}', '"dup"')::text`
		}
		db, err := sql.Open(driver, path)
		if err != nil {
			t.Fatal(err)
		}
		// Back to before 0012 (and 0021, which indexes the column 0012 adds).
		for _, q := range []string{"DROP INDEX ports_name_sort", "DROP INDEX " + index, "ALTER TABLE ports DROP COLUMN name", rename,
			"DELETE FROM schema_migrations WHERE version IN (12, 21)"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db.Close()

		s = openT(t, dsn, Options{})
		got1, err := s.GetPort(ctx, first.UUID)
		if err != nil || got1.Name == nil || *got1.Name != "dup" || got1.Extra["k"] != "v" {
			t.Fatalf("oldest port after migration = %+v, %v; want name dup", got1, err)
		}
		got2, err := s.GetPort(ctx, second.UUID)
		if err != nil || got2.Name != nil || got2.Extra["kiln_duplicate_name"] != "dup" || got2.Extra["k"] != "w" {
			t.Fatalf("duplicate port after migration = %+v, %v; want no name, extra.kiln_duplicate_name=dup", got2, err)
		}
		byName, err := s.ListPorts(ctx, PortQuery{Name: "dup"})
		if err != nil || len(byName) != 1 || byName[0].UUID != first.UUID {
			t.Fatalf("ListPorts(name=dup) = %v, %v", byName, err)
		}
	})
}
