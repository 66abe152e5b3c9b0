package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func leasesT(t testing.TB, s Store) Leases {
	t.Helper()
	l, ok := AsLeases(s)
	if !ok {
		t.Fatalf("%T has no lease table", s)
	}
	return l
}

func req(mac string, ttl time.Duration) LeaseRequest {
	return LeaseRequest{MAC: mac, First: netip.MustParseAddr("10.0.0.10"), Last: netip.MustParseAddr("10.0.0.13"),
		Exclude: []netip.Addr{netip.MustParseAddr("10.0.0.11")}, TTL: ttl, Conductor: "c1"}
}

func TestLeaseLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		l := leasesT(t, openT(t, dsn, Options{Now: clock.Now}))
		steps := []struct {
			what    string
			mac     string
			static  bool
			advance time.Duration
			release string
			want    string // address, or "full"
		}{
			{what: "first address", mac: "AA:00:00:00:00:01", want: "10.0.0.10"},
			{what: "same MAC keeps it", mac: "aa:00:00:00:00:01", want: "10.0.0.10"},
			{what: "excluded address skipped", mac: "aa:00:00:00:00:02", want: "10.0.0.12"},
			{what: "static lease", mac: "aa:00:00:00:00:03", static: true, want: "10.0.0.13"},
			{what: "range full", mac: "aa:00:00:00:00:04", want: "full"},
			{what: "expired dynamic lease reclaimed, static kept", mac: "aa:00:00:00:00:04", advance: 2 * time.Hour, want: "10.0.0.10"},
			{what: "released address reused", mac: "aa:00:00:00:00:05", release: "aa:00:00:00:00:04", want: "10.0.0.10"},
			{what: "released static stays", mac: "aa:00:00:00:00:06", release: "aa:00:00:00:00:03", want: "10.0.0.12"},
		}
		for _, st := range steps {
			clock.Advance(st.advance)
			if st.release != "" {
				if err := l.ReleaseLease(ctx, st.release); err != nil {
					t.Fatalf("%s: release: %v", st.what, err)
				}
			}
			r := req(st.mac, time.Hour)
			r.Static = st.static
			got, err := l.AcquireLease(ctx, r)
			if st.want == "full" {
				if !errors.Is(err, ErrNoFreeAddress) {
					t.Fatalf("%s: got %v, %v; want ErrNoFreeAddress", st.what, got.IP, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", st.what, err)
			}
			if got.IP.String() != st.want {
				t.Fatalf("%s: got %s, want %s", st.what, got.IP, st.want)
			}
		}
		all, err := l.ListLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range all {
			got = append(got, fmt.Sprintf("%s=%s/%v", x.IP, x.MAC, x.Static))
		}
		want := "[10.0.0.10=aa:00:00:00:00:05/false 10.0.0.12=aa:00:00:00:00:06/false 10.0.0.13=aa:00:00:00:00:03/true]"
		if fmt.Sprint(got) != want {
			t.Fatalf("leases %v, want %s", got, want)
		}
	})
}

func TestLeaseRejectsBadRange(t *testing.T) {
	l := leasesT(t, openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}))
	r := req("aa:00:00:00:00:01", time.Hour)
	r.First, r.Last = r.Last, r.First
	if _, err := l.AcquireLease(context.Background(), r); err == nil {
		t.Fatal("a reversed range was accepted")
	}
}

// TestLeasesTwoControllersNeverShare runs two stores on one database, as two
// controllers, each leasing concurrently for its own MACs and both for a
// shared set: every MAC gets exactly one address and no address two MACs.
func TestLeasesTwoControllersNeverShare(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		a, b := leasesT(t, openT(t, dsn, Options{})), leasesT(t, openT(t, dsn, Options{}))
		const macs = 40
		r := LeaseRequest{First: netip.MustParseAddr("10.1.0.1"), Last: netip.MustParseAddr("10.1.0.250"), TTL: time.Hour}
		var mu sync.Mutex
		byMAC := map[string]map[netip.Addr]bool{}
		var wg sync.WaitGroup
		errc := make(chan error, 4*macs)
		for i := range macs {
			for ci, l := range []Leases{a, b} {
				wg.Go(func() {
					r := r
					r.MAC = fmt.Sprintf("bb:00:00:00:00:%02x", i)
					r.Conductor = fmt.Sprint("c", ci)
					got, err := l.AcquireLease(ctx, r)
					if err != nil {
						errc <- err
						return
					}
					mu.Lock()
					if byMAC[r.MAC] == nil {
						byMAC[r.MAC] = map[netip.Addr]bool{}
					}
					byMAC[r.MAC][got.IP] = true
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		owner := map[netip.Addr]string{}
		for mac, ips := range byMAC {
			if len(ips) != 1 {
				t.Fatalf("%s was given %d addresses: %v", mac, len(ips), ips)
			}
			for ip := range ips {
				if o, dup := owner[ip]; dup {
					t.Fatalf("%s given to both %s and %s", ip, o, mac)
				}
				owner[ip] = mac
			}
		}
		if len(owner) != macs {
			t.Fatalf("%d addresses for %d MACs", len(owner), macs)
		}
		all, err := a.ListLeases(ctx)
		if err != nil || len(all) != macs {
			t.Fatalf("stored %d leases (%v), want %d", len(all), err, macs)
		}
	})
}
