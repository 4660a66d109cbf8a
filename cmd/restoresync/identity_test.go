package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -i is ssh's --identity: given a directory, as an rsync user typing -i
// for --itemize-changes would ("-i SRC DST DST2"), the command refuses it
// with a usage error (exit 1) that names --itemize-changes, and restores
// nothing; a key file path that is not a directory is taken as before.
func TestIdentityFlagRefusesADirectory(t *testing.T) {
	src, dst, dst2 := smallTree(t), filepath.Join(t.TempDir(), "dst"), filepath.Join(t.TempDir(), "dst2")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, "restore", "-i", src, dst, dst2)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--itemize-changes") {
		t.Errorf("restore -i DIR DST DST2: want exit %d naming --itemize-changes:\n%s", exitUsage, r)
	}
	if _, err := os.Stat(dst2); !os.IsNotExist(err) {
		t.Errorf("restore -i DIR DST DST2 made %s: %v", dst2, err)
	}
	for _, args := range [][]string{{"ls", "-i", src, src}, {"bench", "run", "-i", src, "--src", src}} {
		if r := runIn(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "--itemize-changes") {
			t.Errorf("%s: want exit %d naming --itemize-changes:\n%s", strings.Join(args[:2], " "), exitUsage, r)
		}
	}
	// -i takes the next word, an option of rsync's among them: it is
	// refused for it, and nothing is restored.
	for _, args := range [][]string{{"-n", "-i", "--delete"}, {"-ani", "--delete"}} {
		out := filepath.Join(t.TempDir(), "out")
		r := runIn(t, append(append([]string{"restore"}, args...), src, out)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--itemize-changes") {
			t.Errorf("restore %s SRC DST: want exit %d naming --itemize-changes:\n%s", strings.Join(args, " "), exitUsage, r)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("restore %s SRC DST made %s: %v", strings.Join(args, " "), out, err)
		}
	}
	// -i takes a remote SRC ("restore -ni host:/src/ dst", as with rsync):
	// refused, naming --itemize-changes, not "takes at least 2 arguments".
	for _, srcArg := range []string{"backup:/home/alice/", "ssh://root@backup/home/alice"} {
		out := filepath.Join(t.TempDir(), "out")
		r := runIn(t, "restore", "-ni", srcArg, out)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--itemize-changes") {
			t.Errorf("restore -ni %s DST: want exit %d naming --itemize-changes:\n%s", srcArg, exitUsage, r)
		}
	}
	key := filepath.Join(t.TempDir(), "id_ed25519") // need not exist for a local restore
	if r := runIn(t, "restore", "-i", key, src, filepath.Join(t.TempDir(), "ok")); r.code != 0 {
		t.Errorf("restore -i KEYFILE SRC DST (local): %s", r)
	}
}
