package bench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// profile is one kind of tree Generate can make.
type profile struct {
	name  string
	about string // one line for help texts
	// build plans the tree at the given scale and returns the root's mode.
	build func(p *plan, scale float64) (rootMode uint32)
}

var profiles = []profile{
	{"hosting", "a web-hosting account: WordPress, uploads, Maildir, SQL dump, logs, links (scale 1: ~600 MiB in ~20,000 files)", buildHosting},
	{"media", "large incompressible media files (scale 1: 1 GiB in 40 files)", buildMedia},
	{"smallfiles", "files under 8 KiB in nested directories (scale 1: 100,000 files)", buildSmallFiles},
	{"bigfile", "one file, compressible text then random bytes (scale 1: 2 GiB)", buildBigFile},
}

// Profiles returns the names of the profiles Generate accepts, in a fixed
// order. The slice is the caller's to keep.
func Profiles() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.name
	}
	return names
}

// ProfileHelp returns one line per profile, "name: description", for help
// texts.
func ProfileHelp() string {
	var b strings.Builder
	for _, p := range profiles {
		fmt.Fprintf(&b, "  %-10s  %s\n", p.name, p.about)
	}
	return b.String()
}

// lookupProfile returns the named profile or an error wrapping
// ErrUnknownProfile that lists the valid names.
func lookupProfile(name string) (profile, error) {
	for _, p := range profiles {
		if p.name == name {
			return p, nil
		}
	}
	return profile{}, fmt.Errorf("%w %q (valid: %s)", ErrUnknownProfile, name, strings.Join(Profiles(), ", "))
}

// scaled returns n×scale rounded, at least lo.
func scaled(n float64, scale float64, lo int64) int64 {
	return max(lo, int64(math.Round(n*scale)))
}

// buildMedia plans a few large media files whose sizes add up to
// 1 GiB×scale: a photographer's or video editor's account.
func buildMedia(p *plan, scale float64) uint32 {
	r := newRNG(p.seed, "media")
	count := int(scaled(40, scale, 1))
	total := scaled(1<<30, scale, 64<<10)
	weights := make([]int64, count)
	var sum int64
	for i := range weights {
		weights[i] = r.spread(1, 64)
		sum += weights[i]
	}
	for i, w := range weights {
		size := max(4<<10, total*w/sum)
		t := when(r)
		year := time.Unix(0, t).UTC().Format("2006")
		switch k := r.intn(10); {
		case k < 6:
			p.file(p.unique("media/videos/"+year, "clip-"+r.pick(prose), ".mp4"), 0o644, size, contentMP4, t)
		case k < 9:
			p.file(p.unique("media/photos/"+year, fmt.Sprintf("DSC_%04d", i), ".jpg"), 0o644, size, contentJPEG, t)
		default:
			p.file(p.unique("media/archive", r.pick(nouns)+"-export", ".bin"), 0o600, size, contentRandom, t)
		}
	}
	return 0o755
}

// smallContents are the kinds and extensions of the smallfiles profile.
var smallContents = []struct {
	ext string
	c   content
}{
	{".php", contentPHP}, {".css", contentCSS}, {".html", contentHTML},
	{".txt", contentText}, {".js", contentJS}, {".cache", contentRandom},
	{".json", contentJSON}, {".bin", contentRandom},
}

// buildSmallFiles plans 100,000×scale files under 8 KiB, 64 to a directory,
// in a three-level hierarchy: the worst case for per-file overheads.
func buildSmallFiles(p *plan, scale float64) uint32 {
	r := newRNG(p.seed, "smallfiles")
	count := int(scaled(100_000, scale, 1))
	for i := range count {
		dir := fmt.Sprintf("files/%03d/%02d", i/4096, i/64%64)
		k := smallContents[r.intn(len(smallContents))]
		size := r.spread(64, 8191)
		if r.percent(3) {
			size, k.c = 0, contentEmpty
		}
		name := fmt.Sprintf("%s/%s-%d%s", dir, r.pick(nouns), i, k.ext)
		p.file(name, fileMode(r), size, k.c, when(r))
		p.nodes[len(p.nodes)-1].exact = true // text must not overshoot 8 KiB
	}
	return 0o755
}

// buildBigFile plans one file of 2 GiB×scale: a log for its first half and
// random bytes for the second, so both the compressing and the raw paths of a
// transfer are exercised within one file.
func buildBigFile(p *plan, scale float64) uint32 {
	r := newRNG(p.seed, "bigfile")
	p.file("bigfile.dat", 0o644, scaled(2<<30, scale, 1<<10), contentHalfText, when(r))
	return 0o755
}
