package inventory

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/kilnhq/kiln/proto"
)

// TestListenLLDPVeth sends an LLDP frame into one end of a veth pair and
// expects ListenLLDP on the other end to report its TLVs.
func TestListenLLDPVeth(t *testing.T) {
	testtool.Need(t, "ip")
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a veth pair")
	}
	a, b := fmt.Sprintf("klldpa%d", os.Getpid()%10000), fmt.Sprintf("klldpb%d", os.Getpid()%10000)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	run("link", "set", a, "up")
	run("link", "set", b, "up")

	ifa, err := net.InterfaceByName(a)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(ethPLLDP)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	payload := append(append(append(tlv(1, []byte{4, 2, 0, 0, 0, 0, 1}), tlv(2, append([]byte{5}, "swp7"...))...), tlv(3, []byte{0, 120})...), tlv(0, nil)...)
	frame := append(append(append(lldpMulticast[:], ifa.HardwareAddr...), 0x88, 0xcc), payload...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		addr := &unix.SockaddrLinklayer{Ifindex: ifa.Index, Halen: 6, Protocol: htons(ethPLLDP)}
		copy(addr.Addr[:], lldpMulticast[:])
		for ctx.Err() == nil {
			_ = unix.Sendto(fd, frame, 0, addr)
			time.Sleep(100 * time.Millisecond)
		}
	}()

	got, err := ListenLLDP(ctx, []string{b}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.LLDPTLV{{Type: 1, Value: "04020000000001"}, {Type: 2, Value: "0573777037"}, {Type: 3, Value: "0078"}, {Type: 0, Value: ""}}
	if fmt.Sprint(got[b]) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}

	// An interface that hears nothing (it only sends) yields no entry,
	// within the timeout.
	start := time.Now()
	got, err = ListenLLDP(context.Background(), []string{a}, 300*time.Millisecond)
	if err != nil || len(got) != 0 || time.Since(start) > 3*time.Second {
		t.Errorf("silent interface: %v, %v after %v", got, err, time.Since(start))
	}
	if _, err := ListenLLDP(context.Background(), []string{"nonexistent0"}, 100*time.Millisecond); err == nil {
		t.Error("unknown interface gave no error")
	}
}
