package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/restoresync/restoresync/treewalk"
)

// Sink is the receiving side of a push as the server drives it: restore's
// safe writer implements it. Methods may be called concurrently from several
// server processes' worth of streams, each with its own Sink on the same
// destination tree.
type Sink interface {
	ItemWriter
	// Plan compares entries with the destination tree (rsync's quick check:
	// size and mtime), creates the directories, prepares the temporary files
	// of files larger than the block size, and returns what it needs, with
	// the signatures of the copies it has of some needed files (their data
	// then comes as deltas, which the Sink applies as a BasisOpener).
	Plan(ctx context.Context, entries []treewalk.Entry) (PlanResult, error)
	// Commit puts a split file, whose blocks have all been written, in
	// place with its metadata. The error concerns e only.
	Commit(ctx context.Context, e *treewalk.Entry) error
	// Finish creates symlinks, hardlinks and special files, sets directory
	// metadata (deepest first) and removes stale temporary files. It
	// returns per-entry errors, and an error only for a failure of the run.
	Finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error)
	// Close releases the sink.
	Close() error
}

// ServerConfig configures Serve.
type ServerConfig struct {
	// Root, when not empty, confines clients beneath this directory: a
	// client's path is taken relative to it ("/alice" is Root/alice) and a
	// path that would leave it, by ".." or by a symlink, is refused.
	Root string
	// ReadOnly refuses the receiver role (a backup server's endpoint).
	ReadOnly bool
	// NewSink opens the destination dst for the receiver role, with the
	// client's receiver options (Hello.Receiver; the zero value when it
	// sent none). Nil refuses the receiver role.
	NewSink func(ctx context.Context, dst string, opts ReceiverOptions) (Sink, error)
	// Version is this build's version, announced in the handshake.
	Version string
	// OneStream says that this process serves this one stream alone
	// (serve --stdio, one process per stream of a restore). A sender
	// whose frames go uncompressed (--compress none) then runs Go on one
	// processor (runtime.GOMAXPROCS(1), unless $GOMAXPROCS is set): its
	// work is one file after another, with nothing to compress beside
	// it, and an idle second processor only costs the runtime's
	// hand-offs and wake-ups, a system call or more per small file; a
	// restore's other streams are processes of their own, on the other
	// cores. Serve in a process with other work (serve --listen, tests)
	// leaves it false.
	OneStream bool
}

// Serve runs the server's side of one stream: the handshake, then requests
// until the client says goodbye or closes its side (nil), the stream fails,
// or ctx is cancelled. Serve does not close in or out.
func Serve(ctx context.Context, in io.Reader, out io.Writer, cfg ServerConfig) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for first := true; ; first = false {
		if !first {
			// A client that parked the stream and then closed it has
			// no further session to ask for: a clean end.
			if _, err := br.Peek(1); err == io.EOF {
				return nil
			}
		}
		next, err := serveSession(ctx, br, out, cfg)
		if err != nil || !next {
			return err
		}
	}
}

// serveSession serves one session, from its handshake to its goodbye,
// and reports whether it ended with msgNext: the client keeps the
// stream for another handshake, which br is left at.
func serveSession(ctx context.Context, br *bufio.Reader, out io.Writer, cfg ServerConfig) (next bool, _ error) {
	var h Hello
	rep := helloReply{Proto: ProtocolVersion, Version: cfg.Version, Codecs: CodecNames()}
	refuse := func(err error) error {
		rep.Error = err.Error()
		writeHandshake(out, rep)
		return err
	}
	if err := readHandshake(br, &h); err != nil {
		if errors.Is(err, errHelloFields) {
			return false, refuse(err) // a client of another version: tell it why
		}
		return false, err
	}
	if h.Proto != ProtocolVersion {
		return false, refuse(fmt.Errorf("%w: the client (restoresync %s) speaks protocol %d, this agent (restoresync %s) speaks %d: install the same version on both hosts",
			ErrProtocol, h.Version, h.Proto, cfg.Version, ProtocolVersion))
	}
	comp, err := ParseCompression(h.Compression)
	if err != nil {
		return false, refuse(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	skip := defaultSkipList
	if h.SkipCompress != nil {
		if skip, err = ParseSkipList(*h.SkipCompress); err != nil {
			return false, refuse(fmt.Errorf("%w: %w", ErrProtocol, err))
		}
	}
	s := &server{cfg: cfg, hello: h}
	switch h.Role {
	case RoleSender:
		src, err := s.openSource()
		if err != nil {
			return false, refuse(err)
		}
		defer src.Close()
		s.src = src
		if cfg.OneStream && comp.Codec == CodecNone && os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(1)
		}
	case RoleGlob:
		m, err := s.glob(h.Path)
		if err != nil {
			return false, refuse(err)
		}
		rep.Matches = m
		return false, writeHandshake(out, rep)
	case RoleSizes:
		sizes, err := s.sizes(ctx)
		if err != nil {
			return false, refuse(err)
		}
		rep.Sizes = sizes
		// The reply ends the request: the stream may carry another
		// handshake (a client that parks it), or end.
		return true, writeHandshake(out, rep)
	case RoleSums:
		sums, err := s.sums(ctx)
		if err != nil {
			return false, refuse(err)
		}
		rep.Sums = sums
		return false, writeHandshake(out, rep)
	case RoleReceiver:
		if cfg.ReadOnly || cfg.NewSink == nil {
			return false, refuse(errors.New("this endpoint is read-only: it cannot receive files"))
		}
		dst, err := s.resolve(h.Path)
		if err != nil {
			return false, refuse(err)
		}
		s.dst = dst
	default:
		role, ok := extraRoles[h.Role]
		if !ok {
			return false, refuse(fmt.Errorf("%w: unknown role %q", ErrProtocol, h.Role))
		}
		src, err := s.openSource()
		if err != nil {
			return false, refuse(err)
		}
		defer src.Close()
		s.src = src
		if err := writeHandshake(out, rep); err != nil {
			return false, err
		}
		return false, role(ctx, s, br, out, comp)
	}
	rep.Verify = h.Verify
	if err := writeHandshake(out, rep); err != nil {
		return false, err
	}
	fw, err := newFrameWriter(out, comp)
	if err != nil {
		return false, err
	}
	fw.setSkipList(skip)
	s.enc = encoder{fw: fw, verify: h.Verify}
	s.dec = decoder{fr: newFrameReader(br), verify: h.Verify}
	defer s.dec.fr.Close() // a loop that ended early reads no more frames
	defer func() {
		if s.chunks != nil {
			s.chunks.Close() // a walk the client no longer reads
		}
	}()
	err = s.loop(ctx)
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if s.sink != nil {
		s.sink.Close()
	}
	if err != nil || !s.next {
		return false, err
	}
	// msgNext: end this session's frames both ways, so that the next
	// handshake is read from br where the client's frames ended.
	if _, err := out.Write([]byte{framesEnd}); err != nil {
		return false, err
	}
	io.Copy(io.Discard, readerFunc(s.dec.fr.Read))
	<-s.dec.fr.exited
	if !s.dec.fr.ended.Load() {
		return false, nil // the client closed the stream instead
	}
	return true, nil
}

// roleFunc serves a role other than the raw sender and receiver, after a
// successful handshake: s.src is the opened source tree (s.hello the
// client's hello), in is the rest of the client's stream and out the
// stream back, to be framed with comp. A method's file in this package adds
// its roles to extraRoles (sender-side roles only: s.src is set).
type roleFunc func(ctx context.Context, s *server, in *bufio.Reader, out io.Writer, comp Compression) error

// extraRoles are the roles of the other restore methods, by Hello.Role.
var extraRoles = map[string]roleFunc{}

// closedChan is a closed channel: a wait on it ends at once.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

type server struct {
	cfg   ServerConfig
	hello Hello
	src   *LocalSource
	dst   string
	sink  Sink
	enc   encoder
	dec   decoder
	// planned is the list of the last msgFileList, which msgFinish may
	// refer to instead of sending it again.
	planned []treewalk.Entry
	// chunks is the walk the msgList requests take their chunks from,
	// started by the first; listed says its last chunk went out.
	chunks *treewalk.Chunks
	listed bool
	// idle is the time the loop has waited for the client's next message:
	// with the client's reports (msgRate), how --compress auto knows the
	// link (or the client) paced it.
	idle time.Duration
	// push is a push's list streamed in chunks, from the first
	// msgPlanChunk (pushchunks.go).
	push *pushChunks
	// next says the session ended with msgNext.
	next bool
}

// resolve maps a client's path to a local one, confined beneath cfg.Root
// when it is set (lexically here; symlinks are confined by os.Root).
func (s *server) resolve(p string) (string, error) {
	if s.cfg.Root == "" {
		if p == "" {
			p = "."
		}
		return p, nil
	}
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if strings.Contains("/"+p+"/", "/../") {
		return "", fmt.Errorf("%w: %q", ErrOutsideRoot, p)
	}
	if rel == "" {
		rel = "."
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %q", ErrOutsideRoot, p)
	}
	return filepath.Join(s.cfg.Root, rel), nil
}

// openSource opens what the client asked for: Hello.Roots through
// Hello.Filters, or Hello.Path (a directory's contents, or a file under
// its name), confined beneath cfg.Root when it is set.
func (s *server) openSource() (*LocalSource, error) {
	sel := Selection{Roots: s.hello.Roots, Filters: s.hello.Filters}
	open, stat := OpenBase, os.Stat
	if s.cfg.Root != "" {
		served, err := os.OpenRoot(s.cfg.Root)
		if err != nil {
			return nil, fmt.Errorf("open served root: %w", err)
		}
		defer served.Close()
		escapes := escapesError(served)
		beneath := func(p string) (string, error) {
			if _, err := s.resolve(p); err != nil {
				return "", err
			}
			rel := strings.TrimPrefix(path.Clean("/"+p), "/")
			if rel == "" {
				rel = "."
			}
			return rel, nil
		}
		open = func(base string) (*os.Root, error) {
			rel, err := beneath(base)
			if err != nil {
				return nil, err
			}
			sub, err := served.OpenRoot(rel)
			if err != nil && errors.Is(err, escapes) {
				return nil, fmt.Errorf("%w: %q", ErrOutsideRoot, base)
			}
			return sub, err
		}
		stat = func(p string) (fs.FileInfo, error) {
			rel, err := beneath(p)
			if err != nil {
				return nil, err
			}
			return served.Stat(rel)
		}
	}
	if len(sel.Roots) == 0 {
		if _, err := s.resolve(s.hello.Path); err != nil {
			return nil, err
		}
		sel.Roots = []SourceRoot{SingleRoot(s.hello.Path, stat)}
	}
	return OpenSelection(sel, open)
}

// readBytes is the sender's read size: the client's --read-buffer,
// chunkBytes by default, within 4 KiB and maxReadBuffer.
func (s *server) readBytes() int {
	rb := s.hello.ReadBufferBytes
	if rb <= 0 {
		rb = chunkBytes
	}
	return min(max(rb, 4<<10), maxReadBuffer)
}

// readBuffer allocates the tar sender's disk read buffer, of readBytes.
func (s *server) readBuffer() []byte { return make([]byte, s.readBytes()) }

func (s *server) loop(ctx context.Context) error {
	readBytes := s.readBytes()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		m, err := s.dec.byte()
		s.idle += time.Since(t0)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case m == msgBye:
			return nil
		case m == msgRate:
			b, err := s.dec.uvarint()
			if err != nil {
				return err
			}
			us, err := s.dec.uvarint()
			if err != nil {
				return err
			}
			if b > 1<<62 || us > 1<<62 {
				return fmt.Errorf("%w: rate report out of range", ErrProtocol)
			}
			s.enc.fw.coder.peerReceived(int64(b), time.Duration(us)*time.Microsecond, s.idle)
			continue // no reply
		case m == msgNext:
			s.next = true
			return nil
		case m == msgStats:
			st := s.enc.fw.coder.Stats()
			s.enc.status(nil)
			s.enc.frameStats(st)
		case m == msgList && s.src != nil:
			ch, err := s.nextChunk(ctx)
			s.enc.status(err)
			if err == nil {
				s.enc.chunk(&ch)
			}
		case m == msgRead && s.src != nil:
			items, err := s.dec.items()
			if err != nil {
				return err
			}
			s.enc.status(nil)
			sendItems(ctx, &s.enc, s.src, items, readBytes)
		case m == msgFileList && s.dst != "":
			entries, err := s.dec.entries()
			if err != nil {
				return err
			}
			s.planned = entries
			sink, err := s.openSink(ctx)
			var res PlanResult
			if err == nil {
				res, err = sink.Plan(ctx, entries)
			}
			s.enc.status(err)
			if err == nil {
				s.enc.planReply(res)
			}
		case m == msgWrite && s.dst != "":
			if err := s.write(ctx); err != nil {
				return err
			}
		case m == msgCommit && s.dst != "":
			e, err := s.dec.entry()
			if err != nil {
				return err
			}
			sink, err := s.openSink(ctx)
			s.enc.status(err)
			if err == nil {
				msg := ""
				if err := sink.Commit(ctx, &e); err != nil {
					msg = err.Error()
				}
				s.enc.str(msg)
			}
		case m == msgFinish && s.dst != "":
			same, err := s.dec.bool()
			if err != nil {
				return err
			}
			entries := s.planned
			if same && entries == nil {
				return fmt.Errorf("%w: finish refers to a plan that was not sent", ErrProtocol)
			}
			if !same {
				if entries, err = s.dec.entries(); err != nil {
					return err
				}
			}
			s.finishReply(ctx, entries)
		case m == msgPlanChunk && s.dst != "":
			if err := s.servePlanChunk(ctx); err != nil {
				return err
			}
		case m == msgFinishPlanned && s.dst != "":
			if err := s.serveFinishPlanned(ctx); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unexpected message %d for role %s", ErrProtocol, m, s.hello.Role)
		}
		if err := s.enc.flush(); err != nil {
			return err
		}
	}
}

// nextChunk is the next chunk of the walk, which the first msgList
// starts and which goes on between requests; after the last chunk a new
// msgList starts a new walk. When the walk has no chunk ready and the
// client has sent more requests behind this one (reads pipelined on the
// same stream), the reply is an empty chunk, not the last, rather than
// holding those requests until the walk gets on: the client asks again.
func (s *server) nextChunk(ctx context.Context) (treewalk.Chunk, error) {
	if s.chunks == nil || s.listed {
		if s.chunks != nil {
			s.chunks.Close()
		}
		s.chunks, s.listed = s.src.ListChunks(ctx), false
	}
	var ch treewalk.Chunk
	var err error
	for {
		wake := s.dec.fr.arrived
		if s.dec.fr.input() {
			wake = closedChan
		}
		var ok bool
		if ch, ok, err = s.chunks.NextOr(wake); ok {
			break
		}
		if s.dec.fr.input() {
			return treewalk.Chunk{}, nil // empty: the walk is behind
		}
	}
	if err == io.EOF { // a walk always ends with a Last chunk
		err = fmt.Errorf("file list: the walk ended without its last chunk")
	}
	s.listed = ch.Last || err != nil
	return ch, err
}

// write receives one msgWrite batch and answers with its per-item errors.
func (s *server) write(ctx context.Context) error {
	items, err := s.dec.items()
	if err != nil {
		return err
	}
	sink, sinkErr := s.openSink(ctx)
	var errs []itemError
	for i := range items {
		var w ItemWriter = discardWriter{}
		if sinkErr == nil {
			w = sink
		}
		ierr, err := recvItemData(ctx, &s.dec, w, &items[i])
		if err != nil {
			return err
		}
		if ierr != nil {
			errs = append(errs, itemError{i, errKind(ierr), ierr.Error()})
		}
	}
	s.enc.status(sinkErr)
	if sinkErr == nil {
		s.enc.itemErrors(errs)
	}
	return nil
}

func (s *server) openSink(ctx context.Context) (Sink, error) {
	if s.sink != nil {
		return s.sink, nil
	}
	var opts ReceiverOptions
	if s.hello.Receiver != nil {
		opts = *s.hello.Receiver
	}
	sink, err := s.cfg.NewSink(ctx, s.dst, opts)
	if err != nil {
		return nil, err
	}
	s.sink = sink
	return sink, nil
}

type discardWriter struct{}

func (discardWriter) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

// escapesError returns the error os.Root wraps (unexported in package os)
// for a path that leads out of it, by a symlink or "..", so that errors.Is
// finds it in the errors of r's methods: asking for ".." beneath r always
// yields it.
func escapesError(r *os.Root) error {
	_, err := r.Stat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return errors.New("os.Root did not refuse \"..\"") // matches nothing else
}

// finishReply finishes entries on the receiver's sink (msgFinish,
// msgFinishPlanned) and writes the reply: the status, then, when the sink
// could be opened and finished, the per-entry errors.
func (s *server) finishReply(ctx context.Context, entries []treewalk.Entry) {
	sink, err := s.openSink(ctx)
	var errs []*treewalk.PathError
	if err == nil {
		errs, err = sink.Finish(ctx, entries)
	}
	s.enc.status(err)
	if err == nil {
		s.enc.pathErrors(errs)
	}
}
