package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ErrNoFreeAddress: every address of a DHCP range is leased.
var ErrNoFreeAddress = errors.New("no free address in the DHCP range")

// Leases is the DHCP lease table of the embedded DHCP server. The SQL stores
// implement it beside Store; get it with AsLeases. It is a separate interface
// because only kiln serve --dhcp full uses it, and the store wrappers
// (events, metrics) have nothing to add to it.
type Leases interface {
	// AcquireLease gives mac an address in [First, Last]: the one it already
	// holds there (its lease renewed), else the lowest address that is free
	// or whose lease expired. Controllers sharing a PostgreSQL database never
	// give one address to two MACs: the insert that loses a race violates a
	// unique key and the allocation runs again. ErrNoFreeAddress when the
	// range is full.
	AcquireLease(ctx context.Context, r LeaseRequest) (Lease, error)
	// ReleaseLease ends mac's dynamic lease (a DHCPRELEASE); static leases
	// stay. Releasing a MAC that holds nothing is not an error.
	ReleaseLease(ctx context.Context, mac string) error
	// ListLeases returns every lease, by address.
	ListLeases(ctx context.Context) ([]Lease, error)
}

// LeaseRequest asks for an address for one MAC.
type LeaseRequest struct {
	MAC         string // lower-case colon form, as ports store it
	First, Last netip.Addr
	// Exclude lists addresses of the range never to hand out (the
	// server's own, the router).
	Exclude []netip.Addr
	TTL     time.Duration
	// Static: a MAC Kiln knows (a port's); the lease never expires, so the
	// machine keeps its address across reboots and deploys.
	Static    bool
	Conductor string
}

// Lease is one address held by one MAC.
type Lease struct {
	IP        netip.Addr
	MAC       string
	Static    bool
	ExpiresAt time.Time // zero for static leases
	Conductor string
}

// AsLeases returns the lease table of a store opened by Open.
func AsLeases(s Store) (Leases, bool) {
	l, ok := s.(Leases)
	return l, ok
}

var _ Leases = (*sqlStore)(nil)

func ipNum(a netip.Addr) int64 {
	b := a.As4()
	return int64(b[0])<<24 | int64(b[1])<<16 | int64(b[2])<<8 | int64(b[3])
}

func numIP(n int64) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// errLeaseRace: another controller took the address or leased the MAC
// between our read and our insert; the allocation runs again.
var errLeaseRace = errors.New("lease taken concurrently")

// maxLeaseRaces bounds how often one allocation is redone after losing a race.
const maxLeaseRaces = 32

func (s *sqlStore) AcquireLease(ctx context.Context, r LeaseRequest) (Lease, error) {
	if !r.First.Is4() || !r.Last.Is4() || r.Last.Less(r.First) {
		return Lease{}, fmt.Errorf("acquire lease for %s: invalid range %s-%s", r.MAC, r.First, r.Last)
	}
	mac := strings.ToLower(r.MAC)
	for range maxLeaseRaces {
		var l Lease
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			var err error
			l, err = s.acquireLease(ctx, tx, mac, r)
			return err
		})
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errLeaseRace) {
			return Lease{}, err
		}
	}
	return Lease{}, fmt.Errorf("acquire lease for %s: lost %d races for an address", mac, maxLeaseRaces)
}

func (s *sqlStore) acquireLease(ctx context.Context, tx *sql.Tx, mac string, r LeaseRequest) (Lease, error) {
	now := s.now()
	expires := now.Add(r.TTL).UnixMicro()
	if r.Static {
		expires = 0
	}
	first, last := ipNum(r.First), ipNum(r.Last)
	var held int64
	err := s.queryRow(ctx, tx, "SELECT ip FROM dhcp_leases WHERE mac = ?"+s.d.forUpdate, mac).Scan(&held)
	switch {
	case err == nil && held >= first && held <= last && !excluded(r.Exclude, held):
		if _, err := s.exec(ctx, tx, "UPDATE dhcp_leases SET expires_at = ?, static = ?, conductor = ?, updated_at = ? WHERE mac = ?",
			expires, r.Static, r.Conductor, now.UnixMicro(), mac); err != nil {
			return Lease{}, fmt.Errorf("renew lease of %s: %w", mac, err)
		}
		return s.lease(numIP(held), mac, r.Static, expires, r.Conductor), nil
	case err == nil:
		// An address outside today's range: give it up for a new one.
		if _, err := s.exec(ctx, tx, "DELETE FROM dhcp_leases WHERE mac = ?", mac); err != nil {
			return Lease{}, fmt.Errorf("drop out-of-range lease of %s: %w", mac, err)
		}
	case !errors.Is(err, sql.ErrNoRows):
		return Lease{}, fmt.Errorf("read lease of %s: %w", mac, err)
	}
	rows, err := s.query(ctx, tx, "SELECT ip FROM dhcp_leases WHERE ip BETWEEN ? AND ? AND (static OR expires_at > ?) ORDER BY ip",
		first, last, now.UnixMicro())
	if err != nil {
		return Lease{}, fmt.Errorf("read leases: %w", err)
	}
	taken := map[int64]bool{}
	for rows.Next() {
		var ip int64
		if err := rows.Scan(&ip); err != nil {
			rows.Close()
			return Lease{}, fmt.Errorf("read leases: %w", err)
		}
		taken[ip] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Lease{}, fmt.Errorf("read leases: %w", err)
	}
	free := first
	for free <= last && (taken[free] || excluded(r.Exclude, free)) {
		free++
	}
	if free > last {
		return Lease{}, fmt.Errorf("lease for %s in %s-%s: %w", mac, r.First, r.Last, ErrNoFreeAddress)
	}
	// The address may hold an expired lease of another MAC: reclaim it.
	if _, err := s.exec(ctx, tx, "DELETE FROM dhcp_leases WHERE ip = ? AND NOT static AND expires_at <= ?", free, now.UnixMicro()); err != nil {
		return Lease{}, fmt.Errorf("reclaim expired lease of %s: %w", numIP(free), err)
	}
	if _, err := s.exec(ctx, tx, "INSERT INTO dhcp_leases (ip, mac, static, expires_at, conductor, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
		free, mac, r.Static, expires, r.Conductor, now.UnixMicro()); err != nil {
		if s.d.uniqueViolation(err) != "" {
			return Lease{}, fmt.Errorf("lease %s to %s: %w", numIP(free), mac, errLeaseRace)
		}
		return Lease{}, fmt.Errorf("lease %s to %s: %w", numIP(free), mac, err)
	}
	return s.lease(numIP(free), mac, r.Static, expires, r.Conductor), nil
}

func (s *sqlStore) lease(ip netip.Addr, mac string, static bool, expires int64, conductor string) Lease {
	l := Lease{IP: ip, MAC: mac, Static: static, Conductor: conductor}
	if !static {
		l.ExpiresAt = time.UnixMicro(expires).UTC()
	}
	return l
}

func excluded(ex []netip.Addr, ip int64) bool {
	for _, a := range ex {
		if a.Is4() && ipNum(a) == ip {
			return true
		}
	}
	return false
}

func (s *sqlStore) ReleaseLease(ctx context.Context, mac string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, "DELETE FROM dhcp_leases WHERE mac = ? AND NOT static", strings.ToLower(mac)); err != nil {
			return fmt.Errorf("release lease of %s: %w", mac, err)
		}
		return nil
	})
}

func (s *sqlStore) ListLeases(ctx context.Context) ([]Lease, error) {
	rows, err := s.query(ctx, s.rdb, "SELECT ip, mac, static, expires_at, conductor FROM dhcp_leases ORDER BY ip")
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var ip, exp int64
		var mac, cond string
		var static bool
		if err := rows.Scan(&ip, &mac, &static, &exp, &cond); err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		out = append(out, s.lease(numIP(ip), mac, static, exp, cond))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}
