package zk

import (
	"errors"
	"reflect"
	"testing"
)

// TestEncodeDecodeRoundTrip encodes packets of each kind of field
// (integers, booleans, strings, byte strings nil and not, slices of
// strings and of structs, nested structs, a struct with its own
// Encode/Decode holding an interface) and decodes them back.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, out  any
		wantSize int
	}{
		{"create", &CreateRequest{Path: "/a/b", Data: []byte("data"), Acl: []ACL{{PermAll, "world", "anyone"}, {PermRead, "digest", "u:p"}}, Flags: FlagEphemeral | FlagSequence},
			&CreateRequest{}, 4 + 4 + 4 + 4 + 4 + (4 + 4 + 5 + 4 + 6) + (4 + 4 + 6 + 4 + 3) + 4},
		{"nil bytes", &getDataResponse{Data: nil, Stat: Stat{Czxid: 1, Mzxid: -2, Version: 3, NumChildren: 4, Pzxid: 1 << 40}},
			&getDataResponse{}, 4 + 68},
		{"connect", &connectRequest{ProtocolVersion: 0, LastZxidSeen: 1<<33 + 5, TimeOut: 30000, SessionID: -7, Passwd: make([]byte, 16)},
			&connectRequest{}, 4 + 8 + 4 + 8 + 4 + 16},
		{"watches", &setWatchesRequest{RelativeZxid: 9, DataWatches: []string{"/d"}, ExistWatches: []string{}, ChildWatches: []string{"/c1", "/c2"}},
			&setWatchesRequest{}, 8 + (4 + 6) + 4 + (4 + 7 + 7)},
		{"multi", &multiRequest{
			Ops: []multiRequestOp{
				{multiHeader{Type: opCreate, Done: false, Err: -1}, &CreateRequest{Path: "/m", Data: []byte{}, Acl: []ACL{}, Flags: 0}},
				{multiHeader{Type: opDelete, Done: false, Err: -1}, &DeleteRequest{Path: "/m", Version: 2}},
			},
			DoneHeader: multiHeader{Type: -1, Done: true, Err: -1},
		}, &multiRequest{}, 9 + (6 + 4 + 4 + 4) + 9 + (6 + 4) + 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 1024)
			n, err := encodePacket(buf, tc.in)
			if err != nil || n != tc.wantSize {
				t.Fatalf("encodePacket = %d, %v; want %d, nil", n, err, tc.wantSize)
			}
			m, err := decodePacket(buf[:n], tc.out)
			if err != nil || m != n {
				t.Fatalf("decodePacket = %d, %v; want %d, nil", m, err, n)
			}
			if !reflect.DeepEqual(tc.out, tc.in) {
				t.Errorf("decoded %+v; want %+v", tc.out, tc.in)
			}
			if _, err := encodePacket(buf[:n-1:n-1], tc.in); !errors.Is(err, ErrShortBuffer) {
				t.Errorf("encodePacket in %d bytes: %v; want ErrShortBuffer", n-1, err)
			}
			fresh := reflect.New(reflect.TypeOf(tc.out).Elem()).Interface()
			if _, err := decodePacket(buf[:n-1:n-1], fresh); !errors.Is(err, ErrShortBuffer) {
				t.Errorf("decodePacket of %d of %d bytes: %v; want ErrShortBuffer", n-1, n, err)
			}
		})
	}
	if _, err := encodePacket(make([]byte, 16), CreateRequest{}); !errors.Is(err, ErrPtrExpected) {
		t.Errorf("encodePacket of a struct value: %v; want ErrPtrExpected", err)
	}
	if _, err := decodePacket(make([]byte, 16), getDataResponse{}); !errors.Is(err, ErrPtrExpected) {
		t.Errorf("decodePacket into a struct value: %v; want ErrPtrExpected", err)
	}
}
