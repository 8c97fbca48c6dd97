// Package trace defines iotap's event model and its trace file format, and provides a
// concurrent Writer and a streaming Reader for it.
//
// A trace holds a header (how and where it was made), one Event per filesystem operation,
// side tables that events refer to by id (paths, processes, files first seen), resource
// samples of the storage client and of iotap itself, and a footer written when the writer
// closes cleanly. This comment specifies format version 5 byte by byte so that other
// programs can read and write traces, and how versions 1 to 4 differ from it (see
// "Versions").
//
// # Conventions
//
// All fixed-size integers are little-endian. "uvarint" is an unsigned LEB128 varint as
// written by encoding/binary.AppendUvarint (at most 10 bytes). "varint" is a signed
// integer in zigzag form as written by binary.AppendVarint ((n << 1) ^ (n >> 63), then
// uvarint). A "string" is a uvarint byte count followed by that many bytes (UTF-8 by
// convention, not checked). A "time" is a varint of Unix nanoseconds, 0 meaning unset.
// CRC32C is CRC-32 with the Castagnoli polynomial (hash/crc32.Castagnoli).
//
// # File layout
//
//	preamble (12 bytes)
//	chunk (header)
//	chunk ... (paths, processes, files, samples, events, in any order and number)
//	chunk (footer)             only if the writer closed cleanly
//
// # Preamble
//
//	offset  size  field
//	0       8     magic: 0x89 'i' 'o' 't' 'a' 'p' '\r' '\n'
//	8       2     format version, uint16 (5; 1 to 4 in older files)
//	10      2     reserved, 0
//
// A file whose first bytes differ from the magic is not a trace (ErrNotTrace). A reader
// rejects versions it does not know (ErrVersion); this package reads versions 1 to 5. An
// empty file, or one that ends before the header chunk is complete, gives ErrEmpty.
//
// # Chunk frame
//
// Every chunk is a 20-byte frame followed by the stored payload:
//
//	offset  size  field
//	0       4     N: stored payload length, uint32, at most 32 MiB (MaxChunkPayload)
//	4       1     chunk type (table below)
//	5       1     flags: bit 0 set = payload is zstd-compressed; other bits must be 0
//	6       2     reserved, 0
//	8       4     R: payload length after decompression, uint32, at most 64 MiB (MaxChunkRaw);
//	              equals N when bit 0 of flags is clear
//	12      4     CRC32C of the N stored payload bytes
//	16      4     CRC32C of frame bytes 0..15
//	20      N     stored payload
//
// The writer in this package always compresses (one zstd frame per chunk, written with
// github.com/klauspost/compress/zstd); readers accept both forms. The frame checksum lets
// a reader trust N before it reads the payload, and find the next chunk after damage.
//
// # Chunk types
//
//	type  name       payload (after decompression)                      count per file
//	1     header     Header fields, see "Header payload"                exactly 1, first
//	2     events     Events, columnar, see "Events payload"             any
//	3     paths      PathRecord list, see "Side tables"                 any
//	4     processes  Process list                                       any
//	5     files      File list                                          any
//	6     footer     Footer fields, see "Footer payload"                0 or 1, last
//	7     samples    Resource series, see "Samples payload"            any (version 3)
//
// Unknown types are errors: a chunk of another type, or of type 7 in a file of version 1
// or 2, is reported as a corrupt chunk (*ChunkError wrapping ErrCorrupt), never silently
// skipped as "from a newer writer". New kinds of data need a new format version.
//
// Side-table records are always written no later than any event that refers to them: a
// writer writes the side-table chunks it has pending before each events chunk.
//
// # Header payload
//
// In order: Kind string; WallStart time; Origin varint (CLOCK_MONOTONIC ns at WallStart);
// Hostname, IotapVersion, Kernel strings; Target.Path, Target.FSType, Target.Source,
// Target.Mount strings; FUSE.Cache string; FUSE.MaxRead, FUSE.MaxWrite uvarints;
// FUSE.EntryTimeout, FUSE.AttrTimeout varints (ns); one byte of FUSE flags (bit 0
// DirectIO, bit 1 Passthrough, bit 2 Writeback); Command: uvarint count, then that many
// strings; Labels: uvarint count, then that many pairs of strings (key, value); then, in
// version 4, Legs and LegsNote strings (how the FUSE legs outside the recording layer were
// measured: "kernel", "probe" or ""; and why not by the kernel); then, in version 5, Data
// and DataNote strings (how the reads and writes of files were recorded: "kernel" when
// kernel passthrough served them and the kernel timed them, "layer" or ""; and why not
// "kernel").
// Header.Version is the preamble's version. Bytes after the last field are ignored, so a
// later writer of the same version may append fields.
//
// # Footer payload
//
// In order: Events uvarint (events written); Dropped uvarint; Blocked varint (ns); Chunks
// uvarint (chunks written before the footer, header included); End varint (ns since
// Origin); Errors uvarint; WallClose time; OpCounts: uvarint count, then that many
// uvarints (events per Op, indexed by Op value; trailing zero counts may be omitted).
// Then, absent from footers written before they existed (read as zero), the cost of
// recording: EncodeCPU varint (ns of CPU the encoder used); the layer's Requests uvarint,
// InLayer varint (ns), Self varint (ns), Threads uvarint and Resolve varint (ns), see
// LayerCost. Then, when a write of the trace failed or a later field follows: Lost uvarint
// (events lost with it, counted in Dropped too) and WriteError string (0 and "" when no
// write failed). Then, when the recorder measured the layer's round trip or the
// attribution fields follow: RoundTrip.Start varint (ns), RoundTrip.Run varint (ns),
// RoundTrip.Samples uvarint (zeros when not measured), see RoundTrip. Then, when the layer
// says how it attributed threads: flags uvarint (bit 0: Connector), Late uvarint and
// Missing uvarint (see LayerCost). Then, when the kernel's view of requests was measured
// or a prediction follows: Legs.Filled, Legs.Missing and Legs.Lost uvarints (see
// LegStats). Then, in a replay's trace or when passthrough counts follow: Prediction's ten
// fields as varints (ns), in the order of the struct (zeros in a recording). Then, in a
// recording that used kernel passthrough: Passthrough.Opens, LayerOpens, Calls, Async,
// Unseen and Lost uvarints and Refused string (see PassthroughStats); then, when one of
// them is not zero, Passthrough.Maps, Faults and MapsFull uvarints. Bytes after the last
// field are ignored.
//
// # Side tables
//
// paths: uvarint count, then per record: ID uvarint, Parent uvarint, Name string. ID 1
// is the traced root (Parent 0, Name ""); a record with Parent 0 and another ID holds a
// raw string (a symlink target). IDs are assigned from 1 up and never reused; a renamed
// object gets a new id. A Parent other than 0 is an id below the record's own (a writer
// names a directory before its entries), so the records never loop.
// A writer whose path index is bounded (Writer.KeepPaths) forgets the pairs no longer in
// use, and records a pair named again under a new ID: one (parent, name) may have several
// records. The Reader resolves them to the first: events, Path, PathName and Files report
// one id per path, and a files record naming a later id is left out when the first id has
// a record or an event (the object was known before).
//
// processes: uvarint count, then per record: Tid, Pid, PPid uvarints; FirstSeen varint;
// Comm, Exe strings. Then, for each record in the same order, its Cmdline: a uvarint count
// of arguments, then that many strings. A later record for the same Tid replaces the
// earlier one. The command lines come after all the records so that a payload without
// them (written before they existed) reads the same, every Cmdline nil; and a reader that
// predates them reads this package's payloads as such a payload, since it stops after the
// records and ignores the bytes that follow (the format's version did not change for
// them). Bytes after the last command line are ignored.
//
// files: uvarint count, then per record: Path uvarint; Type byte (FileType); Mode
// uvarint; Size varint; Seen varint; Nlink uvarint.
//
// # Samples payload
//
// Resource use of processes over time, read from /proc while the trace was made: the
// storage client serving the target (a FUSE daemon such as s3fs or mfsmount) and the iotap
// process writing the trace (the recorder, or the replayer, which is the S3 client itself
// on an s3:// target). uvarint count of series records, then per record:
//
//	field   encoding
//	Role    1 byte: 1 client, 2 self (the iotap process); other values are corrupt
//	Pid     uvarint (≤ 2^32-1)
//	Name    string (≤ MaxName bytes): the process's command name, e.g. "s3fs"
//	n       uvarint, at most MaxSamplesPerRecord (65536)
//	n samples, each 8 varints, each the difference to the same field of the record's
//	previous sample (of a zero sample for the first):
//	  T          ns since the header's Origin; never smaller than the previous sample's
//	  RSS        resident set size, bytes
//	  User, Sys  CPU time, ns, cumulative over the process's life
//	  ReadBytes, WriteBytes   storage bytes (/proc/PID/io read_bytes, write_bytes)
//	  RChar, WChar            bytes through read- and write-like calls, sockets included
//
// Counters are cumulative as /proc shows them (64-bit two's complement differences). The
// records of one (Role, Pid) in all samples chunks form one series, in file order; the
// first record names it. A writer writes a series in parts as it samples (Writer.AddSamples).
//
// # Limits
//
// What a writer never writes, a reader treats as a corrupt chunk (the chunk's remaining
// records are skipped):
//
//   - a name, symlink target, Comm or Exe longer than MaxName (4096 bytes, PATH_MAX: the
//     kernel passes no longer one), or a Cmdline whose arguments together are longer
//     than MaxCmdline (4096 bytes: writers keep the first 4096, CutCmdline);
//   - a path record whose id was recorded before, whose Parent is not 0 and not below its
//     ID, or whose path, joined from the records with "/", is longer than MaxPath (8192
//     bytes: the layer reaches files through paths relative to the traced root, at most
//     PATH_MAX, and a failed lookup adds one name);
//   - side tables that would make the reader hold more than SideTableBytes (64 MiB) plus
//     SideTableRatio (64) bytes per byte of trace read so far. A record counts its name,
//     its joined path and a fixed cost for the maps that index it (about 100 bytes), a
//     resource sample 80 bytes; a recording stays far below the limit (a sample every
//     100 ms for a day is 69 MB in memory and at least 7 MB of trace);
//   - a compressed payload that is not a sequence of whole zstd frames, whose blocks cannot
//     hold R bytes (a raw or RLE block holds its size, a compressed block at most 128 KiB),
//     or whose frames declare content sizes summing to more than R: a reader sizes its
//     buffers by R only once the stored bytes can hold it;
//   - a payload longer than its records can be as a writer writes them: more than its
//     leading count times the largest record of its type (a path record 4,108 bytes, a
//     process 16,498, a file 36, an event 1 byte plus 10 per column, a samples chunk 2^18
//     points of 80 bytes besides its series' records) plus 64 KiB; a header longer than
//     16 MiB, a footer longer than 1 MiB. A reader checks a payload of more than 1 MiB
//     before it makes room for it, from the count in its first zstd block alone, so a
//     few kilobytes that decompress to one name of 64 MiB cost no more than that block;
//   - an event whose Op is not a known operation, or whose Dur is negative;
//   - an events chunk with an event naming a path id that has no record yet (its events
//     are still returned);
//   - a samples record of an unknown role, of more than MaxSamplesPerRecord samples, or
//     whose times go back;
//   - an events, paths, files or samples chunk whose stored bytes repeat an earlier
//     chunk's (events and samples carry their times and records their ids: a writer never
//     writes one twice). The repeat is skipped.
//
// At the end of a trace with a footer, the reader compares the footer's Chunks, Events and
// OpCounts with what it read; a difference is reported as ErrMismatch.
//
// # Events payload
//
// An events payload holds n events as columns: first uvarint n (n ≤ MaxChunkEvents;
// writers never write n = 0), then 30 columns (20 in versions 2 and 3, 19 in version 1),
// each holding n values, in this order:
//
//	column   encoding of value i
//	Op       1 byte
//	Start    varint: Start[i] - Start[i-1], with Start[-1] = 0
//	Dur      varint
//	Errno    uvarint (≤ 65535)
//	Path     uvarint (≤ 2^32-1, as all 32-bit fields)
//	Path2    uvarint
//	Node     uvarint
//	Node2    uvarint
//	Handle   uvarint
//	Handle2  uvarint
//	Offset   varint: Offset[i] - predicted offset (below)
//	Size     uvarint
//	Ret      varint: Ret[i] - Size[i]
//	Flags    uvarint
//	Mode     uvarint
//	Tid      uvarint
//	Pid      uvarint
//	Uid      uvarint
//	Gid      uvarint
//	Offset2  varint, not predicted (version 2 and later)
//	Unique   varint: Unique[i] - Unique[i-1], with Unique[-1] = 0 (version 4, as all below)
//	Legs     uvarint of bits: 1 Queued and Done, 2 CallStart and CallNr, 4 CallEnd, 8
//	         RunDelay, 16 WokenAt and Waker, 32 Passthrough (version 5: a read or write
//	         kernel passthrough served, timed by the kernel; Queued..Done is the call);
//	         bits 2, 4 and 32 need bit 1, bits 8 and 16 need bit 2, other bits are corrupt
//	Queued   varint: Start - Queued (0 without bit 1)
//	Done     varint: Done - (Start + Dur) (0 without bit 1)
//	CallStart  varint: Queued - CallStart (0 without bit 2)
//	CallEnd  varint: CallEnd - Done (0 without bit 4; negative for a request the kernel sent
//	         without waiting for it, such as a release at close)
//	CallNr   uvarint ≤ 65535 (0 without bit 2)
//	RunDelay uvarint: the run delay in ns, which Event.RunDelay holds plus one (0 without
//	         bit 8)
//	WokenAt  varint: CallStart - WokenAt (0 without bit 16)
//	Waker    uvarint ≤ 2^32-1 (0 without bit 16)
//
// A field whose bit is clear reads as zero. An event of pages of a mapped file that page
// faults brought in or made dirty (version 5) is a read or write whose Flags hold bit 31
// (MapFault): its legs bits are 1 and 32 only (no system call: CallStart, CallEnd and
// CallNr are 0), Queued = Done = Start and Dur is 0. The kernel's times are in the order they happen,
// within 1 ms of clock skew, or the chunk is corrupt: 0 < Queued ≤ Done, Queued ≤ Start,
// End ≤ Done, 0 < CallStart ≤ Queued, 0 < CallEnd and CallStart ≤ CallEnd (WokenAt may come
// after CallStart: the recorder can see a later wake-up). The payload ends exactly after the last column
// (Waker; Offset2 in versions 2 and 3; Gid in version 1). Every value takes at least one
// byte, so a count n larger than the rest of the payload divided by the number of columns
// is corrupt.
//
// The predicted offset continues a sequential stream per handle: it is 0 when Handle[i] is 0; otherwise, with a table of
// 64 slots, all empty at the start of each chunk, and slot s = Handle[i] mod 64: if the
// slot holds Handle[i], the prediction is the slot's value, else 0. After each event with
// a non-zero handle, slot s := (Handle[i], Offset[i] + Ret[i]) (64-bit two's complement
// arithmetic throughout). So sequential reads and writes store an Offset of 0.
//
// Events come out in file order. The writer shards its buffers by thread, so events of
// one thread (Tid) are in append order, but the file as a whole is not sorted by Start.
// The Writer in this package writes each event about one FlushInterval (plus LegHold when
// it fills the kernel's view) after its Append at most (unless the disk cannot keep up),
// so a consumer that needs Start order can sort within a bounded window (Sorter); the
// format itself promises no order.
//
// # Versions
//
// Version 5 differs from version 4 in the legs column of the events payload, which may
// carry bit 32 (Passthrough), and in the header's Data and DataNote; reading an older file
// leaves them zero.
// Version 4 differs from version 3 in the events payload, which adds the ten columns
// from Unique on (the kernel's view of each request), and in the header's Legs and
// LegsNote; reading an older file leaves them zero. Version 3 differs from version 2
// only in allowing samples chunks (type 7); its events payload is version 2's. Version 2 differs from version 1 only in the events payload: it
// adds the Offset2 column (copy_file_range's output offset). Reading a version-1 file
// leaves Event.Offset2 at 0; reading a version-1 or 2 file gives no samples; everything
// else reads the same. The preamble's version applies to every chunk of the file. Writers
// in this package write version 5 only.
//
// # Crash semantics
//
// The writer writes whole chunks with one write call each: at least every FlushInterval
// (1 s by default) while events are pending, and whenever ChunkEvents events are encoded.
// If the writer is killed (kill -9), every chunk written before is intact; the file ends
// in a partial chunk or at a chunk boundary and has no footer. A reader returns the
// events of every complete chunk, reports the cut-off tail (*ChunkError wrapping
// ErrTruncated) and the missing footer (ErrNoFooter) in Reader.Damage, and ends with
// io.EOF: a truncated trace is a warning, not a failure.
//
// A chunk whose checksum, compression or encoding is bad is skipped and reported in
// Damage as a *ChunkError with its offset; reading continues with the next chunk (after
// the damaged payload when its frame was valid, else at the next offset that holds a
// valid frame). Reader.SetStrict(true) makes Next return the error instead. A reader
// never allocates more than the frame limits (one chunk's stored and decompressed bytes)
// and the side-table limit (see "Limits") allow, for any input, and for a chunk no more
// than its bytes hold: the stored buffer grows as the bytes arrive, and the decompressed
// one is sized only after the zstd blocks are seen to hold what the frame says.
package trace
