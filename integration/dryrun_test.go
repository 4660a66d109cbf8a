package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// restore -n --json lists each entry it would create or update as an
// object with its itemized letters and the source's size and mtime, one
// per line of "changes" and in its order, names exact (a newline in one
// included), deletions with their path; locally and pulled over sshd.
func TestE2EDryRunJSONChangeEntries(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	for name, loc := range map[string]func(src string) []string{
		"local":       func(src string) []string { return []string{src + "/"} },
		"pull, agent": func(src string) []string { return append(sshdArgs(srv), sshdURL(srv, src+"/")) },
	} {
		src := smallTree(t)
		odd := filepath.Join(src, "public_html", "nl\nname.php")
		if err := os.WriteFile(odd, []byte("<?php\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("index.php", filepath.Join(src, "public_html", "home.php")); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "dst")
		if r := runBin(t, append(append([]string{"restore"}, loc(src)...), dst)...); r.code != 0 {
			t.Fatalf("%s: %v", name, r)
		}
		// One file changed on the source, one new, one extra on DST.
		changed := filepath.Join(src, "public_html", "index.php")
		if err := os.WriteFile(changed, []byte("<?php echo 'changed';\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
		os.Chtimes(changed, mt, mt)
		if err := os.WriteFile(filepath.Join(src, "new.txt"), []byte("new file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, "extra"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(odd)
		os.Remove(filepath.Join(dst, "public_html", "nl\nname.php"))
		if err := os.WriteFile(odd, []byte("<?php // again\n"), 0o644); err != nil {
			t.Fatal(err)
		}

		args := append(append([]string{"restore", "-n", "--delete", "--json"}, loc(src)...), dst)
		r := runBin(t, args...)
		if r.code != 0 {
			t.Fatalf("%s: %v", name, r)
		}
		var rep struct {
			Changes       []string `json:"changes"`
			ChangeEntries []struct {
				Path    string `json:"path"`
				Itemize string `json:"itemize"`
				Kind    string `json:"kind"`
				Size    int64  `json:"size"`
				MtimeNs int64  `json:"mtime_ns"`
				Mtime   string `json:"mtime"`
			} `json:"change_entries"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%s: %v\n%v", name, err, r)
		}
		if len(rep.ChangeEntries) != len(rep.Changes) || len(rep.Changes) == 0 {
			t.Fatalf("%s: %d change_entries for %d changes: %s", name, len(rep.ChangeEntries), len(rep.Changes), r.stdout)
		}
		seen := map[string]bool{}
		for i, c := range rep.ChangeEntries {
			if !strings.HasPrefix(rep.Changes[i], c.Itemize+" ") {
				t.Errorf("%s: change_entries[%d] %+v, line %q", name, i, c, rep.Changes[i])
			}
			seen[c.Path] = true
			if c.Itemize == "*deleting" {
				if c.Path != "extra" || c.Size != 0 || c.MtimeNs != 0 {
					t.Errorf("%s: deletion %+v, want extra with no size or mtime", name, c)
				}
				continue
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(src, c.Path), &st); err != nil {
				t.Errorf("%s: change_entries[%d] %+v: no such source entry: %v", name, i, c, err)
				continue
			}
			wantSize := int64(0)
			if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				wantSize = st.Size
			}
			if c.Size != wantSize || c.MtimeNs != st.Mtim.Nano() || c.Mtime != time.Unix(0, st.Mtim.Nano()).UTC().Format(time.RFC3339Nano) {
				t.Errorf("%s: change_entries[%d] %+v, the source has size %d, mtime %d", name, i, c, wantSize, st.Mtim.Nano())
			}
		}
		for _, p := range []string{"public_html/index.php", "new.txt", "public_html/nl\nname.php", "extra"} {
			if !seen[p] {
				t.Errorf("%s: change_entries lack %q: %s", name, p, r.stdout)
			}
		}
	}
}
