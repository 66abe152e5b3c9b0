package inventory

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/proto"
)

// ethPLLDP is the LLDP EtherType.
const ethPLLDP = 0x88cc

// lldpMulticast is the nearest-bridge group address LLDP frames are sent to.
var lldpMulticast = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}

// ParseLLDPTLVs splits an LLDP data unit (the Ethernet payload) into TLVs, up
// to and including the End TLV. Each TLV header is 7 bits of type and 9 bits of
// length. A truncated TLV is an error; what was parsed before it is returned.
func ParseLLDPTLVs(pdu []byte) ([]proto.LLDPTLV, error) {
	tlvs := []proto.LLDPTLV{}
	for len(pdu) > 0 {
		if len(pdu) < 2 {
			return tlvs, fmt.Errorf("LLDP TLV header truncated: %d byte(s) left", len(pdu))
		}
		h := binary.BigEndian.Uint16(pdu)
		typ, n := int(h>>9), int(h&0x1ff)
		if len(pdu) < 2+n {
			return tlvs, fmt.Errorf("LLDP TLV type %d: length %d exceeds the %d bytes left", typ, n, len(pdu)-2)
		}
		tlvs = append(tlvs, proto.LLDPTLV{Type: typ, Value: hex.EncodeToString(pdu[2 : 2+n])})
		pdu = pdu[2+n:]
		if typ == 0 {
			break
		}
	}
	return tlvs, nil
}

// ParseLLDPFrame checks an Ethernet frame is LLDP and parses its TLVs.
func ParseLLDPFrame(frame []byte) ([]proto.LLDPTLV, error) {
	if len(frame) < 14 {
		return nil, fmt.Errorf("frame of %d bytes is shorter than an Ethernet header", len(frame))
	}
	if et := binary.BigEndian.Uint16(frame[12:14]); et != ethPLLDP {
		return nil, fmt.Errorf("EtherType %#04x is not LLDP", et)
	}
	return ParseLLDPTLVs(frame[14:])
}

// ListenLLDP waits up to timeout for one LLDP frame on each named interface,
// in parallel, and returns the TLVs of the interfaces that got one. Switches
// send LLDP every 30 s by default, hence IPA's 30 s default. The links must be
// up. An interface whose socket cannot be opened is reported in the error;
// the others are still collected.
func ListenLLDP(ctx context.Context, ifaces []string, timeout time.Duration) (map[string][]proto.LLDPTLV, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		out  = map[string][]proto.LLDPTLV{}
	)
	for _, name := range ifaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tlvs, err := listenOne(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("LLDP on %s: %w", name, err))
				return
			}
			if tlvs != nil {
				out[name] = tlvs
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// listenOne returns the first LLDP frame's TLVs on one interface, or nil when
// ctx ends first.
func listenOne(ctx context.Context, name string) ([]proto.LLDPTLV, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(ethPLLDP)))
	if err != nil {
		return nil, fmt.Errorf("open packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(ethPLLDP), Ifindex: ifc.Index}); err != nil {
		return nil, fmt.Errorf("bind packet socket: %w", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifc.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mreq.Address[:], lldpMulticast[:])
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return nil, fmt.Errorf("join LLDP multicast group: %w", err)
	}
	buf := make([]byte, 9000)
	for {
		// Poll in short slices so cancellation is noticed promptly.
		wait := 200 * time.Millisecond
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if ctx.Err() != nil || wait <= 0 {
			return nil, nil
		}
		tv := unix.NsecToTimeval(wait.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, fmt.Errorf("set receive timeout: %w", err)
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, fmt.Errorf("receive: %w", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // our own transmission, not a neighbour's
		}
		if tlvs, err := ParseLLDPFrame(buf[:n]); err == nil {
			return tlvs, nil
		}
	}
}
