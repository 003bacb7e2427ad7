#include "textflag.h"

// func secretLen() int: len(internal/graderkey.Secret)
TEXT ·secretLen(SB), NOSPLIT, $0-8
	MOVQ internal∕graderkey·Secret+8(SB), AX
	MOVQ AX, ret+0(FP)
	RET
