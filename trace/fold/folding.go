package fold

import "github.com/iotap/iotap/trace"

// feed1 folds one event: it folds kernel-generated requests into the call they belong
// to, merges split reads and writes, and holds or emits the resulting call.
func (f *Folder) feed1(ev *trace.Event) {
	f.Stats.Events++
	if f.OnEvent != nil {
		f.OnEvent(ev)
	}
	if ev.Op < trace.NumOps {
		f.Stats.ByOp[ev.Op]++
	}
	if f.feedEnd(ev) {
		return
	}
	if ev.Mapped() {
		f.fault(ev)
		return
	}
	if ev.Op == trace.OpWrite && ev.Errno == 0 {
		if h := f.handles[ev.Handle]; h != nil {
			h.pos = ev.Offset + ev.Ret // also for a piece merged below
		}
	}
	pi, pi2, ok := f.eventPaths(ev)
	if !ok {
		return
	}
	t := f.thread(ev.Tid)
	if ev.Op == trace.OpGetxattr && f.probeInWrite(ev, t) {
		return
	}
	if ev.Op == trace.OpLookup && !f.opts.NoFold {
		f.holdLookup(ev, t, pi)
		return
	}
	walk, fd := f.foldWalk(ev, t, pi, pi2)
	if ev.Op == trace.OpGetattr && !f.opts.NoFold {
		if n := len(t.held); n > 0 && t.held[n-1].Rec == trace.OpGetxattr && t.held[n-1].Name == pi.name {
			c := f.base(ev, pi, nil)
			c.Kind = Stat
			t.push(&c)
			return
		}
	}
	// Another thread's held calls on a name this call creates or removes happened before it:
	// issue them first, or they would see the name the other way (rm's lookup of a
	// directory the next command creates).
	if changesName(ev.Op) && ev.Errno == 0 && len(f.holding) > 0 {
		f.releaseUnder(ev.Tid, pi.name, ev.Start)
		if pi2 != nil {
			f.releaseUnder(ev.Tid, pi2.name, ev.Start)
		}
	}
	if f.mergePiece(ev, t) {
		return
	}
	f.release(ev.Tid)

	c := f.base(ev, pi, pi2)
	c.Walk = walk
	c.fold(fd)
	if !f.setKind(ev, &c, pi, pi2) {
		return
	}
	if c.Kind == Getxattr && c.Size == 0 && !f.opts.NoFold && len(t.held) == 0 {
		t.push(&c) // maybe the kernel's privilege probe: see foldWalk
		return
	}
	if c.Kind == Read || c.Kind == Write {
		if n := len(t.held); n == 0 { // hold it: the next piece may merge into it
			t.push(&c)
			return
		}
	}
	f.emit(&c)
}

// fault folds pages of a mapped file that page faults brought in or made dirty
// (trace.Event.Mapped): a read or write that is no system call of the thread's, so none of
// its held lookups or probes folds into it and it merges with nothing. It uses the handle
// the file was mapped through while that is open. A mapping outlives its descriptor: a
// fault after the handle's release uses an open of the file the trace never showed
// (Call.Implicit), made at the file's first such fault and kept to the end.
func (f *Folder) fault(ev *trace.Event) {
	pi, _, ok := f.eventPaths(ev)
	if !ok {
		return
	}
	f.release(ev.Tid)
	c := f.base(ev, pi, nil)
	c.Kind = Read
	if ev.Op == trace.OpWrite {
		c.Kind = Write
	}
	h := f.handles[ev.Handle]
	if h == nil || h.dir || (ev.Node != 0 && h.node != 0 && h.node != ev.Node) {
		h = f.mapOpen(ev, pi) // released, or the number is another file's now
	}
	c.Slot = h.slot
	f.emit(&c)
}

// mapOpen returns the open file of the mapped file ev names for its faults after the
// close of the handle it was mapped through, adding its implicit open the first time.
func (f *Folder) mapOpen(ev *trace.Event, pi *pathInfo) *handleState {
	key := mapKey{node: ev.Node}
	if key.node == 0 { // a hand-made trace: the path stands for the file
		key.path = ev.Path
	}
	if h := f.mapOpens[key]; h != nil {
		return h
	}
	c := f.base(ev, pi, nil)
	c.Kind, c.Rec, c.Implicit = Open, trace.OpOpen, true
	c.Offset, c.Size, c.Flags, c.Errno, c.Ret, c.Dur, c.Events = 0, 0, 0, 0, 0, 0, 0
	h := f.newHandle()
	*h = handleState{worker: c.Worker, slot: f.allocSlot(), pathID: c.PathID, node: ev.Node}
	c.Slot = h.slot
	f.mapOpens[key] = h
	f.Stats.Implicit++
	f.emit(&c)
	return h
}

// feedEnd takes the events that end a handle or a node rather than become a call of
// their own (forget, flush, release), and reports whether ev was one.
func (f *Folder) feedEnd(ev *trace.Event) bool {
	switch ev.Op {
	case trace.OpForget:
		f.Stats.Folded[ev.Op]++
		return true
	case trace.OpFlush:
		if h := f.handleOf(ev); h != nil {
			h.flushed, h.flushErr, h.flushStart, h.flushDur = true, ev.Errno, ev.Start, ev.Dur
			h.flushCall = [2]int64{ev.CallStart, ev.CallEnd}
			h.flushPre = eventPre(ev)
			// A close ends the reads and writes held for merging on the handle.
			f.releaseOn(h.slot)
		}
		f.Stats.Folded[ev.Op]++
		return true
	case trace.OpRelease, trace.OpReleasedir:
		f.close(ev)
		return true
	}
	return false
}

// eventPaths returns ev's paths (pi2 for a second operand other than a symlink's target),
// or false, counting the event, when one is unknown or leaves the root.
func (f *Folder) eventPaths(ev *trace.Event) (pi, pi2 *pathInfo, ok bool) {
	pi = f.path(ev.Path)
	if pi.bad && ev.Op != trace.OpStatfs {
		if ev.Path == 0 || (len(pi.name) > 0 && pi.name[0] == '?') {
			f.Stats.Unknown++
		} else {
			f.Stats.Escapes++
		}
		return nil, nil, false
	}
	if ev.Path2 != 0 && ev.Op != trace.OpSymlink {
		pi2 = f.path(ev.Path2)
		if pi2.bad {
			f.Stats.Escapes++
			return nil, nil, false
		}
	}
	return pi, pi2, true
}

// holdLookup holds a lookup: it may be a step of the path walk of the thread's next call.
// A held lookup of an ancestor of this one was a step of this one's walk: it is folded.
func (f *Folder) holdLookup(ev *trace.Event, t *threadState, pi *pathInfo) {
	walk := pi.parent
	var fd folded
	if t.holdsAncestor(pi.name) {
		fd = t.dropHeld(f, func(h *Call) bool {
			if h.Kind == Stat && h.Rec == trace.OpLookup && IsUnder(pi.name, h.Name) && h.Name != pi.name {
				if len(h.Walk) < len(walk) {
					walk = h.Walk
				}
				return true
			}
			return false
		})
	}
	if n := len(t.held); n > 0 && t.held[n-1].Kind != Stat {
		f.release(ev.Tid) // a held read or write ends when the thread does something else
	}
	c := f.base(ev, pi, nil)
	c.Kind, c.Walk = Stat, walk
	c.fold(fd)
	t.push(&c)
	if len(t.held) > 32 {
		f.emit(&t.held[0])
		t.held[0] = Call{}
		t.held = t.held[1:]
	}
}

// probeInWrite folds a getxattr into the thread's held write when it is the kernel's
// privilege probe of that very system call: a write kernel passthrough served asks the
// layer for security.capability from within the call (the kernel drops set-ID bits and
// capabilities before it writes), after the call began. The probe's round trip is FUSE's
// part of the write's time (Idle); its backend time is the storage's, as for the probe a
// write through the layer sends before it.
func (f *Folder) probeInWrite(ev *trace.Event, t *threadState) bool {
	if f.opts.NoFold || ev.Size != 0 || ev.CallStart == 0 || len(t.held) == 0 {
		return false
	}
	h := &t.held[len(t.held)-1]
	if !h.Passthrough || h.Kind != Write || h.CallStart != ev.CallStart || h.PathID != ev.Path {
		return false
	}
	h.Reqs = uint16(min(int(h.Reqs)+1, 1<<16-1))
	h.FoldDur += ev.Dur
	if ev.HasLegs() {
		h.Idle += min(ev.Done-ev.Queued, h.Dur-h.Idle)
	}
	f.Stats.Folded[ev.Op]++
	return true
}

// foldWalk folds the held requests that were part of ev's call: the lookups of its path
// walk (within FoldWindow), and the kernel's privilege probe before a setattr or write. It
// returns the directory the walk started from and what was folded.
func (f *Folder) foldWalk(ev *trace.Event, t *threadState, pi, pi2 *pathInfo) (walk string, fd folded) {
	walk = pi.parent
	if len(t.held) > 0 {
		fd = t.dropHeld(f, func(h *Call) bool {
			if h.Kind != Stat || h.Rec != trace.OpLookup || ev.Start-(h.Start+h.Dur) > f.opts.FoldWindow {
				return false
			}
			if IsUnder(pi.name, h.Name) {
				if len(h.Walk) < len(walk) {
					walk = h.Walk
				}
				return true
			}
			return pi2 != nil && IsUnder(pi2.name, h.Name)
		})
	}
	// The kernel probes security.capability (getxattr, size 0) and refreshes attributes
	// (getattr) before a chown, truncate or write that may have to drop privileges: a
	// replayed setattr or write makes it do so again.
	if (ev.Op == trace.OpSetattr || ev.Op == trace.OpWrite) && len(t.held) > 0 && !f.opts.NoFold {
		more := t.dropHeld(f, func(h *Call) bool {
			return (h.Rec == trace.OpGetxattr || h.Rec == trace.OpGetattr) && h.Name == pi.name &&
				ev.Start-(h.Start+h.Dur) <= f.opts.FoldWindow
		})
		fd.reqs, fd.dur = fd.reqs+more.reqs, fd.dur+more.dur
		if more.callStart != 0 && (fd.callStart == 0 || more.callStart < fd.callStart) {
			fd.pre = more.pre
		}
		fd.callStart, fd.callEnd = widenCall(fd.callStart, fd.callEnd, more.callStart, more.callEnd)
	}
	return walk, fd
}

// mergePiece merges a read or write into the thread's held piece of the same buffer (a
// large request the kernel split), and reports whether it did. Where the kernel's legs
// were measured, pieces of one system call name it (the same entry time in a read or write
// call): a 1 MiB read into an aligned buffer is eight 128 KiB requests and one call.
// Otherwise a split shows as a first piece of at least 64 KiB that is not page aligned
// (1 MiB as 1048560+16 bytes with an unaligned buffer), followed within MergeGap.
//
// A read or write kernel passthrough served is a whole call: it merges with nothing.
func (f *Folder) mergePiece(ev *trace.Event, t *threadState) bool {
	if (ev.Op != trace.OpRead && ev.Op != trace.OpWrite) || len(t.held) == 0 || ev.Passthrough {
		return false
	}
	h := &t.held[len(t.held)-1]
	if h.Passthrough || h.Rec != ev.Op || h.Handle != ev.Handle || h.Errno != 0 || ev.Errno != 0 ||
		h.Ret != h.Size || h.Offset+h.Size != ev.Offset {
		return false
	}
	oneCall := ev.CallStart != 0 && ev.CallStart == h.CallStart && h.rwSyscall && rwCall(ev.CallNr)
	split := h.Size >= 64<<10 && h.Size%4096 != 0 && ev.Start-(h.Start+h.Dur) <= f.opts.MergeGap
	if oneCall || split {
		h.Size += int64(ev.Size)
		h.Ret += ev.Ret
		if gap := ev.Start - (h.Start + h.Dur); gap > 0 {
			h.Idle += gap
		}
		h.Dur = max(ev.End(), h.Start+h.Dur) - h.Start
		h.Events++
		h.widen(ev.CallStart, ev.CallEnd, eventPre(ev))
		f.Stats.Merged++
		f.Stats.Folded[ev.Op]++
		return true
	}
	return false
}

// rwCall reports whether system call nr reads or writes one buffer or vector of one file
// (not io_submit or io_uring_enter, whose requests of one entry are separate I/Os). A
// trace does not name its recorder's architecture, so the numbers are those of x86-64 and
// of arm64 together: none of either's read and write calls is the other's aio or io_uring
// call, nor any call that sends a read or write.
func rwCall(nr uint16) bool {
	switch nr {
	case 0, 1, 17, 18, 19, 20, 295, 296, 327, 328: // x86-64: read, write, pread64, pwrite64, readv, writev, preadv, pwritev, preadv2, pwritev2
		return true
	case 63, 64, 65, 66, 67, 68, 69, 70, 286, 287: // arm64: read, write, readv, writev, pread64, pwrite64, preadv, pwritev, preadv2, pwritev2
		return true
	}
	return false
}

// setKind chooses the call ev stands for, with the handles it uses. It returns false
// when the call cannot be formed (counted).
func (f *Folder) setKind(ev *trace.Event, c *Call, pi, pi2 *pathInfo) bool {
	switch ev.Op {
	case trace.OpGetattr, trace.OpStatx:
		c.Kind = Stat
		if pi.hasOpen {
			if h := f.handles[pi.open]; h != nil && h.worker == ev.Tid {
				c.Kind, c.Handle, c.Slot = Fstat, pi.open, h.slot
			}
		}
	case trace.OpLookup: // NoFold
		c.Kind = Stat
	case trace.OpSetattr:
		f.setattrKind(ev, c)
	case trace.OpReadlink:
		c.Kind = Readlink
	case trace.OpSymlink:
		c.Kind = Symlink
		c.Name2 = f.names.PathName(ev.Path2)
	case trace.OpMknod:
		c.Kind = Mknod
	case trace.OpMkdir:
		c.Kind = Mkdir
	case trace.OpUnlink:
		c.Kind = Unlink
	case trace.OpRmdir:
		c.Kind = Rmdir
	case trace.OpRename:
		c.Kind = Rename
	case trace.OpLink:
		c.Kind = Link
	case trace.OpOpen, trace.OpCreate, trace.OpOpendir, trace.OpTmpfile:
		f.openKind(ev, c)
	case trace.OpRead, trace.OpWrite, trace.OpReaddir, trace.OpReaddirplus, trace.OpFsync,
		trace.OpFsyncdir, trace.OpFallocate, trace.OpLseek, trace.OpGetlk, trace.OpSetlk, trace.OpSetlkw:
		f.handleKind(ev, c, pi)
	case trace.OpCopyFileRange:
		return f.copyKind(ev, c, pi, pi2)
	case trace.OpStatfs:
		c.Kind = Statfs
		c.Name, c.PathID = "", 0
	case trace.OpGetxattr:
		c.Kind = Getxattr
	case trace.OpListxattr:
		c.Kind = Listxattr
	case trace.OpSetxattr:
		c.Kind = Setxattr
	case trace.OpRemovexattr:
		c.Kind = Removexattr
	case trace.OpAccess:
		c.Kind = Access
	default: // ioctl, bmap, poll, ...
		c.Kind = Skip
	}
	return true
}

// setattrKind chooses the call of a setattr by the attribute it sets (setattrSyscall):
// truncate (ftruncate on a handle the thread holds), chmod, utimes or chown.
func (f *Folder) setattrKind(ev *trace.Event, c *Call) {
	switch setattrSyscall(ev.Flags) {
	case SysTruncate:
		c.Kind, c.Size = Truncate, ev.Offset
		if pi := f.paths.get(ev.Path, false); pi != nil && pi.hasOpen {
			if h := f.handles[pi.open]; h != nil && h.worker == ev.Tid && !h.dir {
				c.Kind, c.Handle, c.Slot = Ftruncate, pi.open, h.slot
			}
		}
	case SysChmod:
		c.Kind = Chmod
	case SysUtimes:
		c.Kind = Utimes
	case SysChown:
		c.Kind = Chown
	default:
		c.Kind = Skip // only bits replay cannot express (ctime, lock owner, kill-priv)
	}
}

// openKind makes c the open of an open, create, opendir or tmpfile request, with the
// handle it opens.
func (f *Folder) openKind(ev *trace.Event, c *Call) {
	c.Kind, c.Dir = Open, ev.Op == trace.OpOpendir
	if ev.Errno != 0 {
		c.Slot = -1
		return
	}
	node := ev.Node // open, opendir: the node opened
	if ev.Op == trace.OpCreate || ev.Op == trace.OpTmpfile {
		node = ev.Node2 // the node created
	}
	f.opened(c, ev.Op == trace.OpOpendir, node)
}

// handleKind chooses the call of a request on an open handle, opening the handle
// implicitly if the trace never showed its open.
func (f *Folder) handleKind(ev *trace.Event, c *Call, pi *pathInfo) {
	switch ev.Op {
	case trace.OpGetlk, trace.OpSetlk, trace.OpSetlkw:
		c.Kind = Lock
	case trace.OpRead:
		c.Kind = Read
	case trace.OpWrite:
		c.Kind = Write
	case trace.OpReaddir, trace.OpReaddirplus:
		c.Kind = Readdir
	case trace.OpFsync, trace.OpFsyncdir:
		c.Kind = Fsync
	case trace.OpFallocate:
		c.Kind = Fallocate
	case trace.OpLseek:
		c.Kind = Lseek
	}
	h := f.handles[ev.Handle]
	if h == nil {
		h = f.implicitOpen(ev, ev.Handle, ev.Path, pi, c.Kind == Readdir)
	}
	c.Slot = h.slot
	if ev.Op == trace.OpWrite && ev.Errno == 0 {
		h.pos = ev.Offset + ev.Ret
	}
}

// copyKind makes c a copy_file_range between its two handles; false if the output's
// path is unknown.
func (f *Folder) copyKind(ev *trace.Event, c *Call, pi, pi2 *pathInfo) bool {
	c.Kind = Copy
	h := f.handles[ev.Handle]
	if h == nil {
		h = f.implicitOpen(ev, ev.Handle, ev.Path, pi, false)
	}
	c.Slot = h.slot
	if pi2 == nil {
		f.Stats.Unknown++
		return false
	}
	h2 := f.handles[ev.Handle2]
	if h2 == nil {
		h2 = f.implicitOpen(ev, ev.Handle2, ev.Path2, pi2, false)
	}
	c.Handle2, c.Slot2, c.Offset2 = ev.Handle2, h2.slot, ev.Offset2
	if !f.off2 {
		// A version-1 trace has the input offset only. cp and cat copy with the
		// output's file position (no output offset): where the output handle's last
		// write or copy ended (cp: the input offset; `cat a b > c`: the end of a).
		c.Offset2 = h2.pos
	}
	if ev.Errno == 0 {
		h2.pos = c.Offset2 + ev.Ret
	}
	return true
}

// holdsAncestor reports whether t holds the lookup of a directory above name (a walk's
// earlier component), without the cost of dropHeld's call per held call.
func (t *threadState) holdsAncestor(name string) bool {
	for i := range t.held {
		h := &t.held[i]
		if n := len(h.Name); n < len(name) && h.Rec == trace.OpLookup && h.Kind == Stat &&
			(n == 0 || name[n] == '/' && name[:n] == h.Name) {
			return true
		}
	}
	return false
}

// dropHeld folds the held calls fn accepts (counting them as folded), returning the
// recorded requests and time they
// stood for (to be charged to the call they fold into).
func (t *threadState) dropHeld(f *Folder, fn func(*Call) bool) (fd folded) {
	j := 0
	for i := range t.held {
		if h := &t.held[i]; fn(h) {
			f.Stats.Folded[h.Rec]++
			fd.add(h)
			continue
		}
		if j != i {
			t.held[j] = t.held[i]
		}
		j++
	}
	clear(t.held[j:])
	t.held = t.held[:j]
	return fd
}

func (f *Folder) base(ev *trace.Event, pi, pi2 *pathInfo) Call {
	c := Call{
		Rec: ev.Op, Worker: ev.Tid, Tid: ev.Tid, Pid: ev.Pid, Start: ev.Start, Dur: ev.Dur,
		Name: pi.name, PathID: ev.Path, Handle: ev.Handle, Slot: -1, Slot2: -1,
		Offset: ev.Offset, Size: int64(ev.Size), Flags: ev.Flags, Mode: ev.Mode,
		Errno: ev.Errno, Ret: ev.Ret, Events: 1, Reqs: 1, CallStart: ev.CallStart, CallEnd: ev.CallEnd,
		RunDelay: ev.RunDelay, WokenAt: ev.WokenAt, Waker: ev.Waker, rwSyscall: rwCall(ev.CallNr),
		Passthrough: ev.Passthrough,
	}
	if pi2 != nil {
		c.Name2, c.PathID2 = pi2.name, ev.Path2
	}
	return c
}

func (f *Folder) allocSlot() int32 {
	if n := len(f.freeSlot); n > 0 {
		s := f.freeSlot[n-1]
		f.freeSlot = f.freeSlot[:n-1]
		return s
	}
	f.nSlots++
	return f.nSlots - 1
}

func (f *Folder) opened(c *Call, dir bool, node uint64) {
	if old := f.handles[c.Handle]; old != nil { // handle reused before its release was seen
		if prev := f.superseded[c.Handle]; prev != nil {
			f.freeSlot = append(f.freeSlot, prev.slot) // two reuses: the oldest is lost
			f.putHandle(prev)
		}
		f.superseded[c.Handle] = old
	}
	h := f.newHandle()
	*h = handleState{worker: c.Worker, slot: f.allocSlot(), pathID: c.PathID, node: node, dir: dir}
	f.handles[c.Handle] = h
	pi := f.paths.get(c.PathID, true)
	pi.open, pi.hasOpen = c.Handle, true
	c.Slot = h.slot
}

// implicitOpen adds an open of pi for handle fh, which the trace uses but never opened.
func (f *Folder) implicitOpen(ev *trace.Event, fh uint64, pathID uint32, pi *pathInfo, dir bool) *handleState {
	c := f.base(ev, pi, nil)
	c.Kind, c.Rec, c.Implicit, c.Handle, c.PathID = Open, trace.OpOpen, true, fh, pathID
	c.Dir, c.Errno, c.Ret, c.Dur, c.Events = dir, 0, 0, 0, 0
	f.opened(&c, dir, ev.Node)
	f.Stats.Implicit++
	f.emit(&c)
	return f.handles[fh]
}

// changesName reports whether op creates, removes or renames a name.
func changesName(op trace.Op) bool {
	switch op {
	case trace.OpMkdir, trace.OpMknod, trace.OpSymlink, trace.OpLink, trace.OpUnlink, trace.OpRmdir,
		trace.OpRename, trace.OpCreate:
		return true
	}
	return false
}

// releaseUnder emits the held calls of threads other than tid on name or below it that
// started no later than start.
func (f *Folder) releaseUnder(tid uint32, name string, start int64) {
	for _, h := range f.holding {
		if h.tid == tid {
			continue
		}
		for i := range h.t.held {
			if c := &h.t.held[i]; IsUnder(c.Name, name) && c.Start <= start {
				f.release(h.tid)
				break
			}
		}
	}
}

// releaseOn emits the held calls of every thread that uses open-file slot s, before a call
// that ends the handle (flush, release) is planned: a read or write held for merging,
// often by another thread than the opener's (a shell redirection's file written by the
// command it started), must be issued before the close that followed it in the trace.
func (f *Folder) releaseOn(s int32) {
	for _, h := range f.holding {
		for i := range h.t.held {
			if c := &h.t.held[i]; c.Slot == s || (c.Kind == Copy && c.Slot2 == s) {
				f.release(h.tid)
				break
			}
		}
	}
}

// handleOf returns the state of the handle a flush or release names: the previous
// incarnation of the number if the event is about that one's file (same node id; the
// same path when node ids are unknown, as in hand-made traces).
func (f *Folder) handleOf(ev *trace.Event) *handleState {
	h := f.handles[ev.Handle]
	old := f.superseded[ev.Handle]
	if old == nil {
		return h
	}
	if ev.Node != 0 && old.node != 0 {
		if old.node == ev.Node && (h == nil || h.node != ev.Node) {
			return old
		}
		return h
	}
	if ev.Path != 0 && old.pathID == ev.Path && (h == nil || h.pathID != ev.Path) {
		return old
	}
	return h
}

// close turns a release into a close in the opener's thread.
func (f *Folder) close(ev *trace.Event) {
	h := f.handleOf(ev)
	if h == nil {
		f.Stats.Folded[ev.Op]++
		return
	}
	if f.superseded[ev.Handle] == h {
		delete(f.superseded, ev.Handle)
	} else {
		delete(f.handles, ev.Handle)
	}
	if pi := f.paths.get(h.pathID, false); pi != nil && pi.hasOpen && pi.open == ev.Handle {
		pi.hasOpen = false
	}
	f.releaseOn(h.slot) // other threads' held reads and writes on the handle come first
	if !f.heldAfterClose(h, ev) {
		f.release(h.worker)
	}
	pi := f.path(h.pathID)
	c := f.base(ev, pi, nil)
	c.Kind, c.Worker, c.Slot = Close, h.worker, h.slot
	c.Errno, c.Ret = ev.Errno, 0
	if h.flushed { // the application's close() is what flush timed, when flush ran
		c.Rec, c.Start, c.Dur, c.Errno = trace.OpFlush, h.flushStart, h.flushDur, h.flushErr
		relStart, relEnd, relPre := c.CallStart, c.CallEnd, c.pre()
		c.CallStart, c.CallEnd = h.flushCall[0], h.flushCall[1]
		c.setPre(h.flushPre)
		c.widen(relStart, relEnd, relPre)
		f.Stats.Folded[ev.Op]++
		f.Stats.Folded[trace.OpFlush]--
		c.Events = 2
	}
	if c.Tid == 0 {
		c.Tid = h.worker
	}
	f.emit(&c)
	f.freeSlot = append(f.freeSlot, h.slot)
	f.putHandle(h)
}

// heldAfterClose reports whether the worker's held call is one read or write kernel
// passthrough served that began after the close of h: a release the kernel sent on its
// own for an earlier close() came in the middle of that call, before the call's own
// privilege probe, which is still to fold into it. The close goes first; the call stays
// held.
func (f *Folder) heldAfterClose(h *handleState, ev *trace.Event) bool {
	t := f.threads[h.worker]
	if t == nil || len(t.held) != 1 || ev.Op != trace.OpRelease {
		return false
	}
	start := ev.Start
	if h.flushed {
		start = h.flushStart
	}
	c := &t.held[0]
	return c.Passthrough && c.Start > start && c.Slot != h.slot
}

// newHandle returns a handle state to fill in, reusing a closed one's.
func (f *Folder) newHandle() *handleState {
	if n := len(f.spareHandles); n > 0 {
		h := f.spareHandles[n-1]
		f.spareHandles = f.spareHandles[:n-1]
		return h
	}
	return &handleState{}
}

// putHandle keeps the state of a closed handle for reuse.
func (f *Folder) putHandle(h *handleState) {
	if len(f.spareHandles) < 1024 {
		f.spareHandles = append(f.spareHandles, h)
	}
}
