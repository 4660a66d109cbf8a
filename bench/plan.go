package bench

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The clock of generated trees. Every mtime falls in the genSpan before
// genEpoch, so a tree looks a few years old whatever the day it is made.
var genEpoch = time.Date(2025, time.March, 14, 9, 26, 53, 0, time.UTC)

const genSpan = 4 * 365 * 24 * time.Hour

// nodeKind is what a plan node becomes on disk.
type nodeKind uint8

const (
	nodeDir nodeKind = iota + 1
	nodeFile
	nodeSymlink
	nodeHardlink
)

// content says how a file's bytes are made.
type content uint8

const (
	contentEmpty        content = iota
	contentLiteral              // node.data, verbatim
	contentPHP                  // WordPress-style PHP
	contentJS                   // readable JavaScript
	contentMinJS                // minified JavaScript
	contentCSS                  // stylesheet
	contentHTML                 // HTML page
	contentText                 // readme / change log
	contentJSON                 // block.json-like manifest
	contentShell                // shell script
	contentMail                 // RFC 5322 message
	contentMailAttached         // RFC 5322 message with a base64 attachment
	contentSQL                  // mysqldump output
	contentLog                  // Apache combined access log
	contentJPEG                 // JPEG magic, then random bytes
	contentPNG                  // PNG magic, then random bytes
	contentMP4                  // MP4 magic, then random bytes
	contentPDF                  // PDF magic, then random bytes
	contentRandom               // random bytes only
	contentHalfText             // exactly size bytes: log text, then random from size/2 on
)

// node is one entry of a planned tree. The plan is made first, from the
// seed alone, and written afterwards, so that the writing can go in parallel
// without changing a byte of the result.
type node struct {
	path    string // slash-separated, relative to the tree's root
	kind    nodeKind
	mode    uint32 // permission, setuid, setgid and sticky bits
	mtimeNs int64  // nanoseconds since the Unix epoch; dirs get theirs in finish
	size    int64  // bytes wanted; text files stop at the first unit boundary past it
	exact   bool   // cut text at exactly size bytes instead
	content content
	data    string // literal content, symlink target, or a hardlink's existing path
	owner   ownerClass
}

// plan is a tree to be written: nodes in creation order, parents before
// children.
type plan struct {
	seed  int64
	nodes []node
	index map[string]int // path → position in nodes
}

func newPlan(seed int64) *plan {
	return &plan{seed: seed, index: map[string]int{}}
}

// when returns a random mtime in the plan's span, to the nanosecond.
func when(r *rng) int64 {
	return genEpoch.UnixNano() - r.between(0, int64(genSpan))
}

// add records n after making sure its parent directories exist. Adding a path
// twice is a bug in a profile and panics.
func (p *plan) add(n node) {
	if _, dup := p.index[n.path]; dup {
		panic(fmt.Sprintf("bench: %s planned twice", n.path))
	}
	if parent := path.Dir(n.path); parent != "." {
		if _, ok := p.index[parent]; !ok {
			p.dir(parent, 0o755)
		}
	}
	p.index[n.path] = len(p.nodes)
	p.nodes = append(p.nodes, n)
}

// has reports whether name is already planned.
func (p *plan) has(name string) bool {
	_, ok := p.index[name]
	return ok
}

// unique returns dir/stem+ext, or dir/stem-2+ext and so on when that is taken.
func (p *plan) unique(dir, stem, ext string) string {
	name := path.Join(dir, stem+ext)
	for i := 2; p.has(name); i++ {
		name = path.Join(dir, stem+"-"+strconv.Itoa(i)+ext)
	}
	return name
}

// dir plans a directory (its mtime comes from its contents in finish).
func (p *plan) dir(name string, mode uint32) {
	if !p.has(name) {
		p.add(node{path: name, kind: nodeDir, mode: mode})
	}
}

// file plans a regular file of about size bytes made as c says.
func (p *plan) file(name string, mode uint32, size int64, c content, mtimeNs int64) {
	p.add(node{path: name, kind: nodeFile, mode: mode, size: size, content: c, mtimeNs: mtimeNs})
}

// literal plans a regular file holding exactly data.
func (p *plan) literal(name string, mode uint32, data string, mtimeNs int64) {
	p.add(node{path: name, kind: nodeFile, mode: mode, size: int64(len(data)), content: contentLiteral, data: data, mtimeNs: mtimeNs})
}

// symlink plans a symbolic link to target, which is stored as given and
// need not exist.
func (p *plan) symlink(name, target string, mtimeNs int64) {
	p.add(node{path: name, kind: nodeSymlink, mode: 0o777, data: target, mtimeNs: mtimeNs})
}

// hardlink plans another name for the already planned file existing.
func (p *plan) hardlink(name, existing string) {
	i, ok := p.index[existing]
	if !ok || p.nodes[i].kind != nodeFile {
		panic(fmt.Sprintf("bench: hardlink %s to unplanned file %s", name, existing))
	}
	p.add(node{path: name, kind: nodeHardlink, data: existing, mtimeNs: p.nodes[i].mtimeNs})
}

// own gives the subtree at prefix (prefix included) to owner class c.
func (p *plan) own(prefix string, c ownerClass) {
	for i := range p.nodes {
		if n := &p.nodes[i]; n.path == prefix || strings.HasPrefix(n.path, prefix+"/") {
			n.owner = c
		}
	}
}

// finish gives every directory an mtime a little after its newest entry (an
// empty one gets a random time), deepest directories first, as a real tree
// that was last written to bottom-up looks.
func (p *plan) finish() (rootMtimeNs int64) {
	r := newRNG(p.seed, "finish")
	newest := make(map[string]int64, len(p.nodes)/8)
	order := make([]int, len(p.nodes))
	for i := range order {
		order[i] = i
	}
	// Deepest first; ties in creation order, so the result depends only on
	// the plan.
	slices.SortStableFunc(order, func(a, b int) int {
		return strings.Count(p.nodes[b].path, "/") - strings.Count(p.nodes[a].path, "/")
	})
	for _, i := range order {
		n := &p.nodes[i]
		if n.kind == nodeDir {
			if t, ok := newest[n.path]; ok {
				n.mtimeNs = t + r.between(0, int64(time.Hour))
			} else {
				n.mtimeNs = when(r)
			}
		}
		parent := path.Dir(n.path)
		newest[parent] = max(newest[parent], n.mtimeNs)
	}
	if t, ok := newest["."]; ok {
		return t + r.between(0, int64(time.Hour))
	}
	return when(r)
}
