// Package delta is rsync's delta algorithm (A. Tridgell and P. Mackerras,
// "The rsync algorithm", TR-CS-96-05, ANU 1996): how to send a file to a
// host that has an older copy of it (the basis) as copies of the basis's
// blocks and literal runs of what the basis lacks.
//
//	receiver: sig := ComputeSignature(basis)  // per block: weak rolling sum, truncated strong hash
//	          ... sig crosses the wire (package transfer) ...
//	sender:   Search(data, length, sig, ops)  // slide a block-sized window a byte at a time;
//	                                           // a weak-sum hit confirmed by the strong hash
//	                                           // is ops.Copy, the bytes slid over ops.Literal
//	receiver: rebuild from Copy and Literal, check a hash of the whole data
//
// Block sizes and strong-hash lengths follow rsync's generator.c
// (sum_sizes_sqroot); the strong hash is the low bytes of xxh3-64 rather
// than rsync's MD4/MD5. The package does no I/O of its own beyond reading
// the readers it is given, and keeps nothing between calls: an interrupted
// search leaves nothing behind. The wire form of a Signature and of the
// instructions, and the check of the rebuilt data, belong to package
// transfer.
//
// Files: signature.go — Signature, its limits, WeakSum, StrongSum and
// ComputeSignature; delta.go — Search, the Ops it reports to, and the
// weak-sum table.
package delta
