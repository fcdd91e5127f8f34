package datapath

import (
	"testing"
	"time"
)

// TestCacheWalks: at a full ingress cache, the batched walk (eachEntry)
// meets every entry once, as a walk by key does when nothing changes the
// map; Stats counts the current generation's, Entries hands each of them
// over once, and Age removes the idle and the old ones and nothing else,
// also within a minute of boot.
// The time of each walk is logged.
//
// guest: batched lookups of an LRU hash are the kernel's (Linux 5.6), and 6.1's must meet every entry as 6.18's do
func TestCacheWalks(t *testing.T) {
	f := fastHarness(t)
	gen, now := f.Generation(), monotonicNow()
	n := int(f.objs.FpIn.MaxEntries())
	live := map[fastpathFpKey]bool{}
	for i := range n {
		k := fastpathFpKey{Saddr: uint32(i), Daddr: 1, Sport: uint16(i), Dport: 80, Proto: 6}
		v := fastpathFpIngress{Gen: gen, UsedNs: now}
		switch i % 4 {
		case 1:
			v.Gen = gen - 1 // an older generation's
		case 2:
			v.UsedNs = 1 // idle since boot
		}
		if err := f.objs.FpIn.Put(&k, &v); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	byKey, batched := map[fastpathFpKey]int{}, map[fastpathFpKey]int{}
	t0 := time.Now()
	if err := eachEntryByKey(f.objs.FpIn, func(k *fastpathFpKey, v *fastpathFpIngress) { byKey[*k]++ }); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := eachEntry(f.objs.FpIn, func(k *fastpathFpKey, v *fastpathFpIngress) {
		batched[*k]++
		if v.Gen == gen {
			live[*k] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	t.Logf("%d entries (of %d put; the LRU evicts some before it is full): a walk by key %v, in batches of %d %v",
		len(byKey), n, t1.Sub(t0).Round(time.Millisecond), batchEntries, t2.Sub(t1).Round(time.Millisecond))
	if len(batched) != len(byKey) {
		t.Fatalf("the batched walk met %d entries, the walk by key %d", len(batched), len(byKey))
	}
	for k, c := range batched {
		if c != 1 || byKey[k] != 1 {
			t.Fatalf("entry %+v met %d times in batches, %d by key", k, c, byKey[k])
		}
	}
	st, err := f.Stats()
	if err != nil || st.IngressEntries != len(live) {
		t.Fatalf("Stats: %d ingress entries (%v), want %d", st.IngressEntries, err, len(live))
	}
	handed := map[fastpathFpKey]int{}
	if err := f.Entries(func(e FastEntry) { handed[keyOf(e.Flow)]++ }); err != nil {
		t.Fatal(err)
	}
	for k := range live {
		if handed[k] != 1 {
			t.Fatalf("Entries handed %+v over %d times, want once (%d handed, %d live)", k, handed[k], len(handed), len(live))
		}
	}
	if len(handed) != len(live) {
		t.Errorf("Entries handed over %d entries, want the %d of the generation", len(handed), len(live))
	}
	// Up for less than a minute (a guest), nothing has been idle that
	// long: Age removed every entry then, its cut wrapping below 0.
	idle := 0
	for k := range live {
		if k.Saddr%4 == 2 && monotonicNow() > uint64(time.Minute)+1 {
			idle++
		}
	}
	removed, err := f.Age(time.Minute)
	if err != nil || removed != len(byKey)-len(live)+idle {
		t.Errorf("Age removed %d (%v), want %d", removed, err, len(byKey)-len(live)+idle)
	}
	if st, _ := f.Stats(); st.IngressEntries != len(live)-idle {
		t.Errorf("after Age: %d entries, want %d", st.IngressEntries, len(live)-idle)
	}
}
