package initgrab

import (
	"strings"
	"testing"
)

// TestKeyOutOfReach passes when init could read no key byte.
func TestKeyOutOfReach(t *testing.T) {
	for _, s := range Seen {
		t.Log(s)
		if strings.HasPrefix(s, "read ") || strings.HasPrefix(s, "os.Getenv") {
			t.Error("init reached the channel: " + s)
		}
	}
}
