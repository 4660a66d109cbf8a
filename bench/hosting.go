package bench

import (
	"encoding/base64"
	"math"
	"path"
	"strconv"
	"time"
)

// hosting plans a shared-hosting account (cPanel-like home directory): a
// WordPress site with plugins, themes and uploads, a Maildir, a database
// dump, access logs, and the odd entries a restore must get right (links,
// empty files and dirs, special modes, awkward names). See the "hosting"
// entry of profiles for the sizes at scale 1.
type hosting struct {
	p     *plan
	scale float64
	seed  int64
	// themeImages is the first theme's image directory, where the uploaded
	// logo gets a second name.
	themeImages string
}

// count scales n, never going below lo.
func (h *hosting) count(n, lo int) int {
	return max(lo, int(math.Round(float64(n)*h.scale)))
}

// bytes scales n bytes, never going below lo.
func (h *hosting) bytes(n, lo int64) int64 {
	return max(lo, int64(math.Round(float64(n)*h.scale)))
}

// rng returns the random stream of one section of the account.
func (h *hosting) rng(section string) *rng { return newRNG(h.seed, "hosting/"+section) }

func buildHosting(p *plan, scale float64) (rootMode uint32) {
	h := &hosting{p: p, scale: scale, seed: p.seed}
	h.home()
	h.site()
	h.uploads()
	h.mail()
	h.dataFiles()
	p.own("public_html/wp-content/uploads", ownerWeb)
	p.own("public_html/wp-content/cache", ownerWeb)
	p.own("mail", ownerMail)
	p.own("logs", ownerDaemon)
	p.own("tmp", ownerBin)
	p.own("public_html/wp-content/shared-fonts", ownerDaemon)
	return 0o711 // a home directory others may traverse to reach public_html
}

// home plans the account's dot files and small top-level directories.
func (h *hosting) home() {
	p, r := h.p, h.rng("home")
	p.literal(".bashrc", 0o644, "# .bashrc\n\nif [ -f /etc/bashrc ]; then\n\t. /etc/bashrc\nfi\n\nalias wp='php ~/bin/wp-cli.phar'\n", when(r))
	p.literal(".bash_profile", 0o644, "# .bash_profile\n\n[ -f ~/.bashrc ] && . ~/.bashrc\nPATH=$PATH:$HOME/bin\nexport PATH\n", when(r))
	p.dir(".ssh", 0o700)
	key := make([]byte, 51)
	r.fill(key)
	p.literal(".ssh/authorized_keys", 0o600, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"+base64.RawStdEncoding.EncodeToString(key)+" deploy@laptop\n", when(r))
	p.literal(".my.cnf", 0o600, "[client]\nuser=\"example_wp\"\npassword=\""+string(appendHex(r, nil, 24))+"\"\n", when(r))
	p.dir("bin", 0o700)
	p.file("bin/backup.sh", 0o755, 2<<10, contentShell, when(r))
	p.dir("tmp", 0o700) // empty
	p.dir("public_ftp", 0o750)
	p.dir("public_ftp/incoming", 0o700) // empty
	p.symlink("www", "public_html", when(r))
}

// site plans public_html: WordPress core, plugins, themes and the links.
func (h *hosting) site() {
	p, r := h.p, h.rng("site")
	p.dir("public_html", 0o750)
	core := when(r) // when core was last updated
	for _, f := range []string{"wp-load.php", "wp-settings.php", "wp-login.php", "wp-cron.php", "xmlrpc.php", "wp-blog-header.php", "wp-activate.php", "wp-signup.php", "wp-mail.php", "wp-trackback.php", "wp-links-opml.php", "wp-comments-post.php"} {
		p.file("public_html/"+f, 0o644, r.spread(1<<10, 40<<10), contentPHP, core+r.between(0, int64(time.Minute)))
	}
	p.literal("public_html/index.php", 0o644, "<?php\n/**\n * Front to the WordPress application.\n */\ndefine( 'WP_USE_THEMES', true );\nrequire __DIR__ . '/wp-blog-header.php';\n", core)
	p.literal("public_html/wp-config.php", 0o600, wpConfig(r), when(r))
	p.file("public_html/readme.html", 0o644, 7<<10, contentHTML, core)
	p.file("public_html/license.txt", 0o644, 19<<10, contentText, core)
	p.literal("public_html/robots.txt", 0o644, "User-agent: *\nDisallow: /wp-admin/\nAllow: /wp-admin/admin-ajax.php\n", when(r))
	p.literal("public_html/.htaccess", 0o644, "", when(r))  // placeholder, empty
	p.literal("public_html/index.html", 0o644, "", when(r)) // hosting's stub, empty
	p.file("public_html/favicon.ico", 0o644, 15086, contentRandom, when(r))

	p.dir("public_html/wp-admin", 0o755)
	p.codeTree(r, "public_html/wp-admin", h.count(900, 20), 3, core)
	p.dir("public_html/wp-includes", 0o755)
	p.codeTree(r, "public_html/wp-includes", h.count(1800, 30), 5, core)

	silence := "<?php\n// Silence is golden.\n"
	p.dir("public_html/wp-content", 0o755)
	p.literal("public_html/wp-content/index.php", 0o644, silence, core)
	p.dir("public_html/wp-content/cache", 0o755)                                   // empty
	p.dir("public_html/wp-content/upgrade", 0o755)                                 // empty
	p.symlink("public_html/wp-content/debug.log", "../../logs/debug.log", when(r)) // dangling
	p.symlink("public_html/wp-content/shared-fonts", "/usr/share/fonts/truetype/dejavu", when(r))

	// Plugins share a budget of files, some large, most small.
	p.dir("public_html/wp-content/plugins", 0o755)
	p.literal("public_html/wp-content/plugins/index.php", 0o644, silence, core)
	plugins := h.count(36, 2)
	budget := h.count(11000, 40)
	var first string
	for i := range plugins {
		dir := p.unique("public_html/wp-content/plugins", r.pick(prefixes)+"-"+r.pick(nouns), "")
		if i == 0 {
			first = dir
		}
		p.dir(dir, 0o755)
		t := when(r)
		p.file(dir+"/"+path.Base(dir)+".php", 0o644, r.spread(2<<10, 30<<10), contentPHP, t)
		p.file(dir+"/readme.txt", 0o644, r.spread(2<<10, 20<<10), contentText, t)
		n := budget / (plugins - i)
		if i < plugins-1 {
			n = int(r.spread(int64(max(1, n/4)), int64(max(2, n*2))))
			n = min(n, budget-(plugins-1-i))
		}
		budget -= n
		p.codeTree(r, dir, n, 4, t)
	}
	// One deep vendor path, so the tree always reaches eight directories.
	deep := first + "/vendor/composer/installers/src"
	p.file(deep+"/Installer.php", 0o644, 6<<10, contentPHP, when(r))
	p.hardlink(first+"/license.txt", "public_html/license.txt")

	p.dir("public_html/wp-content/themes", 0o755)
	p.literal("public_html/wp-content/themes/index.php", 0o644, silence, core)
	themes := h.count(4, 1)
	for i := range themes {
		dir := p.unique("public_html/wp-content/themes", r.pick(prefixes), "")
		p.dir(dir, 0o755)
		t := when(r)
		p.file(dir+"/style.css", 0o644, r.spread(4<<10, 60<<10), contentCSS, t)
		p.file(dir+"/functions.php", 0o644, r.spread(2<<10, 30<<10), contentPHP, t)
		p.file(dir+"/theme.json", 0o644, r.spread(2<<10, 20<<10), contentJSON, t)
		p.file(dir+"/screenshot.png", 0o644, r.spread(100<<10, 400<<10), contentPNG, t)
		for _, sub := range []string{"templates", "parts", "patterns", "assets/js", "assets/css"} {
			p.dir(dir+"/"+sub, 0o755)
			p.codeTree(r, dir+"/"+sub, h.count(60, 2), 1, t)
		}
		if i == 0 {
			p.hardlink(dir+"/license.txt", "public_html/license.txt")
			h.themeImages = dir + "/assets/images"
			p.dir(h.themeImages, 0o755)
		}
	}

	// Deployments: current points at the newest release.
	for rel := 1; rel <= 2; rel++ {
		dir := "public_html/releases/" + strconv.Itoa(rel)
		p.dir(dir, 0o755)
		p.literal(dir+"/VERSION", 0o644, "1."+strconv.Itoa(rel)+".0\n", when(r))
		p.file(dir+"/app.js", 0o644, r.spread(4<<10, 40<<10), contentMinJS, when(r))
	}
	p.symlink("public_html/current", "releases/2", when(r))

	p.dir("public_html/cgi-bin", 0o755)
	p.file("public_html/cgi-bin/php-wrapper.cgi", 0o4755, 600, contentShell, when(r)) // setuid
}

// wpConfig returns a wp-config.php with per-seed salts.
func wpConfig(r *rng) string {
	b := []byte("<?php\n/**\n * The base configuration for WordPress.\n */\n\ndefine( 'DB_NAME', 'example_wp' );\ndefine( 'DB_USER', 'example_wp' );\ndefine( 'DB_PASSWORD', '")
	b = appendHex(r, b, 20)
	b = append(b, "' );\ndefine( 'DB_HOST', 'localhost' );\ndefine( 'DB_CHARSET', 'utf8mb4' );\n\n"...)
	const salt = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#%^&*()-_[]{}<>~+=,.;:/?|"
	for _, k := range []string{"AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY", "AUTH_SALT", "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT"} {
		b = append(b, "define( '"...)
		b = append(b, k...)
		b = append(b, "', '"...)
		for range 64 {
			b = append(b, salt[r.intn(len(salt))])
		}
		b = append(b, "' );\n"...)
	}
	b = append(b, "\n$table_prefix = 'wp_';\n\ndefine( 'WP_DEBUG', false );\n\nif ( ! defined( 'ABSPATH' ) ) {\n\tdefine( 'ABSPATH', __DIR__ . '/' );\n}\n\nrequire_once ABSPATH . 'wp-settings.php';\n"...)
	return string(b)
}

// uploads plans wp-content/uploads/YYYY/MM: photos with their resized
// variants, PNGs, PDFs and videos, all incompressible.
func (h *hosting) uploads() {
	p, r := h.p, h.rng("uploads")
	const up = "public_html/wp-content/uploads"
	p.dir(up, 0o2775) // setgid: new uploads keep the web group
	p.literal(up+"/index.html", 0o644, "", when(r))
	first := genEpoch.AddDate(-4, 0, 0)
	items := h.count(240, 4)
	for i := range items {
		month := first.AddDate(0, r.intn(49), 0)
		ym := month.Format("2006/01")
		dir := up + "/" + ym
		if year := path.Dir(dir); !p.has(year) {
			p.dir(year, 0o755)
			p.literal(year+"/index.html", 0o644, "", month.UnixNano()) // empty stub
		}
		p.dir(dir, 0o755)
		start := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC).UnixNano()
		t := start + r.between(0, int64(27*24*time.Hour))
		switch {
		case i == 0: // always one video over 1 MiB, whatever the scale
			p.file(p.unique(dir, "Team Video 2023", ".mp4"), 0o644, r.spread(3<<19, 3<<20), contentMP4, t)
		case i == 1:
			p.file(p.unique(dir, "café-menü", ".jpg"), 0o644, r.spread(50<<10, 300<<10), contentJPEG, t)
			logo := p.unique(dir, "logo", ".png")
			p.file(logo, 0o644, 60<<10, contentPNG, t)
			p.hardlink(h.themeImages+"/logo.png", logo) // a pair across directories
		case i == 2:
			p.file(p.unique(dir, "Price List (final)", ".pdf"), 0o644, r.spread(100<<10, 1<<20), contentPDF, t)
		default:
			h.uploadItem(r, dir, t)
		}
	}
}

// uploadItem plans one upload and, for photos, its resized variants.
func (h *hosting) uploadItem(r *rng, dir string, t int64) {
	p := h.p
	switch n := r.intn(100); {
	case n < 80:
		stem := "IMG_" + strconv.Itoa(int(r.between(1000, 9999)))
		if r.percent(40) {
			stem = r.pick(prose) + "-" + r.pick(prose)
		}
		name := p.unique(dir, stem, ".jpg")
		p.file(name, 0o644, r.spread(120<<10, 2500<<10), contentJPEG, t)
		stem = name[len(dir)+1 : len(name)-len(".jpg")]
		for _, v := range []struct {
			dims     string
			min, max int64
		}{{"150x150", 50 << 10, 80 << 10}, {"300x200", 60 << 10, 120 << 10}, {"1024x683", 120 << 10, 300 << 10}} {
			p.file(p.unique(dir, stem+"-"+v.dims, ".jpg"), 0o644, r.spread(v.min, v.max), contentJPEG, t+r.between(0, int64(time.Second)))
		}
	case n < 92:
		name := p.unique(dir, r.pick(nouns)+"-"+r.pick(prose), ".png")
		p.file(name, 0o644, r.spread(50<<10, 1<<20), contentPNG, t)
		p.file(name[:len(name)-4]+"-300x300.png", 0o644, r.spread(50<<10, 100<<10), contentPNG, t)
	case n < 97:
		p.file(p.unique(dir, r.pick(prose)+"-"+r.pick(nouns), ".pdf"), 0o644, r.spread(100<<10, 3<<20), contentPDF, t)
	default:
		p.file(p.unique(dir, r.pick(prose)+"-video", ".mp4"), 0o644, r.spread(2<<20, 8<<20), contentMP4, t)
	}
}

// mail plans mail/example.com/USER Maildirs, Maildir++ Sent folders and the
// dovecot bookkeeping files.
func (h *hosting) mail() {
	p, r := h.p, h.rng("mail")
	p.dir("mail", 0o751)
	p.dir("mail/example.com", 0o750)
	users := []struct {
		name  string
		share int // percent of the messages
	}{{"info", 50}, {"john.doe", 30}, {"sales", 20}}
	total := h.count(3000, 12)
	for _, u := range users {
		home := "mail/example.com/" + u.name
		p.dir(home, 0o700)
		n := max(4, total*u.share/100)
		for _, box := range []string{"", ".Sent"} {
			md := home
			if box != "" {
				md = home + "/" + box
				p.dir(md, 0o700)
				n = max(2, n/10)
			}
			for _, sub := range []string{"cur", "new", "tmp"} {
				p.dir(md+"/"+sub, 0o700) // tmp stays empty
			}
			for i := range n {
				t := when(r)
				c := contentMail
				size := r.spread(600, 16<<10)
				if r.percent(2) {
					c, size = contentMailAttached, r.spread(20<<10, 300<<10)
				}
				sec := t / int64(time.Second)
				name := strconv.FormatInt(sec, 10) + ".M" + strconv.FormatInt(t/1000%1000000, 10) + "P" + strconv.Itoa(1000+i) + ".host"
				sub := "cur"
				if i%7 == 3 {
					sub = "new" // unread: no info suffix yet
				} else {
					name += ":2," + r.pick([]string{"S", "S", "RS", "FS", ""})
				}
				p.file(p.unique(md+"/"+sub, name, ""), 0o600, size, c, t)
			}
			p.literal(md+"/dovecot-uidlist", 0o600, "3 V"+strconv.FormatInt(when(r)/1e9, 10)+" N"+strconv.Itoa(n+1)+" G"+string(appendHex(r, nil, 32))+"\n", when(r))
		}
	}
}

// dataFiles plans the database dump and the logs, which shrink with scale.
func (h *hosting) dataFiles() {
	p, r := h.p, h.rng("data")
	p.dir("backups", 0o700)
	p.file("backups/db.sql", 0o600, h.bytes(60<<20, 256<<10), contentSQL, when(r))
	p.dir("logs", 0o750)
	p.file("logs/access.log", 0o644, h.bytes(40<<20, 64<<10), contentLog, genEpoch.UnixNano()-r.between(0, int64(time.Hour)))
	p.file("logs/access.log.1", 0o644, h.bytes(8<<20, 16<<10), contentLog, genEpoch.UnixNano()-int64(24*time.Hour))
	p.symlink("logs/access.log.current", "access.log", when(r))
}
