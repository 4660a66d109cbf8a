package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/restoresync/restoresync/transfer"
)

// jobsValue is -j, --jobs: "auto" (stored as 0, restore.Options' auto) or
// a number of streams. "0" is stored as -1, which the range check refuses
// with the valid values.
type jobsValue struct{ n *int }

func (j jobsValue) String() string {
	if *j.n == 0 {
		return "auto"
	}
	return strconv.Itoa(*j.n)
}

func (j jobsValue) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") {
		*j.n = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q: must be auto or a number of streams, 1 to 256", s)
	}
	if n == 0 {
		n = -1
	}
	*j.n = n
	return nil
}

func (j jobsValue) Type() string { return "N|auto" }

// skipCompressValue is --skip-compress LIST, checked as it is set.
type skipCompressValue struct {
	list string
	set  bool
}

func (v *skipCompressValue) String() string {
	if !v.set {
		return ""
	}
	return v.list
}

func (v *skipCompressValue) Set(s string) error {
	if _, err := transfer.ParseSkipList(s); err != nil {
		return err
	}
	v.list, v.set = s, true
	return nil
}

func (v *skipCompressValue) Type() string { return "LIST" }
