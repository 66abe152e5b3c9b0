package inventory

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func mustHex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tlv encodes one LLDP TLV.
func tlv(typ int, value []byte) []byte {
	h := uint16(typ)<<9 | uint16(len(value))
	return append([]byte{byte(h >> 8), byte(h)}, value...)
}

func TestParseLLDPTLVs(t *testing.T) {
	var pdu []byte
	pdu = append(pdu, tlv(1, mustHex(t, "04001122334455"))...)      // chassis ID, MAC
	pdu = append(pdu, tlv(2, append([]byte{5}, "Ethernet1"...))...) // port ID, ifname
	pdu = append(pdu, tlv(3, []byte{0, 120})...)                    // TTL
	pdu = append(pdu, tlv(127, mustHex(t, "0080c2010064"))...)      // 802.1 PVID 100
	pdu = append(pdu, tlv(5, make([]byte, 300))...)                 // a 9-bit length
	pdu = append(pdu, tlv(0, nil)...)                               // End
	pdu = append(pdu, 0, 0, 0, 0)                                   // padding
	got, err := ParseLLDPTLVs(pdu)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.LLDPTLV{
		{Type: 1, Value: "04001122334455"},
		{Type: 2, Value: "05" + hex.EncodeToString([]byte("Ethernet1"))},
		{Type: 3, Value: "0078"},
		{Type: 127, Value: "0080c2010064"},
		{Type: 5, Value: strings.Repeat("00", 300)},
		{Type: 0, Value: ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	// A TLV claiming more bytes than remain is an error; earlier TLVs survive.
	got, err = ParseLLDPTLVs(append(tlv(1, []byte{4, 1}), 0x04, 0x10, 0xaa))
	if err == nil || len(got) != 1 {
		t.Errorf("truncated TLV: got %+v, %v", got, err)
	}
	if _, err := ParseLLDPTLVs([]byte{0x02}); err == nil {
		t.Error("one-byte header accepted")
	}

	frame := append(append(mustHex(t, "0180c200000e 020000000001 88cc"), tlv(1, []byte{4, 1, 2, 3, 4, 5, 6})...), tlv(0, nil)...)
	if got, err := ParseLLDPFrame(frame); err != nil || len(got) != 2 {
		t.Errorf("frame: %+v, %v", got, err)
	}
	frame[12] = 0x08
	if _, err := ParseLLDPFrame(frame); err == nil {
		t.Error("non-LLDP EtherType accepted")
	}
}

func TestParseCPUInfo(t *testing.T) {
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n\nprocessor\t: 1\nFeatures\t: fp asimd evtstrm\n"
	cpu, err := ParseCPUInfo(strings.NewReader(arm))
	if err != nil {
		t.Fatal(err)
	}
	if cpu.Count != 2 || cpu.SocketCount != 1 || !reflect.DeepEqual(cpu.Flags, []string{"fp", "asimd", "evtstrm"}) {
		t.Errorf("arm cpuinfo: %+v", cpu)
	}
	if _, err := ParseCPUInfo(strings.NewReader("garbage\n")); err == nil {
		t.Error("cpuinfo without processors accepted")
	}
}

func TestParseMemTotal(t *testing.T) {
	got, err := ParseMemTotal(strings.NewReader("MemFree: 1 kB\nMemTotal:   2048 kB\n"))
	if err != nil || got != 2048*1024 {
		t.Errorf("got %d, %v", got, err)
	}
	if _, err := ParseMemTotal(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("meminfo without MemTotal accepted")
	}
}

func FuzzParseLLDPTLVs(f *testing.F) {
	f.Add(append(tlv(1, []byte{4, 0, 1, 2, 3, 4, 5}), tlv(0, nil)...))
	f.Add([]byte{0xfe, 0xff, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, pdu []byte) {
		tlvs, err := ParseLLDPTLVs(pdu)
		total := 0
		for _, v := range tlvs {
			if v.Type < 0 || v.Type > 127 || len(v.Value)%2 != 0 {
				t.Fatalf("bad TLV %+v", v)
			}
			total += 2 + len(v.Value)/2
		}
		if total > len(pdu) {
			t.Fatalf("parsed %d bytes out of %d", total, len(pdu))
		}
		if err == nil && len(tlvs) > 0 && tlvs[len(tlvs)-1].Type != 0 && total != len(pdu) {
			t.Fatalf("stopped early without End TLV or error")
		}
	})
}
