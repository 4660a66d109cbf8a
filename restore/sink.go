package restore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
)

// NewSink is transfer.ServerConfig.NewSink for a push: it decodes the
// client's dest.WriterOptions from opts and opens a Writer on dst.
func NewSink(ctx context.Context, dst string, opts json.RawMessage) (transfer.Sink, error) {
	var o dest.WriterOptions
	if len(opts) > 0 {
		if err := json.Unmarshal(opts, &o); err != nil {
			return nil, fmt.Errorf("receiver options: %w", err)
		}
	}
	return dest.NewWriter(dst, o)
}
