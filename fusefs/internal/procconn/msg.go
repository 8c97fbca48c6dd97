package procconn

import (
	"encoding/binary"
	"fmt"
)

// Wire constants of the proc connector (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc = 1 // CN_IDX_PROC: the connector's index, also its multicast group
	cnValProc = 1 // CN_VAL_PROC

	mcastListen = 1 // PROC_CN_MCAST_LISTEN
	mcastIgnore = 2 // PROC_CN_MCAST_IGNORE

	nlmsgHdrLen = 16 // struct nlmsghdr
	cnMsgLen    = 20 // struct cn_msg without its data
	evHdrLen    = 16 // struct proc_event up to event_data: what, cpu, timestamp_ns
	nlmsgDone   = 3  // NLMSG_DONE, the type the connector sends its messages with
	nlmsgError  = 2  // NLMSG_ERROR
	commLen     = 16 // TASK_COMM_LEN
)

// Kind is a proc connector event type (enum what in struct proc_event).
type Kind uint32

// The event types the resolver uses; others are parsed as Other.
const (
	KindNone Kind = 0
	KindFork Kind = 0x00000001
	KindExec Kind = 0x00000002
	KindComm Kind = 0x00000200
	KindExit Kind = 0x80000000
)

// Event is one parsed proc connector event. Pid and Tgid are the thread and its process
// (for a fork, the child's); ParentPid and ParentTgid are the forking thread and its
// process for a fork, and the parent for an exit.
type Event struct {
	Kind       Kind
	Pid, Tgid  uint32
	ParentPid  uint32
	ParentTgid uint32
	Comm       string // KindComm: the thread's new name
}

// parseMessages parses the events in one datagram received from the connector socket (one
// or more netlink messages). It appends to evs and returns it; a message that is not a
// proc event (another connector, a NLMSG_ERROR ack, an unknown type) is skipped, and a
// message shorter than its headers or than its declared length is an error.
func parseMessages(evs []Event, b []byte) ([]Event, error) {
	le := binary.LittleEndian // netlink is host order; iotap builds for little-endian Linux
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return evs, fmt.Errorf("procconn: %d bytes left, a netlink header needs %d", len(b), nlmsgHdrLen)
		}
		n := int(le.Uint32(b))
		typ := le.Uint16(b[4:])
		if n < nlmsgHdrLen || n > len(b) {
			return evs, fmt.Errorf("procconn: netlink message of %d bytes in %d", n, len(b))
		}
		msg := b[nlmsgHdrLen:n]
		if adv := (n + 3) &^ 3; adv < len(b) {
			b = b[adv:]
		} else {
			b = nil
		}
		if typ == nlmsgError || len(msg) < cnMsgLen {
			continue
		}
		if le.Uint32(msg) != cnIdxProc || le.Uint32(msg[4:]) != cnValProc {
			continue
		}
		dl := int(le.Uint16(msg[16:]))
		data := msg[cnMsgLen:]
		if dl > len(data) {
			return evs, fmt.Errorf("procconn: connector payload of %d bytes in %d", dl, len(data))
		}
		data = data[:dl]
		if len(data) < evHdrLen {
			continue // an ack of the subscription (4 bytes of data)
		}
		what := Kind(le.Uint32(data))
		d := data[evHdrLen:]
		var ev Event
		switch what {
		case KindFork:
			if len(d) < 16 {
				continue
			}
			ev = Event{Kind: what, ParentPid: le.Uint32(d), ParentTgid: le.Uint32(d[4:]), Pid: le.Uint32(d[8:]), Tgid: le.Uint32(d[12:])}
		case KindExec:
			if len(d) < 8 {
				continue
			}
			ev = Event{Kind: what, Pid: le.Uint32(d), Tgid: le.Uint32(d[4:])}
		case KindComm:
			if len(d) < 8+commLen {
				continue
			}
			c := d[8 : 8+commLen]
			for i, x := range c {
				if x == 0 {
					c = c[:i]
					break
				}
			}
			ev = Event{Kind: what, Pid: le.Uint32(d), Tgid: le.Uint32(d[4:]), Comm: string(c)}
		case KindExit:
			if len(d) < 8 {
				continue
			}
			ev = Event{Kind: what, Pid: le.Uint32(d), Tgid: le.Uint32(d[4:])}
			if len(d) >= 24 {
				ev.ParentPid, ev.ParentTgid = le.Uint32(d[16:]), le.Uint32(d[20:])
			}
		default:
			continue
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// mcastMsg is the message that subscribes (op mcastListen) or unsubscribes a socket.
func mcastMsg(op uint32) []byte {
	le := binary.LittleEndian
	b := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le.PutUint32(b, uint32(len(b)))
	le.PutUint16(b[4:], nlmsgDone)
	// flags, seq, pid: 0 (the kernel addresses the connector by the message's cn id)
	c := b[nlmsgHdrLen:]
	le.PutUint32(c, cnIdxProc)
	le.PutUint32(c[4:], cnValProc)
	le.PutUint16(c[16:], 4)
	le.PutUint32(c[cnMsgLen:], op)
	return b
}
