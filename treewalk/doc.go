// Package treewalk walks a directory tree on the sending side and produces
// its file list: one Entry per file, directory, symlink, hardlink or special
// file, in a deterministic order (the root ".", then depth-first, names in
// byte order, each directory before its contents).
//
// The walk never follows symbolic links and never leaves the root it was
// given: it goes through an os.Root. Hardlinks of every kind but
// directories (files, symlinks, fifos, devices, as rsync -H) are detected
// by device and inode; the first path of a group (in walk order) is its
// leader and carries the data, the others name it in LinkTo. Each entry also carries its
// extended attributes, its POSIX ACLs (with the names of their users and
// groups) and, for a regular file with holes, the sparse flag. Paths longer
// than PATH_MAX are resolved piece by piece (OpenBeneath).
//
// It also holds what checks a file list from a peer (ValidPath,
// CheckList, ParseACL), rsync's include/exclude rules (Filter), and
// Compare, which compares two trees without going through Walk.
//
// A walk can also be had in chunks (WalkRootChunks, WalkPartsChunks): the
// same entries, order and errors, at most ChunkEntries at a time, produced
// on a goroutine of its own a bounded number of chunks ahead of its
// reader, so that a sender streams its list as it walks and memory does
// not grow with the tree (only the inodes with more than one link are
// remembered, for hardlink detection). ListChecker checks such a list
// chunk by chunk on the receiving side.
//
// Nothing is written; an interrupted walk leaves nothing behind.
//
//	f, _ := NewFilter(rules)              // or ParseFilter; nil keeps everything
//	list := Walk(ctx, root)               // or WalkRoot, WalkParts(ctx, parts, f) (merged)
//	    w.dir(ctx, p)                     // OpenBeneath p, names sorted, per name:
//	        f.Excluded(child, isDir)      // dropped: not listed, not descended
//	        w.add(child, st, fd)          // Entry, hardlink leader, w.readMeta
//	list.Entries, list.Errors             // walk order; per-entry PathErrors
//	c := WalkRootChunks(ctx, root)        // or WalkPartsChunks: the same, chunk by chunk
//	    c.Next() → Chunk{Entries, Errors, Leaders}, io.EOF after the last
//
// Files: entry.go — Kind, Entry, Xattr, ACLEntry; walk.go — Walk,
// WalkRoot, List, PathError and the walker; chunks.go — Chunk, Chunks,
// ChunkEntries, WalkRootChunks, WalkPartsChunks, ListChunks; parts.go — Part, WalkParts,
// IsUnder; merge.go — how the walks of parts that give the
// same paths merge (first given wins, directories combine, tree order,
// hardlink leaders) for WalkParts; mergechunks.go — the same merge as the
// parts are walked, for WalkPartsChunks; filter.go — Rule, Filter, the rule parsers and wildmatch;
// names.go — the uid and gid name cache; open_linux.go — OpenBeneath;
// xattr_linux.go — XattrAt, ListXattrsAt, FdPath, ParseACL, EncodeACL;
// path.go — ValidPath; check.go — CheckList, ListChecker; compare.go — Compare,
// CompareOptions, Difference.
package treewalk
