package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errIPMITimeout = errors.New("no IPMI response within 5s")

// BMC is what the in-band IPMI interface reports about the BMC's LAN channel.
type BMC struct {
	IPv4 string // "" when unset or 0.0.0.0
	MAC  string
}

// OpenIPMI character-device interface (linux/ipmi.h). Pointer fields are
// unsafe.Pointer so the garbage collector tracks what the kernel reads.
const (
	ipmiSystemInterfaceAddrType = 0x0c
	ipmiBMCChannel              = 0x0f
	netfnTransport              = 0x0c
	cmdGetLANConfig             = 0x02
	lanParamIP                  = 3
	lanParamMAC                 = 5
)

type ipmiSystemInterfaceAddr struct {
	AddrType int32
	Channel  int16
	LUN      uint8
	_        uint8
}

type ipmiMsg struct {
	NetFn   uint8
	Cmd     uint8
	DataLen uint16
	_       [4]byte
	Data    unsafe.Pointer
}

type ipmiReq struct {
	Addr    unsafe.Pointer
	AddrLen uint32
	_       [4]byte
	MsgID   int64
	Msg     ipmiMsg
}

type ipmiRecv struct {
	RecvType int32
	_        [4]byte
	Addr     unsafe.Pointer
	AddrLen  uint32
	_        [4]byte
	MsgID    int64
	Msg      ipmiMsg
}

// ioctl numbers from linux/ipmi.h for 64-bit kernels:
// _IOR('i', 13, struct ipmi_req) and _IOWR('i', 11, struct ipmi_recv).
var (
	ipmictlSendCommand     = ior('i', 13, unsafe.Sizeof(ipmiReq{}))
	ipmictlReceiveMsgTrunc = iowr('i', 11, unsafe.Sizeof(ipmiRecv{}))
)

func ior(t, nr, size uintptr) uintptr  { return 2<<30 | size<<16 | t<<8 | nr }
func iowr(t, nr, size uintptr) uintptr { return 3<<30 | size<<16 | t<<8 | nr }

// ReadBMC asks the BMC, through the OpenIPMI device (/dev/ipmi0), for the IP
// and MAC address of LAN channels 1 to 8 and returns the first channel with a
// non-zero IPv4 address (IPA does the same with ipmitool). IPv6 is not
// queried: bmc_v6address stays "::/0".
func ReadBMC(ctx context.Context, device string) (BMC, error) {
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return BMC{}, fmt.Errorf("open %s: %w", device, err)
	}
	defer f.Close()
	var first BMC
	for ch := byte(1); ch <= 8; ch++ {
		if ctx.Err() != nil {
			return first, ctx.Err()
		}
		ip, err := lanParam(ctx, f, ch, lanParamIP)
		if errors.Is(err, errIPMITimeout) {
			return first, err // an unresponsive BMC would cost 5 s per channel
		}
		if err != nil || len(ip) < 4 {
			continue
		}
		addr := net.IP(ip[:4]).String()
		mac, _ := lanParam(ctx, f, ch, lanParamMAC)
		b := BMC{}
		if len(mac) >= 6 {
			b.MAC = net.HardwareAddr(mac[:6]).String()
		}
		if addr != "0.0.0.0" {
			b.IPv4 = addr
			return b, nil
		}
		if first.MAC == "" {
			first = b
		}
	}
	return first, nil
}

// lanParam sends Get LAN Configuration Parameters for one channel and
// parameter and returns the parameter data (after completion code and
// revision byte).
func lanParam(ctx context.Context, f *os.File, channel, param byte) ([]byte, error) {
	addr := ipmiSystemInterfaceAddr{AddrType: ipmiSystemInterfaceAddrType, Channel: ipmiBMCChannel}
	data := []byte{channel, param, 0, 0}
	req := ipmiReq{
		Addr:    unsafe.Pointer(&addr),
		AddrLen: uint32(unsafe.Sizeof(addr)),
		MsgID:   int64(channel)<<8 | int64(param),
		Msg:     ipmiMsg{NetFn: netfnTransport, Cmd: cmdGetLANConfig, DataLen: uint16(len(data)), Data: unsafe.Pointer(&data[0])},
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ipmictlSendCommand, uintptr(unsafe.Pointer(&req))); e != 0 {
		return nil, fmt.Errorf("send IPMI request: %w", e)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 500)
		if err != nil && err != unix.EINTR {
			return nil, fmt.Errorf("wait for IPMI response: %w", err)
		}
		if n > 0 {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, errIPMITimeout
		}
	}
	var raddr ipmiSystemInterfaceAddr
	buf := make([]byte, 64)
	recv := ipmiRecv{
		Addr:    unsafe.Pointer(&raddr),
		AddrLen: uint32(unsafe.Sizeof(raddr)),
		Msg:     ipmiMsg{DataLen: uint16(len(buf)), Data: unsafe.Pointer(&buf[0])},
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ipmictlReceiveMsgTrunc, uintptr(unsafe.Pointer(&recv))); e != 0 && e != unix.EMSGSIZE {
		return nil, fmt.Errorf("receive IPMI response: %w", e)
	}
	resp := buf[:recv.Msg.DataLen]
	if len(resp) < 2 || resp[0] != 0 {
		return nil, fmt.Errorf("IPMI Get LAN Configuration (channel %d, parameter %d) failed: %x", channel, param, resp)
	}
	return resp[2:], nil
}
