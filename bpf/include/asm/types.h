/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* clang -target bpf does not search the host's multiarch include directory
 * (/usr/include/x86_64-linux-gnu/asm); BPF needs only the generic types. */
#include <asm-generic/types.h>
