// Added to this image's GOROOT by the grader (environments/go-1.24).

//go:build !linux

package runtime

// graderTakeKey: the report channel is read on Linux only.
func graderTakeKey() {}
