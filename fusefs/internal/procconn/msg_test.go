package procconn

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Datagrams received from the proc connector of a 6.18 kernel (x86-64) while python3
// started, renamed itself with prctl(PR_SET_NAME, "renamed") and exited.
const (
	capSubscribeAck = "4c000000030000000000000000000000010000000100000000000000010000002800000000000000010000003b52b44e4f000000000000000000000000000000000000000000000000000000"
	capFork         = "4c0000000300000001000000000000000100000001000000010000000000000028000000010000000100000050f6b64e4f0000009e3f00009c3f0000a03f0000a03f00000000000000000000"
	capExit         = "4c00000003000000020000000000000001000000010000000200000000000000280000000000008001000000757cb74e4f000000a03f0000a03f000000000000000000009e3f00009c3f0000"
	capThread       = "4c000000030000000400000000000000010000000100000004000000000000002800000001000000010000007d57be4e4f0000006e3f00006b3f0000a23f00009c3f00000000000000000000"
	capExec         = "4c00000003000000050000000000000001000000010000000500000000000000280000000200000001000000ee18fb4e4f000000a13f0000a13f000000000000000000000000000000000000"
	capComm         = "4c000000030000005602000000000000010000000100000056020000000000002800000000020000000000000292605550000000464100004641000072656e616d6564000000000000000000"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []Event
	}{
		{"subscription ack", capSubscribeAck, nil},
		{"fork of a process", capFork, []Event{{Kind: KindFork, ParentPid: 16286, ParentTgid: 16284, Pid: 16288, Tgid: 16288}}},
		{"new thread", capThread, []Event{{Kind: KindFork, ParentPid: 16238, ParentTgid: 16235, Pid: 16290, Tgid: 16284}}},
		{"exec", capExec, []Event{{Kind: KindExec, Pid: 16289, Tgid: 16289}}},
		{"comm", capComm, []Event{{Kind: KindComm, Pid: 16710, Tgid: 16710, Comm: "renamed"}}},
		{"exit", capExit, []Event{{Kind: KindExit, Pid: 16288, Tgid: 16288, ParentPid: 16286, ParentTgid: 16284}}},
		{"two messages in one datagram", capExec + capComm, []Event{{Kind: KindExec, Pid: 16289, Tgid: 16289}, {Kind: KindComm, Pid: 16710, Tgid: 16710, Comm: "renamed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMessages(nil, unhex(t, tc.data))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseMessages = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseMessagesDamaged(t *testing.T) {
	full := unhex(t, capFork)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short header", full[:10], "netlink header"},
		{"cut message", full[:60], "netlink message of 76 bytes in 60"},
		{"length below header", append([]byte{4, 0, 0, 0}, full[4:]...), "netlink message of 4 bytes"},
		{"payload beyond message", func() []byte {
			b := append([]byte(nil), full...)
			b[nlmsgHdrLen+16] = 200 // cn_msg len
			return b
		}(), "connector payload of 200 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseMessages(nil, tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Another connector's message and a truncated event are skipped, not errors.
	other := append([]byte(nil), full...)
	other[nlmsgHdrLen] = 7
	short := append([]byte(nil), full...)
	short[nlmsgHdrLen+16] = evHdrLen + 4
	for _, b := range [][]byte{other, short} {
		if evs, err := parseMessages(nil, b); err != nil || len(evs) != 0 {
			t.Errorf("parseMessages = %+v, %v; want nothing, no error", evs, err)
		}
	}
}

func TestMcastMsg(t *testing.T) {
	// The subscription the kernel acknowledged above (capSubscribeAck echoes its op).
	b := mcastMsg(mcastListen)
	if len(b) != 40 || b[0] != 40 || b[nlmsgHdrLen] != cnIdxProc || b[nlmsgHdrLen+16] != 4 || b[nlmsgHdrLen+cnMsgLen] != mcastListen {
		t.Errorf("mcastMsg = %x", b)
	}
}

func FuzzParseMessages(f *testing.F) {
	for _, s := range []string{capFork, capExec, capComm, capExit, capExec + capComm} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseMessages(nil, b)
	})
}
