package dist

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzStoreFrame feeds arbitrary bytes to the store's frame reader: it
// must never panic, and whatever it accepts must re-encode to exactly the
// bytes it consumed.
func FuzzStoreFrame(f *testing.F) {
	seeds := []storeMsg{
		{op: storeOpSet, keys: []string{"k"}, vals: [][]byte{[]byte("v")}},
		{op: storeOpGet, arg: 1000, keys: []string{"rank/0"}},
		{op: storeOpAdd, arg: -3, keys: []string{"n"}},
		{op: storeOpWait, arg: 5, keys: []string{"a", "b", "c"}},
		{op: storeOpCompareSet, keys: []string{"k"}, vals: [][]byte{nil, []byte("x")}},
		{op: storeRespOK, arg: 3, vals: [][]byte{{}}},
	}
	for _, m := range seeds {
		b, err := storeAppendFrame(nil, &m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	huge := append(storeFrameMagic[:], storeOpSet)
	f.Add(binary.BigEndian.AppendUint32(huge, 0xffffffff))
	f.Add([]byte("FLKS\x01\x00\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		m, _, err := storeReadFrame(r, nil)
		if err != nil {
			return
		}
		consumed := data[:len(data)-r.Len()]
		again, err := storeAppendFrame(nil, &m)
		if err != nil {
			t.Fatalf("accepted frame does not re-encode: %v", err)
		}
		if !bytes.Equal(again, consumed) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, consumed)
		}
		_ = storeCheckRequest(&m)
	})
}

// FuzzStoreHandshake checks that no client proof other than the one
// computed from the token passes the server's check, and that odd input
// never panics.
func FuzzStoreHandshake(f *testing.F) {
	ns := bytes.Repeat([]byte{7}, storeNonceLen)
	nc := bytes.Repeat([]byte{9}, storeNonceLen)
	good := append(append(append(storeHelloMagic[:], storeVersion), nc...), storeMAC(storeTestToken, storeClientLabel, ns, nc)...)
	f.Add(good)
	f.Add(good[:storeProofLen-1])
	f.Add(append(append(storeHelloMagic[:], storeVersion), make([]byte, storeNonceLen+storeMACLen)...))
	f.Fuzz(func(t *testing.T, proof []byte) {
		err := storeCheckProof(proof, storeTestToken, ns)
		if err == nil && !bytes.Equal(proof, good) {
			t.Fatalf("forged proof %x accepted", proof)
		}
		if err != nil && bytes.Equal(proof, good) {
			t.Fatalf("genuine proof refused: %v", err)
		}
	})
}
