package transfer

import (
	"errors"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// A file list from a compromised peer whose entries are each well formed
// but which no walk makes: a path twice, a hardlink to a path the list
// does not restore (or not to its group's leader), an entry beneath a
// listed file or symlink. Each is a protocol error naming the entry, for
// a pulled list (List), a pushed one (Plan) and Finish's.
func TestDecoderRejectsLists(t *testing.T) {
	dir := func(p string) treewalk.Entry { return treewalk.Entry{Path: p, Kind: treewalk.KindDir, Mode: 0o755} }
	file := func(p string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: treewalk.KindFile, Mode: 0o644, Size: 3}
	}
	link := func(p, to string) treewalk.Entry {
		e := file(p)
		e.LinkTo = to
		return e
	}
	sym := func(p, target string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: treewalk.KindSymlink, Mode: 0o777, LinkTarget: target}
	}
	symLink := func(p, target, to string) treewalk.Entry {
		e := sym(p, target)
		e.LinkTo = to
		return e
	}
	node := func(p string, k treewalk.Kind, to string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: k, Mode: 0o600, Rdev: 0x6949, LinkTo: to}
	}
	base := []treewalk.Entry{dir("."), dir("public_html"), file("public_html/index.php")}
	tests := []struct {
		name string
		add  []treewalk.Entry
		bad  string // the entry the error names
		msg  string
	}{
		{"file twice", []treewalk.Entry{file("public_html/index.php")}, "public_html/index.php", "listed twice"},
		{"dir twice", []treewalk.Entry{dir("public_html")}, "public_html", "listed twice"},
		{"root twice", []treewalk.Entry{dir(".")}, ".", "listed twice"},
		{"file then dir", []treewalk.Entry{file("a"), dir("a")}, "a", "listed twice"},
		{"symlink then file", []treewalk.Entry{sym("a", "/etc"), file("a")}, "a", "listed twice"},
		{"hardlink to a path not listed", []treewalk.Entry{link("copy", "etc/shadow")}, "copy", "not an earlier regular file of the list"},
		{"hardlink to a later entry", []treewalk.Entry{link("copy", "z"), file("z")}, "copy", "not an earlier regular file"},
		{"hardlink to a dir", []treewalk.Entry{link("copy", "public_html")}, "copy", "not an earlier regular file"},
		{"hardlink to a symlink", []treewalk.Entry{sym("s", "x"), link("copy", "s")}, "copy", "not an earlier regular file"},
		{"hardlink to a follower", []treewalk.Entry{link("a", "public_html/index.php"), link("b", "a")}, "b", "not an earlier regular file"},
		{"hardlink to itself", []treewalk.Entry{link("self", "self")}, "self", "not an earlier regular file"},
		{"symlink hardlinked to a file", []treewalk.Entry{symLink("s", "x", "public_html/index.php")}, "s", "not an earlier symlink"},
		{"fifo hardlinked to a device", []treewalk.Entry{node("dev", treewalk.KindBlkDev, ""), node("f", treewalk.KindFifo, "dev")}, "f", "not an earlier fifo"},
		{"hardlinked dir", []treewalk.Entry{dir("d"), {Path: "e", Kind: treewalk.KindDir, LinkTo: "d"}}, "e", "hardlink"},
		{"beneath a symlink", []treewalk.Entry{sym("etc", "/etc"), file("etc/passwd")}, "etc/passwd", `beneath "etc", which the list makes a symlink`},
		{"beneath a file", []treewalk.Entry{file("public_html/index.php/x")}, "public_html/index.php/x", "makes a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := append(append([]treewalk.Entry{}, base...), tt.add...)
			if err := treewalk.CheckList(list); !errors.Is(err, treewalk.ErrBadList) {
				t.Errorf("CheckList: %v; want ErrBadList", err)
			}
			_, err := decodeMessages(t, func(e *encoder) { e.entries(list) }, func(d *decoder) (any, error) { return d.entries() })
			checkNamedProtocolError(t, err, tt.bad, tt.msg)
		})
	}
	// What walks make passes: the root, nested dirs, a group's followers
	// naming the first member, a symlink with nothing beneath it, paths
	// that share a prefix without being beneath one another, and
	// hardlinked symlinks, fifos and devices (rsync -H links them).
	good := append(append([]treewalk.Entry{}, base...),
		link("public_html/home.php", "public_html/index.php"), link("b", "public_html/index.php"),
		sym("public_html/current", "releases/2"), file("public_html/current.txt"), dir("public_html/x"),
		file("public_html/x/y"), symLink("public_html/x/z", "releases/2", "public_html/current"),
		node("block3", treewalk.KindBlkDev, ""), node("block3.5", treewalk.KindBlkDev, "block3"),
		node("fifo1", treewalk.KindFifo, ""), node("public_html/fifo2", treewalk.KindFifo, "fifo1"))
	got, err := decodeMessages(t, func(e *encoder) { e.entries(good) }, func(d *decoder) (any, error) { return d.entries() })
	if err != nil || !equalEntries(got.([]treewalk.Entry), good) {
		t.Errorf("a good list: %v", err)
	}
}
