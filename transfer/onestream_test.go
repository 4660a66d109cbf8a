package transfer

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

const oneStreamChildEnv = "RESTORESYNC_ONESTREAM_CHILD"

// A process that serves one stream alone (serve --stdio) runs a sender of
// uncompressed frames on one processor: the runtime's hand-offs between
// idle processors cost CPU per small file and buy that stream nothing.
// A compressing sender, a receiver, a Serve beside other work (serve
// --listen, OneStream false) and a $GOMAXPROCS the user set keep theirs.
// GOMAXPROCS is the process's, so each case runs in a child of its own.
func TestOneStreamSenderRunsOnOneProcessor(t *testing.T) {
	if c := os.Getenv(oneStreamChildEnv); c != "" {
		oneStreamChild(t, c)
		return
	}
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: GOMAXPROCS is 1 whatever Serve does")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		want      string // GOMAXPROCS after the handshake; "" is the child's default
	}{
		{"sender-none", "", "1"},
		{"sender-lz4", "", ""},
		{"sender-none-shared", "", ""},
		{"receiver-none", "", ""},
		{"sender-none", "GOMAXPROCS=2", "2"},
	} {
		cmd := exec.Command(self, "-test.run=^TestOneStreamSenderRunsOnOneProcessor$", "-test.count=1", "-test.v")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMAXPROCS=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, oneStreamChildEnv+"="+tc.name)
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", tc.name, tc.env, err, out)
		}
		want := tc.want
		if want == "" {
			want = fmt.Sprint(runtime.NumCPU())
		}
		if !strings.Contains(string(out), "GOMAXPROCS after the handshake: "+want+"\n") {
			t.Errorf("%s %s: want GOMAXPROCS %s after the handshake, child said:\n%s", tc.name, tc.env, want, out)
		}
	}
}

// oneStreamChild makes the handshake the case asks for against an
// in-process Serve and prints GOMAXPROCS.
func oneStreamChild(t *testing.T, c string) {
	dir := t.TempDir()
	must(t, os.WriteFile(dir+"/f", []byte("data"), 0o644))
	cfg := ServerConfig{Version: "test", OneStream: !strings.HasSuffix(c, "-shared"), NewSink: (&recordSink{}).open}
	h := Hello{Version: "test", Role: RoleSender, Path: dir, Compression: "none"}
	if strings.Contains(c, "lz4") {
		h.Compression = "lz4"
	}
	if strings.HasPrefix(c, "receiver") {
		h.Role = RoleReceiver
	}
	conn, err := Handshake(t.Context(), PipeStream(t.Context(), cfg), h)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("GOMAXPROCS after the handshake: %d\n", runtime.GOMAXPROCS(0))
	conn.Close()
}
