// Added to this image's GOROOT by the grader (environments/go-1.24).

// Package graderkey holds the grader's report channel between the runtime, which takes
// it before any other package is initialised, and package testing, which writes the
// signed records. It has no code: only the runtime writes these, only testing reads
// them. No other package can name them: the package is internal to the standard
// library, its symbols carry no //go:linkname, so the linker refuses a reference to
// them from outside (from Go code and from assembly alike).
package graderkey

var (
	// ReportFD is the write end of the report pipe (made close-on-exec), or -1.
	ReportFD = -1
	// Secret is what GRADER_KEY_FD held: 32 key bytes, then a JSON object of settings.
	Secret []byte
)
