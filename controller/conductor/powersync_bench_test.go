package conductor

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/controller/store"
)

// BenchmarkPowerSyncPlan10k is the part of a power-sync round before any
// BMC call, over 10,000 deployed nodes on SQLite (100 with work, so not
// due): selecting the due nodes and grouping them by BMC.
func BenchmarkPowerSyncPlan10k(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := store.CreateNodes(ctx, st, fleetNodes(10000), nil); err != nil {
		b.Fatal(err)
	}
	c := New(Config{Store: st, Name: "c1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		due, err := c.power.due(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if plan := planRound(due, nil); len(due) != 9900 || len(plan) != 9900 {
			b.Fatalf("%d nodes due in %d batches, want the 9,900 without work, one per BMC", len(due), len(plan))
		}
	}
}
