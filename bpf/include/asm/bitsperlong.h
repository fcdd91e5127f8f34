/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* BPF is a 64-bit target; older uapi headers default to 32 otherwise. */
#ifndef __BITS_PER_LONG
#define __BITS_PER_LONG 64
#endif
#include <asm-generic/bitsperlong.h>
