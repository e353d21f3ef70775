package kernels

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"jspark/kernels/quant"
)

// TestPrefault: after Prefault every page of a fresh buffer is mapped, so
// the step that first writes it takes no page faults.
func TestPrefault(t *testing.T) {
	b, err := HostMemory{}.Alloc(quant.F32, 16<<20) // 64 MiB: fresh pages
	if err != nil {
		t.Fatal(err)
	}
	Prefault(HostMemory{}, b)
	data := HostBytes(b)
	page := unix.Getpagesize()
	off := int(uintptr(unsafe.Pointer(&data[0])) % uintptr(page))
	span := data[(page-off)%page:]
	span = span[:len(span)/page*page]
	vec := make([]byte, len(span)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&span[0])), uintptr(len(span)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d pages not resident after Prefault", missing, len(vec))
	}
}

// TestAllocAdvisesHugePages: a large buffer's mapping carries the huge
// page advice (VmFlags hg in /proc/self/smaps).
func TestAllocAdvisesHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages off here (%q, %v)", strings.TrimSpace(string(mode)), err)
	}
	b, err := HostMemory{}.Alloc(quant.F32, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	addr := uintptr(unsafe.Pointer(&HostBytes(b)[0])) + 2<<20 // inside the advised range
	flags, err := vmFlags(addr)
	if err != nil {
		t.Skip(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Fatalf("the buffer's mapping has VmFlags %q, without hg", flags)
	}
}

// vmFlags returns the VmFlags of the mapping holding addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
