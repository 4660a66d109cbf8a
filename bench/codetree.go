package bench

import (
	"path"
	"time"
)

// codeTree plans n source files under dir (which must be planned already),
// spread over a random hierarchy at most depthLeft directories deeper. All
// files get mtimes within an hour after base, as an unpacked release has.
func (p *plan) codeTree(r *rng, dir string, n, depthLeft int, base int64) {
	here := n
	if depthLeft > 0 && n > 6 {
		here = int(r.between(3, int64(max(3, n/3))))
	}
	style := path.Base(dir)
	for range here {
		p.codeFile(r, dir, style, base)
	}
	rest := n - here
	if rest <= 0 {
		return
	}
	subs := int(r.between(1, int64(min(5, rest))))
	weights := make([]int64, subs)
	var total int64
	for i := range weights {
		weights[i] = r.between(1, 8)
		total += weights[i]
	}
	for i, w := range weights {
		share := int(int64(rest) * w / total)
		if i == subs-1 {
			share = rest // the last one takes the rounding
		}
		rest -= share
		if share == 0 {
			continue
		}
		sub := p.unique(dir, r.pick(dirNames), "")
		p.dir(sub, dirMode(r))
		p.codeTree(r, sub, share, depthLeft-1, base)
	}
}

// dirMode returns a directory mode as hosting accounts have them: mostly
// 0755, some 0750 and a few traverse-only 0711.
func dirMode(r *rng) uint32 {
	switch n := r.intn(100); {
	case n < 3:
		return 0o711
	case n < 10:
		return 0o750
	}
	return 0o755
}

// fileMode returns a source file's mode: mostly 0644, a few 0600 and 0755.
func fileMode(r *rng) uint32 {
	switch n := r.intn(100); {
	case n < 3:
		return 0o600
	case n < 5:
		return 0o755
	}
	return 0o644
}

// codeSize returns the size of a source file: most a few KiB, some large.
func codeSize(r *rng) int64 {
	if r.percent(2) {
		return r.spread(24<<10, 200<<10)
	}
	return r.spread(200, 24<<10)
}

// codeFile plans one source file in dir. Directories named js or css hold
// only scripts or stylesheets; others hold mostly PHP.
func (p *plan) codeFile(r *rng, dir, style string, base int64) {
	mtime := base + r.between(0, int64(time.Hour))
	mode, size := fileMode(r), codeSize(r)
	stem := r.pick(nouns)
	if r.percent(50) {
		stem = r.pick(verbs) + "-" + stem
	}
	var ext string
	var c content
	switch style {
	case "js":
		ext, c = ".js", contentJS
		if r.percent(40) {
			ext, c = ".min.js", contentMinJS
		}
	case "css":
		ext, c = ".css", contentCSS
		if r.percent(30) {
			ext = ".min.css"
		}
	default:
		switch n := r.intn(100); {
		case n < 70:
			ext, c = ".php", contentPHP
			if r.percent(40) {
				stem = "class-" + r.pick(prefixes) + "-" + stem
			}
		case n < 78:
			ext, c = ".js", contentJS
		case n < 84:
			ext, c = ".css", contentCSS
		case n < 88:
			ext, c = ".json", contentJSON
		case n < 91:
			ext, c = ".html", contentHTML
		case n < 95:
			ext, c = ".txt", contentText
		case n < 96:
			ext, c, mode = ".sh", contentShell, 0o755
		default:
			ext, c = ".png", contentPNG
			size = r.spread(2<<10, 60<<10)
		}
	}
	p.file(p.unique(dir, stem, ext), mode, size, c, mtime)
}
