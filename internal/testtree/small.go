// Package testtree writes small trees shaped like a hosting account for
// the tests of the command and of the built binary, so that both restore
// the same input.
//
// Files: small.go — Small.
package testtree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Small writes a small account-like tree (PHP files, an image, a maildir
// message, an empty file; directories 0755, files 0644) under a new
// temporary directory of t and returns its path. It fails t on any error.
// Safe for parallel tests.
func Small(t testing.TB) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	files := map[string]string{
		"public_html/index.php":      "<?php echo 'hi';\n",
		"public_html/wp-config.php":  "<?php define('DB_PASSWORD', 'x');\n",
		"public_html/img/logo.png":   strings.Repeat("\x89PNG", 3000),
		"mail/cur/1700000000.M1.box": "Subject: hi\n\nhello\n",
		"empty":                      "",
	}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}
