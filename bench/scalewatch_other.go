//go:build !linux

package bench

import (
	"errors"
	"time"
)

// firstFileWatch needs inotify: elsewhere no first file is seen.
type firstFileWatch struct{}

func watchFirstFile(string) (*firstFileWatch, error) {
	return nil, errors.New("watching for the first file needs Linux's inotify")
}

func (*firstFileWatch) Stop() (time.Time, bool, error) { return time.Time{}, false, nil }

func fsKind(string) string { return "" }
