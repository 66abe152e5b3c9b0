package erase

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
)

func eraserFor(d *fakeDisk) *Eraser {
	return &Eraser{
		Guard: disk.Guard{Allow: []string{d.path}},
		Open:  func(string) (Disk, error) { return d, nil },
		Log:   slog.New(slog.DiscardHandler),
	}
}

func TestFullEraseNVMeSanitizeCrypto(t *testing.T) {
	d := newFake(8 << 20)
	ctrl, ns := nvmeIdentify(0b111, 0b10, 0b100, 0, 0)
	d.nvme = &fakeNVMe{ctrl: ctrl, ns: ns}
	before := bytes.Clone(d.data)
	res, err := eraserFor(d).Full(t.Context(), d.path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != NVMeSanitizeCrypto || d.nvme.lastCmd != string(NVMeSanitizeCrypto) || res.Checked == 0 {
		t.Errorf("result %+v, last command %q", res, d.nvme.lastCmd)
	}
	if bytes.Equal(before[:4096], d.data[:4096]) || d.settled != 1 {
		t.Error("disk unchanged or not settled")
	}
}

func TestFullEraseNVMeFormat(t *testing.T) {
	d := newFake(4 << 20)
	ctrl, ns := nvmeIdentify(0, 0b10, 0b101, 0, 0) // format, crypto, applies to all namespaces
	d.nvme = &fakeNVMe{ctrl: ctrl, ns: ns}
	res, err := eraserFor(d).Full(t.Context(), d.path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != NVMeFormatCrypto || d.nvme.lastSES != 2 || d.nvme.lastNSID != 0xffffffff {
		t.Errorf("method %s, SES %d, NSID %#x", res.Method, d.nvme.lastSES, d.nvme.lastNSID)
	}
}

func TestFullEraseATA(t *testing.T) {
	d := newFake(4 << 20)
	d.ata = &fakeATA{id: ataIdentifyData(0b100001, 0, 0, 2, 3)}
	res, err := eraserFor(d).Full(t.Context(), d.path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != ATAEnhancedSecurityErase || !d.ata.enhanced {
		t.Errorf("method %s, enhanced %v", res.Method, d.ata.enhanced)
	}
}

func TestFullEraseRefusesFrozenATA(t *testing.T) {
	d := newFake(4 << 20)
	d.ata = &fakeATA{id: ataIdentifyData(0b101001, 0, 0, 0, 0)}
	d.canDiscard = true
	before := bytes.Clone(d.data)
	_, err := eraserFor(d).Full(t.Context(), d.path)
	if err == nil || !strings.Contains(err.Error(), "frozen") || !strings.Contains(err.Error(), d.path) {
		t.Fatalf("err = %v, want a refusal naming the frozen state", err)
	}
	if d.ata.called || !bytes.Equal(before, d.data) || len(d.ops) > 0 {
		t.Error("a refused erase touched the disk")
	}
}

func TestFullEraseFallbacks(t *testing.T) {
	d := newFake(4 << 20)
	d.canDiscard, d.discardZeroes = true, true
	d.ata = &fakeATA{id: ataIdentifyData(0, 1<<14|1<<5, 1, 0, 0)} // TRIM reads zeroes
	res, err := eraserFor(d).Full(t.Context(), d.path)
	if err != nil || res.Method != Discard || !allZero(d.data) {
		t.Fatalf("zeroing discard: %+v, %v", res, err)
	}
	d = newFake(4 << 20)
	d.canDiscard = true // discard without a zero guarantee: overwrite instead
	res, err = eraserFor(d).Full(t.Context(), d.path)
	if err != nil || res.Method != ZeroOverwrite || !allZero(d.data) || res.Checked < 2<<20 {
		t.Fatalf("overwrite: %+v, %v", res, err)
	}
}

// The verifier must never report success on a disk the erase did not
// change, whatever the way the device misbehaves.
func TestVerifyCatchesDevicesThatIgnoreWrites(t *testing.T) {
	ctx := t.Context()
	d := newFake(4 << 20)
	d.ignoreWrites = true
	for name, op := range map[string]func(context.Context, string) (Result, error){
		"full":     eraserFor(d).Full,
		"express":  eraserFor(d).Express,
		"metadata": eraserFor(d).Metadata,
	} {
		_, err := op(ctx, d.path)
		if err == nil || !strings.Contains(err.Error(), "does not keep what is written") {
			t.Errorf("%s on a write-ignoring device: err = %v", name, err)
		}
	}
}

func TestVerifyCatchesNoopHardwareErase(t *testing.T) {
	d := newFake(4 << 20)
	ctrl, ns := nvmeIdentify(0b1, 0, 0, 0, 0)
	d.nvme = &fakeNVMe{ctrl: ctrl, ns: ns, noop: true}
	_, err := eraserFor(d).Full(t.Context(), d.path)
	if err == nil || !strings.Contains(err.Error(), "still holds the data") {
		t.Fatalf("no-op sanitize: err = %v", err)
	}
}

func TestVerifyCatchesDiscardThatLies(t *testing.T) {
	// The drive claims zeroes after TRIM but keeps the data.
	d := newFake(4 << 20)
	d.canDiscard = true
	d.ata = &fakeATA{id: ataIdentifyData(0, 1<<14|1<<5, 1, 0, 0)}
	_, err := eraserFor(d).Full(t.Context(), d.path)
	if err == nil || !strings.Contains(err.Error(), "still holds") {
		t.Fatalf("lying discard: err = %v", err)
	}
}

func TestVerifyCatchesPartialZeroing(t *testing.T) {
	d := newFake(4 << 20)
	p := &partialDisk{d}
	e := &Eraser{Guard: disk.Guard{InRamdisk: true}, Open: func(string) (Disk, error) { return p, nil }, Log: slog.New(slog.DiscardHandler)}
	_, err := e.Full(t.Context(), d.path)
	if err == nil || !strings.Contains(err.Error(), "not zero") && !strings.Contains(err.Error(), "still holds") {
		t.Fatalf("partial overwrite: err = %v", err)
	}
}

// partialDisk zeroes all but 4 KiB near the end (a canary may or may not
// sit there; the read of the last MiB catches it either way).
type partialDisk struct{ *fakeDisk }

func (p *partialDisk) ZeroRange(ctx context.Context, off, n int64) error {
	end := off + n
	clear(p.data[off : end-64<<10])
	clear(p.data[end-60<<10 : end])
	return nil
}

func TestEraseGuard(t *testing.T) {
	d := newFake(1 << 20)
	e := eraserFor(d)
	e.Guard = disk.Guard{Allow: []string{"/dev/loop9"}}
	for _, op := range []func(context.Context, string) (Result, error){e.Full, e.Express, e.Metadata} {
		if _, err := op(t.Context(), d.path); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("err = %v", err)
		}
	}
}

func TestExpressFallsBackToMetadata(t *testing.T) {
	d := newFake(8 << 20)
	res, err := eraserFor(d).Express(t.Context(), d.path)
	if err != nil || res.Method != MetadataOnly {
		t.Fatalf("%+v, %v", res, err)
	}
	// Both edges zeroed, the middle left alone.
	if !allZero(d.data[:1<<20]) || !allZero(d.data[7<<20:]) || allZero(d.data[2<<20:3<<20]) {
		t.Error("metadata regions wrong")
	}
}

func TestMetadataRegions(t *testing.T) {
	d := &fakeDisk{path: "/dev/fake0", data: make([]byte, 300<<20)}
	// A GPT whose backup sits mid-disk (image smaller than the disk).
	hdr := make([]byte, 512)
	copy(hdr, "EFI PART")
	hdr[32] = 0xff // alternate LBA 0x1ff = 511
	hdr[80], hdr[84] = 128, 128
	copy(d.data[512:], hdr)
	rs, err := metadataRegions(d)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.what)
	}
	want := []string{"start of /dev/fake0, backup GPT left inside the disk", "btrfs superblock mirror of /dev/fake0", "end of /dev/fake0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("regions %q, want %q", got, want)
	}
	if rs[1].off != 64<<20 || rs[2].off != 299<<20 || rs[2].n != 1<<20 {
		t.Errorf("regions %+v", rs)
	}
}
