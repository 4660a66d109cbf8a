package bench

import (
	"encoding/base64"
	"strconv"
	"time"
)

// mailText is one RFC 5322 message as a Maildir holds it: delivery headers,
// a plain-text body and, now and then, a base64 attachment. Its dates are the
// file's mtime, as a delivery agent leaves them.
type mailText struct {
	r        *rng
	at       time.Time
	rcpt     string
	attached bool
}

func (t *mailText) head(b []byte) []byte {
	r := t.r
	first, last, dom := r.pick(firstNames), r.pick(lastNames), r.pick(mailDomains)
	date := t.at.UTC().Format(time.RFC1123Z)
	b = append(b, "Return-Path: <"...)
	b = append(b, first...)
	b = append(b, '.')
	b = append(b, last...)
	b = append(b, '@')
	b = append(b, dom...)
	b = append(b, ">\nDelivered-To: "...)
	b = append(b, t.rcpt...)
	b = append(b, "\nReceived: from mail."...)
	b = append(b, dom...)
	b = append(b, " (mail."...)
	b = append(b, dom...)
	b = append(b, " ["...)
	b = appendIP(r, b)
	b = append(b, "])\n\tby host.example.com with ESMTPS id "...)
	b = appendHex(r, b, 12)
	b = append(b, "\n\tfor <"...)
	b = append(b, t.rcpt...)
	b = append(b, ">; "...)
	b = append(b, date...)
	b = append(b, "\nMessage-ID: <"...)
	b = appendHex(r, b, 24)
	b = append(b, '@')
	b = append(b, dom...)
	b = append(b, ">\nDate: "...)
	b = append(b, date...)
	b = append(b, "\nFrom: "...)
	b = appendCap(b, first)
	b = append(b, ' ')
	b = appendCap(b, last)
	b = append(b, " <"...)
	b = append(b, first...)
	b = append(b, '.')
	b = append(b, last...)
	b = append(b, '@')
	b = append(b, dom...)
	b = append(b, ">\nTo: "...)
	b = append(b, t.rcpt...)
	b = append(b, "\nSubject: "...)
	if r.percent(40) {
		b = append(b, "Re: "...)
	}
	b = appendTitle(r, b, int(r.between(2, 7)))
	b = append(b, "\nMIME-Version: 1.0\n"...)
	if t.attached {
		b = append(b, "Content-Type: multipart/mixed; boundary=\"b1_"...)
		b = appendHex(r, b, 16)
		b = append(b, "\"\n\n--b1\nContent-Type: text/plain; charset=UTF-8\n\n"...)
	} else {
		b = append(b, "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n"...)
	}
	b = append(b, r.pick([]string{"Hi", "Hello", "Dear", "Good morning"})...)
	b = append(b, ",\n\n"...)
	return b
}

func (t *mailText) unit(b []byte) []byte {
	if !t.attached {
		return appendParagraphs(t.r, b, 1, 72)
	}
	// Attachment lines: base64 of random bytes, 76 columns.
	var raw [57]byte
	for range 16 {
		t.r.fill(raw[:])
		b = base64.StdEncoding.AppendEncode(b, raw[:])
		b = append(b, '\n')
	}
	return b
}

func (t *mailText) tail(b []byte) []byte {
	if t.attached {
		b = append(b, "--b1--\n"...)
	}
	return append(b, "\n-- \nSent from my phone\n"...)
}

// appendIP appends a random IPv4 address.
func appendIP(r *rng, b []byte) []byte {
	x := r.u64()
	for i := range 4 {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, 1+(x>>(8*i))&0xfd, 10)
	}
	return b
}

// accessLog is an Apache "combined" log whose clock ends near the file's
// mtime.
type accessLog struct {
	r      *rng
	clock  int64 // seconds since the epoch of the next line
	ips    []string
	stamp  []byte // formatted clock, reused while the second does not change
	stampS int64
}

func newAccessLog(r *rng, end time.Time, size int64) *accessLog {
	// About 200 bytes and 1.5 s per line, so the log spans size/133 seconds.
	l := &accessLog{r: r, clock: end.Unix() - size/133, stampS: -1}
	for range 64 {
		l.ips = append(l.ips, string(appendIP(r, nil)))
	}
	return l
}

func (l *accessLog) head(b []byte) []byte { return b }
func (l *accessLog) tail(b []byte) []byte { return b }

func (l *accessLog) unit(b []byte) []byte {
	r := l.r
	l.clock += r.between(0, 3)
	if l.clock != l.stampS {
		l.stampS = l.clock
		l.stamp = time.Unix(l.clock, 0).UTC().AppendFormat(l.stamp[:0], "02/Jan/2006:15:04:05 -0700")
	}
	if r.percent(80) {
		b = append(b, l.ips[r.intn(len(l.ips))]...)
	} else {
		b = appendIP(r, b)
	}
	b = append(b, " - - ["...)
	b = append(b, l.stamp...)
	b = append(b, "] \""...)
	b = append(b, r.pick([]string{"GET", "GET", "GET", "GET", "POST", "HEAD"})...)
	b = append(b, ' ')
	b = append(b, r.pick(urlPaths)...)
	if r.percent(20) {
		b = append(b, "?ver="...)
		b = appendVersion(r, b)
	}
	b = append(b, " HTTP/"...)
	b = append(b, r.pick([]string{"1.1", "1.1", "2.0"})...)
	b = append(b, "\" "...)
	b = append(b, r.pick([]string{"200", "200", "200", "200", "304", "301", "404", "403", "500"})...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.spread(100, 400000), 10)
	b = append(b, " \""...)
	if r.percent(50) {
		b = append(b, '-')
	} else {
		b = append(b, "https://example.com"...)
		b = append(b, r.pick(urlPaths)...)
	}
	b = append(b, "\" \""...)
	b = append(b, r.pick(userAgents)...)
	return append(b, "\"\n"...)
}

// sqlDump is a mysqldump of a WordPress database: table definitions, then
// extended INSERT statements, mostly post meta and posts as in a real shop
// or blog, then comments and options.
type sqlDump struct {
	r     *rng
	start int64 // Unix seconds of the first post
	id    int64 // next row id
	table int   // index into sqlTables, moved on every few batches
}

var sqlTables = []struct {
	name, columns string
}{
	{"wp_postmeta", "`meta_id` bigint unsigned NOT NULL AUTO_INCREMENT,\n  `post_id` bigint unsigned NOT NULL DEFAULT '0',\n  `meta_key` varchar(255) DEFAULT NULL,\n  `meta_value` longtext,\n  PRIMARY KEY (`meta_id`),\n  KEY `post_id` (`post_id`)"},
	{"wp_posts", "`ID` bigint unsigned NOT NULL AUTO_INCREMENT,\n  `post_author` bigint unsigned NOT NULL DEFAULT '0',\n  `post_date` datetime NOT NULL,\n  `post_content` longtext NOT NULL,\n  `post_title` text NOT NULL,\n  `post_status` varchar(20) NOT NULL DEFAULT 'publish',\n  `post_name` varchar(200) NOT NULL DEFAULT '',\n  `guid` varchar(255) NOT NULL DEFAULT '',\n  `post_type` varchar(20) NOT NULL DEFAULT 'post',\n  PRIMARY KEY (`ID`)"},
	{"wp_comments", "`comment_ID` bigint unsigned NOT NULL AUTO_INCREMENT,\n  `comment_post_ID` bigint unsigned NOT NULL DEFAULT '0',\n  `comment_author` tinytext NOT NULL,\n  `comment_author_email` varchar(100) NOT NULL DEFAULT '',\n  `comment_author_IP` varchar(100) NOT NULL DEFAULT '',\n  `comment_date` datetime NOT NULL,\n  `comment_content` text NOT NULL,\n  `comment_approved` varchar(20) NOT NULL DEFAULT '1',\n  PRIMARY KEY (`comment_ID`)"},
	{"wp_options", "`option_id` bigint unsigned NOT NULL AUTO_INCREMENT,\n  `option_name` varchar(191) NOT NULL DEFAULT '',\n  `option_value` longtext NOT NULL,\n  `autoload` varchar(20) NOT NULL DEFAULT 'yes',\n  PRIMARY KEY (`option_id`)"},
}

// metaKeys are wp_postmeta keys with the shape of their values.
var metaKeys = []string{"_edit_lock", "_edit_last", "_thumbnail_id", "_wp_attached_file", "_wp_page_template", "_price", "_regular_price", "_sale_price", "_stock_status", "_sku", "_stock", "_visibility", "total_sales", "_tax_status", "_manage_stock", "_backorders", "_sold_individually", "_virtual", "_downloadable", "_wc_average_rating", "_yoast_wpseo_metadesc", "_elementor_edit_mode"}

func (d *sqlDump) head(b []byte) []byte {
	b = append(b, "-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)\n--\n-- Host: localhost    Database: example_wp\n-- ------------------------------------------------------\n-- Server version\t8.0.36\n\n"...)
	b = append(b, "/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n/*!50503 SET NAMES utf8mb4 */;\n/*!40103 SET TIME_ZONE='+00:00' */;\n/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;\n"...)
	return d.create(b)
}

func (d *sqlDump) tail(b []byte) []byte {
	b = append(b, "UNLOCK TABLES;\n/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;\n\n-- Dump completed\n"...)
	return b
}

// create appends the definition of the current table.
func (d *sqlDump) create(b []byte) []byte {
	t := sqlTables[d.table]
	b = append(b, "\n--\n-- Table structure for table `"...)
	b = append(b, t.name...)
	b = append(b, "`\n--\n\nDROP TABLE IF EXISTS `"...)
	b = append(b, t.name...)
	b = append(b, "`;\nCREATE TABLE `"...)
	b = append(b, t.name...)
	b = append(b, "` (\n  "...)
	b = append(b, t.columns...)
	b = append(b, "\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_520_ci;\n\nLOCK TABLES `"...)
	b = append(b, t.name...)
	return append(b, "` WRITE;\n"...)
}

func (d *sqlDump) unit(b []byte) []byte {
	r := d.r
	if r.percent(2) {
		d.table = (d.table + 1) % len(sqlTables)
		b = append(b, "UNLOCK TABLES;\n"...)
		b = d.create(b)
	}
	name := sqlTables[d.table].name
	b = append(b, "INSERT INTO `"...)
	b = append(b, name...)
	b = append(b, "` VALUES "...)
	for i := range r.between(20, 80) {
		if i > 0 {
			b = append(b, ',')
		}
		d.id++
		post := d.id/8 + 1
		b = append(b, '(')
		b = strconv.AppendInt(b, d.id, 10)
		b = append(b, ',')
		switch name {
		case "wp_posts":
			b = strconv.AppendInt(b, r.between(1, 4), 10)
			b = append(b, ",'"...)
			b = time.Unix(d.start+d.id*600, 0).UTC().AppendFormat(b, "2006-01-02 15:04:05")
			b = append(b, "','"...)
			for range r.between(1, 4) {
				b = append(b, "<!-- wp:paragraph -->\\n<p>"...)
				b = appendSentence(r, b, 6, 22)
				b = append(b, "</p>\\n<!-- /wp:paragraph -->\\n\\n"...)
			}
			b = append(b, "','"...)
			b = appendTitle(r, b, int(r.between(2, 6)))
			b = append(b, "','publish','"...)
			b = append(b, r.pick(nouns)...)
			b = append(b, '-')
			b = strconv.AppendInt(b, d.id, 10)
			b = append(b, "','https://example.com/?p="...)
			b = strconv.AppendInt(b, d.id, 10)
			b = append(b, "','"...)
			b = append(b, r.pick([]string{"post", "page", "product", "product", "attachment", "revision", "nav_menu_item"})...)
			b = append(b, '\'')
		case "wp_postmeta":
			b = strconv.AppendInt(b, post, 10)
			b = append(b, ",'"...)
			key := metaKeys[r.intn(len(metaKeys))]
			b = append(b, key...)
			b = append(b, "','"...)
			switch key {
			case "_edit_lock":
				b = strconv.AppendInt(b, d.start+d.id*600, 10)
				b = append(b, ":1"...)
			case "_wp_attached_file":
				b = time.Unix(d.start+d.id*600, 0).UTC().AppendFormat(b, "2006/01/")
				b = append(b, r.pick(prose)...)
				b = append(b, ".jpg"...)
			case "_price", "_regular_price", "_sale_price":
				b = strconv.AppendInt(b, r.between(1, 300), 10)
				b = append(b, ".99"...)
			case "_stock_status":
				b = append(b, r.pick([]string{"instock", "instock", "outofstock"})...)
			case "_yoast_wpseo_metadesc":
				b = appendSentence(r, b, 8, 20)
			case "_sku":
				b = append(b, "SKU-"...)
				b = strconv.AppendInt(b, post, 10)
			default:
				b = append(b, r.pick([]string{"0", "1", "no", "yes", "taxable", "visible", "builder", "default"})...)
			}
			b = append(b, '\'')
		case "wp_comments":
			first, last := r.pick(firstNames), r.pick(lastNames)
			b = strconv.AppendInt(b, r.between(1, post), 10)
			b = append(b, ",'"...)
			b = appendCap(b, first)
			b = append(b, ' ')
			b = appendCap(b, last)
			b = append(b, "','"...)
			b = append(b, first...)
			b = append(b, '.')
			b = append(b, last...)
			b = append(b, '@')
			b = append(b, r.pick(mailDomains)...)
			b = append(b, "','"...)
			b = appendIP(r, b)
			b = append(b, "','"...)
			b = time.Unix(d.start+d.id*600, 0).UTC().AppendFormat(b, "2006-01-02 15:04:05")
			b = append(b, "','"...)
			b = appendSentence(r, b, 5, 30)
			b = append(b, "','1'"...)
		default: // wp_options: serialized PHP arrays
			b = append(b, '\'')
			b = append(b, r.pick(prefixes)...)
			b = append(b, '_')
			b = append(b, r.pick(nouns)...)
			b = append(b, "_settings','a:"...)
			n := r.between(1, 6)
			b = strconv.AppendInt(b, n, 10)
			b = append(b, ":{"...)
			for range n {
				k, v := r.pick(nouns), r.pick(prose)
				b = append(b, "s:"...)
				b = strconv.AppendInt(b, int64(len(k)), 10)
				b = append(b, ":\\\""...)
				b = append(b, k...)
				b = append(b, "\\\";s:"...)
				b = strconv.AppendInt(b, int64(len(v)), 10)
				b = append(b, ":\\\""...)
				b = append(b, v...)
				b = append(b, "\\\";"...)
			}
			b = append(b, "}','yes'"...)
		}
		b = append(b, ')')
	}
	return append(b, ";\n"...)
}
