// Package transfer is restoresync's wire protocol: what the two ends of a
// restore say to each other over a transport.Stream, the client's side of
// it (Conn) and the server's roles (Serve). Dialing is package transport's
// business, and rsync's delta algorithm package delta's.
//
// A restore opens several streams, each its own connection running
// "restoresync serve --stdio" on the far side:
//
//	s, c := Open(ctx, dialer, Hello{Role, Path, Compression, Roots, Filters}, timeouts)
//	                                   // dial, then the versioned JSON handshake
//	pull: lr := c.ListChunks()          // the sender's file list, chunk by chunk:
//	      lr.Next(ctx)                 // treewalk.Chunk (or c.List: them all)
//	      c.SendRead(items); c.RecvRead(ctx, items, w)  // pipelined item data into restore's writer
//	push: c.PlanChunk(ctx, &chunk, o)  // each chunk of the client's walk (protocol 8): what
//	                                   // the receiver needs, with its signatures, after
//	                                   // --delete, -n, -i on it (ChunkOptions, protocol 9)
//	      c.SendWrite(...); c.RecvWrite(items); c.Commit(ctx, e)
//	      c.FinishPlanned(ctx, paths)  // planned entries finished, named by path
//	      (or c.Plan(ctx, entries) ... c.Finish(ctx, entries): a whole list)
//	c.Close()                          // goodbye; Abort tears the stream down without one
//	c.Release()                        // protocol 8, a session on a shared SSH connection:
//	                                   // end of session (msgNext), the agent kept for the
//	                                   // next Open to that host (transport.Park)
//	Sizes(ctx, dialer, paths, ...)     // protocol 8: many trees sized in one request
//	far side: Serve(ctx, stdin, stdout, cfg)  // the sender role reads a tree (LocalSource),
//	                                   // the receiver role drives cfg.Sink (restore's writer)
//
// After the handshake (Hello in proto.go, Handshake in conn.go) each direction is a sequence of
// frames (frame.go), each compressed on its own and naming its codec
// (codec.go; with --compress auto, protocol 7, the sender chooses each
// frame's codec: none for already-compressed files, known by their
// suffix, magic bytes or an lz4 trial of the first block, autoclass.go;
// lz4 or a zstd level for the rest, which autoctl.go's controller picks
// from the measured link and codec times, the link in a pull from the
// client's msgRate reports, protocol 8, and the codec's CPU time from its
// thread's, cputime_linux.go; msgStats tells the client what
// each codec carried, framestats.go), carrying the messages of
// proto.go: file lists, batches of
// items and their data, plans, commits. Item data costs no copy in user
// space that the codec does not need: the sender reads a file straight
// into the frame that goes out, whose header is written in the room in
// front of it, with one Write; the receiver reads an uncompressed frame
// in place and decodes a compressed one once, and the item's reader
// copies from the frame into the writer's buffer. The file list
// (protocol 7) travels in chunks, one per msgList request: the sender
// walks on (treewalk.Chunks, a bounded number of chunks ahead) while the
// receiver works on a chunk and asks for the data of its files on the
// same stream, and the receiver checks each chunk as a part of the whole
// (treewalk.ListChecker), so neither end holds the whole list. Selections (selection.go,
// protocol 3): the Hello may name several parts of the sender's tree
// (Roots: several SRCs, --relative, --files-from) and include/exclude
// rules (Filters), which the sender applies as it walks, merging parts
// of different bases that give the same paths as rsync does (and reading
// each file from the base it listed it from). Other roles
// serve the agent-less formats: a pax tar stream (tarsend.go) and rsync's
// own protocol through a local rsync sender (rsyncsend.go, RsyncStream).
//
// Native delta: an item may carry the receiver's block signature of its
// current copy (delta.Signature, in the wire form of sigcodec.go); the
// sender answers with delta.Search's literal chunks and block copies
// (deltasend.go), ending with an xxh3-128 hash of the data, and the
// receiver's reader serves the rebuilt bytes and fails rather than end if
// they do not match (ErrDeltaFailed: send it again whole).
//
// Everything read from a peer is validated before use: frame sizes are
// bounded (so is the memory a hostile peer can make us use), paths must be
// clean and relative (treewalk.ValidPath), counts and ranges must fit.
// Faults: a sender checks each file's size and mtime after reading it
// (ErrSourceChanged); with Hello.Verify whole items end with an xxh3-128 of
// the bytes read, checked by the receiver (ErrVerifyFailed); a Conn with an
// idle timeout (SetIdleTimeout, rsync's --timeout) closes its stream when
// no byte moves while a request is outstanding (transport.ErrTimeout), an
// RsyncStream (RsyncStream.SetIdleTimeout) when no byte moves while a Read
// or Write on it waits on the peer.
//
// Sealed wire types: what crosses the wire is a type of this package,
// never a struct of another layer. The handshake's JSON (Hello, its
// ReceiverOptions, helloReply) has an explicit name for every field, and a
// field the reader does not know is refused (ErrProtocol, naming it) unless
// the peer announced another ProtocolVersion, which is then reported. The
// bytes of every message and of a frame of each codec are pinned by
// golden_test.go against testdata/golden (go test -run TestGoldenWire
// -update rewrites them, with a ProtocolVersion bump when they change).
//
// Per-item errors versus stream errors: a request that concerns several
// items or entries (Conn's RecvRead, SendWrite, RecvWrite, Plan, Finish,
// Delete, List) returns their errors first, one per item (nil where it
// succeeded) or per failed entry (treewalk.PathError), and a stream error
// last; Commit returns (itemErr, err) likewise. A non-nil last error means
// the stream is unusable (out of sync, closed, or its peer failed): close
// it, the run cannot go on with it; a per-item error concerns that item
// only, and the stream goes on. A peer's per-item error is a RemoteError
// whose Kind is the sentinel the wire carries (ErrDeltaFailed,
// ErrSplitGone), chosen with errors.Is on the sending side. A handshake
// that found no agent on the remote host wraps ErrNoAgent with ErrProtocol,
// so that callers fall back without reading messages. Every Conn
// method that takes a ctx closes the stream when ctx ends, so that a call
// blocked on the peer returns ctx's error. The sentinels are in errors.go,
// the handshake's wire types in proto.go and receiveropts.go, the replies
// with per-item results in reply.go.
//
// An interrupted stream leaves nothing behind on its own: writing is the
// business of the safe writer (package restore/dest), which the server
// side calls through Sink.
//
// Files: setup.go — Open and Timeouts, the bounded connection setup;
// conn.go — Handshake and Conn, the client's requests; connidle.go —
// Conn's idle timeout and Abort; frame.go — frames; codec.go — codecs;
// autoclass.go — --skip-compress lists, magic bytes and the trial that
// classify a file's data; autoctl.go — auto's controller (autoController);
// autotrace.go — its decisions logged under RESTORESYNC_AUTO_TRACE;
// autoframe.go — each frame's codec and the stats (frameCoder), and what
// the frame writer knows of an item, and the client's reports of what it
// received (msgRate, bookPeer); framestats.go — FrameStats, msgStats
// and Conn.PeerStats; cputime_linux.go, cputime_other.go — a thread's CPU
// time (threadCPU);
// proto.go — messages and their encoding; protometa.go — extended
// metadata on the wire; sigcodec.go — a signature's wire form;
// deltasend.go — a delta item's op stream; itemdata.go — item data and
// its readers; selection.go — SourceRoot; server.go — Serve and the
// sender and receiver roles; pushchunks.go — a push's list
// planned and finished chunk by chunk (PlanChunk, FinishPlanned);
// chunkchanges.go — ChunkOptions, Changes, ChunkChanger: --delete,
// --dry-run and --itemize-changes of each chunk on the receiver;
// source.go — LocalSource, a local tree as a sender, and its read batches
// (each directory of a read request resolved once, its files opened by
// name beneath it); tarsend.go — the tar sender role; taracl.go — ACLs
// and xattrs in pax headers; rsyncsend.go — the rsync sender role;
// rsyncstream.go — RsyncStream and DialRsyncSender; pipe.go — in-process
// streams (PipeStream, PipeDialer); receiveropts.go — ReceiverOptions,
// a push receiver's options on the wire; reply.go — the plan and write
// replies and errKind; glob.go — RoleGlob and Glob, a pattern expanded
// beneath the served root; sums.go — RoleSums and Sums, files hashed where
// they are; sizes.go — RoleSizes, Sizes and SizeOf, trees sized where they
// are; errors.go — the sentinels. The golden files of
// every message are in testdata/golden (golden_test.go; -update rewrites
// them).
package transfer
