package dest

import (
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// inTheWay returns the "*deleting" lines of what a restore of e deletes
// first because DST has a directory where e, not a directory, goes: that
// directory's contents, listed as rsync lists them (rsync's
// delete_dir_contents: in each directory the subdirectories, each after
// its own contents, then the other entries, both in reverse name order;
// the directory itself is replaced, not listed). An empty directory, or
// none, gives no lines. A non-empty one without Force (rsync's --force,
// which --delete implies) gives ErrNonEmptyDir: the restore would leave
// it, and e's line is not printed. Filters do not protect the contents,
// as the writer's replacement does not.
func (w *Writer) inTheWay(cur *dirCursor, e *treewalk.Entry) ([]string, error) {
	if e.Kind == treewalk.KindDir || e.Path == "." {
		return nil, nil
	}
	st, dirfd, base, ok := w.itemStat(cur, e)
	if !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, nil
	}
	var lines []string
	if err := wayContents(dirfd, base, e.Path, &lines); err != nil {
		return nil, err
	}
	if len(lines) > 0 && !w.opts.Force {
		return nil, ErrNonEmptyDir
	}
	return lines, nil
}

// wayContents appends to lines the "*deleting" lines of the contents of
// directory name in dirfd (rel in the list's terms), in inTheWay's order.
// Nothing is followed: the directory is opened beneath dirfd without
// symlinks.
func wayContents(dirfd int, name, rel string, lines *[]string) error {
	fd, err := openDirBeneath(dirfd, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	var dirs, others []string
	for _, n := range names {
		st, err := lstatAt(fd, n)
		if err != nil {
			continue // gone meanwhile
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			dirs = append(dirs, n)
		} else {
			others = append(others, n)
		}
	}
	// rsync sorts a directory's names as "NAME/", so "a.x/" before "a/".
	slices.SortFunc(dirs, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
	slices.Sort(others)
	slices.Reverse(dirs)
	slices.Reverse(others)
	for _, d := range dirs {
		if err := wayContents(fd, d, rel+"/"+d, lines); err != nil {
			return err
		}
		*lines = append(*lines, "*deleting   "+rel+"/"+d+"/")
	}
	for _, n := range others {
		*lines = append(*lines, "*deleting   "+rel+"/"+n)
	}
	return nil
}
