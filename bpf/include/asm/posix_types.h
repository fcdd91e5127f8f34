/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* See types.h: the generic definitions suit the BPF target. */
#include <asm-generic/posix_types.h>
