package asmlink

import "testing"

func TestSecret(t *testing.T) { t.Log(SecretLen()) }
