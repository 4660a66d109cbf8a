// Package treewalk walks a directory tree on the sending side and produces
// its file list: one Entry per file, directory, symlink, hardlink or special
// file, in a deterministic order (the root ".", then depth-first, names in
// byte order, each directory before its contents).
//
// The walk never follows symbolic links and never leaves the root it was
// given: it goes through an os.Root. Hardlinks are detected by device and
// inode; the first path of a group (in walk order) is its leader and carries
// the data, the others name it in LinkTo. Each entry also carries its
// extended attributes, its POSIX ACLs (with the names of their users and
// groups) and, for a regular file with holes, the sparse flag. Paths longer
// than PATH_MAX are resolved piece by piece (OpenBeneath).
//
// Nothing is written; an interrupted walk leaves nothing behind.
package treewalk
