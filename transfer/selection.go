package transfer

// SourceRoot is one part of a selection (Hello.Roots): the entry Rel
// beneath the directory Base on the sender. Rel is also its path in the
// file list, and so under DST: the client chooses Base and Rel to place
// each SRC (under its name, or under its whole path with --relative, or
// as DST itself with Rel "."). The sender lists the directories between
// Base and Rel too, with their own metadata.
type SourceRoot struct {
	// Base is a directory on the sender, as the user wrote it: symlinks
	// in it are followed, and it is relative to the login directory (or
	// the served root) unless absolute; "" is that directory itself.
	Base string `json:"base"`
	// Rel is a clean relative path beneath Base (treewalk.ValidPath), "."
	// for Base itself. Nothing beneath Base is followed if a symlink.
	Rel string `json:"rel"`
	// ImpliesRoot lists Base itself, with its metadata, as the root "."
	// of the file list, an implied directory (rsync -R does so for a path
	// whose kept part starts with "./", and --files-from for such a
	// line). Protocol version 4 and later.
	ImpliesRoot bool `json:"implies_root,omitempty"`
}

// Selection is what a sender sends of its tree: the parts in Roots, with
// Filters applied as it walks them (an excluded directory is not
// descended into).
type Selection struct {
	// Roots are the parts, in the order given: parts that give the same
	// path merge as rsync merges several SRCs (treewalk.WalkParts: the
	// first given wins, directories combine).
	Roots []SourceRoot
	// Filters are rsync include/exclude rules in short form ("+ PATTERN",
	// "- PATTERN"; see treewalk.Filter), first match wins.
	Filters []string
}
