package golink

import "testing"

func TestSecret(t *testing.T) { t.Log(len(Secret())) }
